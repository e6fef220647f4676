"""The CUDA-on-CPU shim: a table of CUDA idioms, each run under the shim and checked.

The shim patches torch process-wide, so all snippets run in one subprocess (one torch import)
that reports each snippet's value or error as JSON.
"""

from __future__ import annotations

import textwrap

import pytest

from validate_helpers import eval_in_fresh_interpreter

SNIPPETS = {
    "factory-device-kw": ("torch.zeros(2, device='cuda').device.type", "cpu"),
    "factory-device-obj": ("torch.ones(2, device=torch.device('cuda', 0)).sum().item()", 2.0),
    "tensor-cuda-method": ("torch.ones(2).cuda().device.type", "cpu"),
    "tensor-to-string": ("torch.ones(2).to('cuda:0', non_blocking=True).device.type", "cpu"),
    "tensor-to-int-index": ("torch.ones(2).to(0).device.type", "cpu"),
    "tensor-to-dtype-untouched": ("str(torch.ones(2).to(torch.float16).dtype)", "torch.float16"),
    "module-cuda": ("next(torch.nn.Linear(2, 2).cuda().parameters()).device.type", "cpu"),
    "module-to-local-rank-index": ("next(torch.nn.Linear(2, 2).to(1).parameters()).device.type", "cpu"),
    "module-to-index-and-dtype": ("str(next(torch.nn.Linear(2, 2).to(1, torch.float64).parameters()).dtype)", "torch.float64"),
    "module-to-device": ("next(torch.nn.Linear(2, 2).to(torch.device('cuda')).parameters()).device.type", "cpu"),
    "pin-memory": ("torch.ones(2).pin_memory().sum().item()", 2.0),
    # a DataLoader with workers and pin_memory=True pins in a thread of its own (a mode is thread-local)
    "pin-memory-thread": ("_pinned_in_loader_thread()", 2.0),
    # inductor's cache key reads the device's properties: the name on a CUDA build, gcnArchName
    # where torch has no CUDA (the CPU build)
    "device-properties-for-inductor": (
        "__import__('torch._inductor.codecache', fromlist=['x']).CacheBase.get_system()['device']['name'] == "
        "getattr(torch.cuda.get_device_properties(0), 'name' if torch.version.cuda else 'gcnArchName')", True),
    # What a CUDA build of torch (PyPI's default Linux wheel) does otherwise than the CPU build,
    # faked on either: torch.compile asks whether a CUDA graph is being captured (the CUDA runtime
    # raises without a GPU), and inductor takes triton (shipped with the CUDA build) for a GPU backend.
    "stream-capture-query-on-a-cuda-build": ("_on_a_cuda_build(torch.cuda.is_current_stream_capturing)", False),
    "inductor-triton-device-on-a-cuda-build": ("_triton_device_on_a_cuda_build()", False),
    "device-properties-name": ("torch.cuda.get_device_properties(0).name", "cuda2neuron CUDA-on-CPU shim"),
    # the emulated neuron device's 16 GiB (batch sizes derived from memory agree), never 0
    "device-memory-as-the-emulator": ("torch.cuda.get_device_properties(0).total_memory", 16 << 30),
    "free-memory": ("torch.cuda.mem_get_info()[1]", 16 << 30),
    # DataParallel as on one GPU: the module on a device copy of the batch, no scatter kernel
    "data-parallel-forward": ("torch.nn.DataParallel(torch.nn.Linear(2, 3)).cuda()(torch.ones(4, 2)).shape[1]", 3),
    "data-parallel-copies-the-host-batch": ("_inplace_after(lambda b: torch.nn.DataParallel(torch.nn.Identity())(b))", 1.0),
    "data-parallel-keyword-inputs": ("torch.nn.DataParallel(torch.nn.Identity())(input=torch.ones(2)).sum().item()", 2.0),
    "functional-data-parallel": ("torch.nn.parallel.data_parallel(torch.nn.Identity(), torch.ones(3)).sum().item()", 3.0),
    # A host -> "cuda" transfer copies, as on a GPU: an in-place change of the device tensor
    # leaves the host tensor alone (Mixup's x.mul_(lam) on a reused host batch).
    "cuda-copies-the-host-tensor": ("_inplace_after(lambda b: b.cuda())", 1.0),
    "cuda-non-blocking-copies": ("_inplace_after(lambda b: b.cuda(non_blocking=True))", 1.0),
    "to-cuda-string-copies": ("_inplace_after(lambda b: b.to('cuda'))", 1.0),
    "to-device-object-copies": ("_inplace_after(lambda b: b.to(torch.device('cuda', 0), non_blocking=True))", 1.0),
    "to-device-keyword-copies": ("_inplace_after(lambda b: b.to(device='cuda'))", 1.0),
    "to-index-copies": ("_inplace_after(lambda b: b.to(0))", 1.0),
    "pinned-then-cuda-copies": ("_inplace_after(lambda b: b.pin_memory().cuda(non_blocking=True))", 1.0),
    "pin-memory-copies": ("_inplace_after(lambda b: b.pin_memory())", 1.0),
    "as-tensor-to-cuda-copies": ("_inplace_after(lambda b: torch.as_tensor(b, device='cuda'))", 1.0),
    "to-cpu-stays-the-host-tensor": ("(lambda b: b.to('cpu') is b)(torch.ones(2))", True),
    "device-tensor-cuda-is-itself": ("(lambda d: d.cuda() is d and d.to('cuda') is d)(torch.ones(2).cuda())", True),
    "cuda-factory-is-a-device-tensor": ("(lambda d: d.cuda() is d)(torch.ones(2, device='cuda'))", True),
    "cuda-keeps-autograd": ("(lambda p: (p.cuda() * 3).sum().backward() or p.grad.tolist())(torch.ones(2, requires_grad=True))", [3.0, 3.0]),
    "module-to-cuda-copies-host-weights": ("_module_moved(lambda m: m.to('cuda'))", True),
    "module-cuda-copies-host-weights": ("_module_moved(lambda m: m.cuda())", True),
    "module-to-dtype-keeps-weights": ("(lambda m, w: m.to(torch.float32) is m and m.weight.data_ptr() == w)(*(lambda m: (m, m.weight.data_ptr()))(torch.nn.Linear(2, 2)))", True),
    "is-available": ("torch.cuda.is_available()", True),
    "device-count": ("torch.cuda.device_count()", 1),
    # the emulator's setting, which validate gives every run: one count in both worlds
    "device-count-as-the-emulator": ("(lambda env: (env.__setitem__('CUDA2NEURON_DEVICE_COUNT', '3'), "
                                     "torch.cuda.device_count(), env.pop('CUDA2NEURON_DEVICE_COUNT'))[1])"
                                     "(__import__('os').environ)", 3),
    "current-device": ("torch.cuda.current_device()", 0),
    "set-device-sync": ("(torch.cuda.set_device(0), torch.cuda.synchronize(), 'ok')[-1]", "ok"),
    "memory-stats": ("torch.cuda.max_memory_allocated() + torch.cuda.memory_allocated()", 0),
    "event-timing": (
        "(lambda a, b: (a.record(), b.record(), b.synchronize(), a.elapsed_time(b) >= 0)[-1])"
        "(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))", True),
    "manual-seed-is-noop": (
        "(torch.manual_seed(3), torch.rand(1).item())[1] == (torch.manual_seed(3), torch.cuda.manual_seed_all(9), torch.rand(1).item())[2]",
        True),
    "autocast-cuda-fp16": (
        "(lambda m: str(m(torch.ones(2, 2, device='cuda')).dtype))(lambda x: _ac(x))", "torch.float16"),
    "old-amp-autocast-positional-enabled": ("_old_ac(False)", "torch.float32"),
    "grad-scaler-cuda": ("_scaler(torch.amp.GradScaler('cuda'))", True),
    "grad-scaler-old-api": ("_scaler(torch.cuda.amp.GradScaler())", True),
    "cudnn-flags": ("(setattr(torch.backends.cudnn, 'benchmark', True), torch.backends.cudnn.benchmark)[1]", True),
    "generator-cuda": ("torch.Generator(device='cuda').device.type", "cpu"),
    "properties": ("torch.cuda.get_device_properties(0).major", 8),
    # distributed: a 1-rank group in this process (the helpers below)
    "set-device-is-remembered": ("(torch.cuda.set_device(1), torch.cuda.current_device(), torch.cuda.set_device(0))[1]", 1),
    "nccl-group-with-cuda-device-id": ("_group()", "gloo"),
    "ddp-device-ids-on-cpu": ("_ddp(lambda m: DDP(m, device_ids=[0], output_device=0))", "cpu"),
    "ddp-device-ids-positional": ("_ddp(lambda m: DDP(m, [torch.device('cuda', 0)], 0))", "cpu"),
    "ddp-without-device-ids": ("_ddp(lambda m: DDP(m))", "cpu"),
    "device-mesh-cuda": ("init_device_mesh('cuda', (1,)).device_type", "cpu"),
    # DDP trainers convert every BatchNorm: on the CPU SyncBatchNorm refused to run ("expected
    # input tensor to be on GPU"); in a group of one it is BatchNorm (outputs, gradients, stats).
    "sync-batchnorm-in-a-group-of-one": ("_sync_bn(train=True)", True),
    "sync-batchnorm-without-a-group": ("_sync_bn(train=True, group=False)", True),
    "sync-batchnorm-in-eval": ("_sync_bn(train=False)", True),
    # torch.accelerator answers like torch.cuda (a one-GPU machine), not "none available".
    "accelerator-available": ("torch.accelerator.is_available()", True),
    "accelerator-current": ("str(torch.accelerator.current_accelerator())", "cuda"),
    "accelerator-index": ("(torch.accelerator.set_device_index(1), torch.accelerator.current_device_index(), torch.cuda.current_device(), torch.accelerator.set_device_index(0))[1:3]", [1, 1]),
    "accelerator-sync": ("(torch.accelerator.synchronize(), 'ok')[1]", "ok"),
    "accelerator-device-maps-to-cpu": ("torch.ones(2, device=torch.accelerator.current_accelerator()).device.type", "cpu"),
    "adam-under-accelerator": ("_adam()", True),
}

HELPERS = textwrap.dedent(
    """
    def _ac(x):
        with torch.autocast("cuda"):
            return x @ x
    def _old_ac(flag):
        with torch.cuda.amp.autocast(flag):
            return str((torch.ones(2, 2) @ torch.ones(2, 2)).dtype)
    def _scaler(s):
        p = torch.nn.Parameter(torch.ones(2, device="cuda"))
        opt = torch.optim.SGD([p], lr=0.1)
        s.scale((p * 2).sum()).backward()
        s.step(opt)
        s.update()
        return bool(torch.allclose(p.detach(), torch.full((2,), 0.8)))
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel as DDP
    def _group():
        if not dist.is_initialized():
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                                    device_id=torch.device("cuda", 0))
        return dist.get_backend()
    def _ddp(wrap):
        _group()
        model = wrap(torch.nn.Linear(2, 2).cuda())
        model(torch.ones(1, 2, device="cuda")).sum().backward()
        return next(model.parameters()).grad.device.type
    def _sync_bn(train, group=True):
        if group:
            _group()
        torch.manual_seed(0)
        plain = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4))
        plain[1].running_mean.fill_(0.3)
        synced = torch.nn.SyncBatchNorm.convert_sync_batchnorm(__import__("copy").deepcopy(plain)).cuda()
        outs = []
        for m in (plain, synced):
            m.train(train)
            x = torch.arange(2 * 3 * 5 * 5, dtype=torch.float32).reshape(2, 3, 5, 5).div(40).cuda().requires_grad_()
            y = m(x)
            (y * y.detach().sign()).sum().backward()
            outs.append([y, x.grad, m[0].weight.grad, m[1].running_mean, m[1].running_var])
        return all(bool(torch.allclose(a, b, atol=1e-6)) for a, b in zip(*outs))
    def _inplace_after(transfer):
        host = torch.ones(2)
        transfer(host).mul_(0.5)
        return host[0].item()
    def _module_moved(move):
        m = torch.nn.Linear(2, 2)
        before = m.weight.detach()  # a view of the host weights
        opt = torch.optim.SGD(m.parameters(), lr=1.0)
        move(m)
        m(torch.ones(1, 2, device="cuda")).sum().backward()
        opt.step()  # the optimizer built before the move still holds the module's parameters
        return bool((m.weight.detach() != before).all())
    def _on_a_cuda_build(query):
        # A CUDA build's torch._C._cuda_isCurrentStreamCapturing is real (a CPU build's a stand-in
        # type) and asks the CUDA runtime, which raises on a machine without a GPU.
        import torch.cuda.graphs as graphs
        def no_driver():
            raise RuntimeError("CUDA error: CUDA driver version is insufficient for CUDA runtime version")
        saved = torch._C.__dict__["_cuda_isCurrentStreamCapturing"], graphs._cuda_isCurrentStreamCapturing
        torch._C._cuda_isCurrentStreamCapturing = graphs._cuda_isCurrentStreamCapturing = no_driver
        try:
            return query()
        finally:
            torch._C._cuda_isCurrentStreamCapturing, graphs._cuda_isCurrentStreamCapturing = saved
    def _triton_device_on_a_cuda_build():
        # The CUDA build ships triton; inductor then asks each device interface for a Triton backend.
        from torch.utils import _triton
        from torch._dynamo.device_interface import CudaInterface
        saved = _triton.has_triton_package, CudaInterface.__dict__["raise_if_triton_unavailable"]
        _triton.has_triton_package = lambda: True
        CudaInterface.raise_if_triton_unavailable = staticmethod(lambda device=None: None)
        clear = getattr(_triton.has_triton, "cache_clear", lambda: None)
        clear()
        try:
            return _triton.has_triton()
        finally:
            _triton.has_triton_package = saved[0]
            CudaInterface.raise_if_triton_unavailable = saved[1]
            clear()
    def _pinned_in_loader_thread():
        import queue, threading
        from torch.utils.data._utils import pin_memory as pm
        inq, outq, done = queue.Queue(), queue.Queue(), threading.Event()
        inq.put((0, torch.ones(2)))
        t = threading.Thread(target=pm._pin_memory_loop, args=(inq, outq, 0, done, "cuda"), daemon=True)
        t.start()
        _, data = outq.get(timeout=60)
        done.set()
        t.join()
        return data.sum().item() if isinstance(data, torch.Tensor) else data.exc_msg.strip().splitlines()[-1]
    def _adam():
        # torch's optimizers ask torch.accelerator.current_stream().is_capturing() each step.
        p = torch.nn.Parameter(torch.ones(2, device="cuda"))
        opt = torch.optim.Adam([p], lr=0.1)
        p.sum().backward()
        opt.step()
        return bool((p.detach() < 1).all())
    """
)


@pytest.fixture(scope="module")
def results() -> dict:
    return eval_in_fresh_interpreter(
        ["import json, torch", "from cuda2neuron.validate import _cuda_shim", "_cuda_shim.install()", HELPERS], SNIPPETS
    )


@pytest.mark.parametrize("name", list(SNIPPETS), ids=list(SNIPPETS))
def test_cuda_idiom_runs_on_cpu(results, name):
    got = results[name]
    assert "error" not in got, got.get("error")
    assert got["value"] == SNIPPETS[name][1]
