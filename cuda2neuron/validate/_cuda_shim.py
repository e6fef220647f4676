"""CUDA-on-CPU shim: run unchanged CUDA PyTorch code on the CPU for the reference run.

Installed in the reference subprocess (when no real GPU is present) and in the float64 golden
subprocess, before any user code is imported. It maps:

* "cuda" / "cuda:N" / torch.device("cuda", N) / bare integer device indices in factories,
  `Tensor.to`, `Tensor.cuda()`, `nn.Module.to/.cuda()` -> cpu (a TorchFunctionMode);
* `torch.cuda.*` queries: is_available() -> True, device_count() -> 1, current_device() -> 0,
  set_device / synchronize / empty_cache / init -> no-ops, memory statistics -> 0, Event with
  wall-clock `elapsed_time`, streams -> no-op context managers, manual_seed* -> no-ops (see below);
* `torch.autocast("cuda")` / `torch.cuda.amp.autocast` -> CPU autocast with the same dtype
  (float16 when none is given, like CUDA);
* `torch.amp.GradScaler("cuda")` / `torch.cuda.amp.GradScaler` -> a working CPU GradScaler;
* `torch.distributed.init_process_group("nccl")` -> gloo, its `device_id=cuda:N` dropped (a gloo
  group on the CPU has no device to bind); `DistributedDataParallel(device_ids=[local_rank],
  output_device=...)` -> the CPU form (DDP refuses device_ids for CPU modules);
  `init_device_mesh("cuda", ...)` -> a CPU mesh; `nn.SyncBatchNorm` -> BatchNorm with the batch
  statistics summed over the process group (plain BatchNorm in a group of one); `device_count()` is the launch's
  LOCAL_WORLD_SIZE (1 outside a distributed launch), `set_device(N)` is remembered by
  `current_device()`;
* a host -> "cuda" transfer (`.cuda()`, `.to(device, non_blocking=...)`, `as_tensor(..., device=)`,
  `Module.to/.cuda`) copies unless the tensor already is a "device" tensor, and `pin_memory()`
  makes a pinned copy, as on a GPU (host and "device" share memory here: without the copy an
  in-place change of the device batch rewrote a host batch the loop reuses), in the DataLoader's
  pin-memory thread too;
* `torch.Generator(device="cuda")` -> a CPU generator;
* on a CUDA build of torch without a GPU: `torch.cuda.is_current_stream_capturing()` -> False
  (torch.compile asks it) and inductor's Triton device detection off (`_hide_triton_devices`);
* `torch.accelerator.*` answers as on a one-GPU CUDA machine: is_available() -> True,
  current_accelerator() -> device("cuda") (mapped to cpu like any other), device_count() and
  current_device_index() / set_device_index() as torch.cuda's, synchronize a no-op, memory figures 0
  (trap: left alone, the reference says "no accelerator" while torch.cuda says one is there, and
  code that asks torch.accelerator fails with "Cannot access accelerator device when none is
  available").

Randomness: validate draws every random number from the one CPU default generator in every run
(the port run moves random ops off the device, see `_rng.py`), so a seeded "cuda generator" has
nothing to seed: `torch.cuda.manual_seed*` are no-ops here exactly as `torch.neuron.manual_seed*`
are without effect in the port run. `x.is_cuda` is True for every tensor, and the legacy
`torch.cuda.FloatTensor`-style classes are their CPU twins. Limits (also in docs/validate.md):
`x.device.type == "cuda"` is false, so code that branches on the *observed* device takes its CPU
branch; CPU autocast casts a smaller op list than CUDA autocast; custom CUDA kernels, Triton,
CUDA graphs and NCCL-only features cannot run.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import time
import types
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["install", "DeviceRedirectMode"]

_CPU = torch.device("cpu")


def _is_source(device: Any, source: str) -> bool:
    if isinstance(device, torch.device):
        return device.type == source
    if isinstance(device, str):
        return device.split(":", 1)[0].strip() == source
    # A bare integer device index means "the accelerator" (trap: `.to(local_rank)`).
    return isinstance(device, int) and not isinstance(device, bool)


def _map(device: Any, source: str) -> Any:
    return _CPU if device is not None and _is_source(device, source) else device


# Set on a tensor that "lives on the device" under the shim: the result of a host -> device
# transfer or of a factory given the device. A plain attribute (not a weak set): it is read on
# every transfer, and `copy.deepcopy` keeps it, as a deep copy of a GPU tensor stays on the GPU.
_ON_DEVICE = "_cuda2neuron_on_device"
_PINNED = "_cuda2neuron_pinned"


def _on_device(t: torch.Tensor) -> bool:
    return getattr(t, _ON_DEVICE, False)


def _arrive(t: torch.Tensor, source: torch.Tensor | None = None) -> torch.Tensor:
    """``t`` as the device copy of ``source``: a new tensor (autograd kept), as a GPU makes one.

    Trap: the shim's host and "device" are the same memory, so a transfer that returned the host
    tensor itself let an in-place change of the device batch (Mixup's ``x.mul_(lam)``) rewrite a
    host batch the loop reuses — in the reference and golden runs only, the port (a real device)
    copies: a correct port FAILed at the second step.
    """
    if source is not None and _shares(t, source):
        t = t.clone()
    try:
        setattr(t, _ON_DEVICE, True)
    except (AttributeError, RuntimeError):  # a tensor subclass without a __dict__
        pass
    return t


def _shares(a: Any, b: Any) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a is b:
        return True
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    except (RuntimeError, NotImplementedError):  # no storage (a functional or meta tensor)
        return False


def _targets(device: Any, source: str) -> bool:
    return device is not None and not isinstance(device, (torch.dtype, torch.Tensor)) and _is_source(device, source)


class DeviceRedirectMode(TorchFunctionMode):
    """Rewrites device arguments of the `source` device type to cpu, and copies on a transfer.

    A transfer to the device (`.cuda()`, `.to("cuda" | device | index, non_blocking=...)`,
    `torch.as_tensor(x, device="cuda")`, `nn.Module.to/.cuda`) returns a copy unless the tensor is
    already a device tensor (`_ON_DEVICE`), and `pin_memory()` a (pinned) copy unless already
    pinned — what a GPU does.
    """

    def __init__(self, source: str = "cuda") -> None:
        super().__init__()
        self.source = source
        # > 0 while nn.Module.to(<the device>) converts the module's tensors: its parser has
        # already turned the device into "cpu" by then (see _patch_module_to).
        self.module_transfer = 0

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        # `.cuda()` (or `.neuron()` for the test-only neuron redirect) and pinning: the method
        # objects differ between torch versions, so match by name.
        if args and isinstance(args[0], torch.Tensor) and name in (self.source, "pin_memory"):
            t = args[0]
            if name == "pin_memory":
                if getattr(t, _PINNED, False):
                    return t
                pinned = t.clone()
                setattr(pinned, _PINNED, True)
                return pinned
            if _on_device(t):
                return t
            memory_format = kwargs.get("memory_format")
            return _arrive(t.clone() if memory_format is None else t.clone(memory_format=memory_format), t)
        transfer = False
        if "device" in kwargs:
            transfer = _targets(kwargs["device"], self.source)
            kwargs["device"] = _map(kwargs["device"], self.source)
        if func is torch.Tensor.to:
            if len(args) > 1 and not isinstance(args[1], (torch.dtype, torch.Tensor)):
                transfer = transfer or _targets(args[1], self.source)
                args = (args[0], _map(args[1], self.source), *args[2:])
            elif len(args) > 1 and isinstance(args[1], torch.Tensor):
                transfer = _on_device(args[1])  # x.to(other): other's device
            transfer = transfer or self.module_transfer > 0
        elif func is torch._C._nn._parse_to and args and not isinstance(args[0], (torch.dtype, torch.Tensor)):
            # nn.Module.to(local_rank): the module's own argument parser sees the bare index.
            args = (_map(args[0], self.source), *args[1:])
        result = func(*args, **kwargs)
        if transfer and isinstance(result, torch.Tensor):
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if source is not None and _on_device(source):
                return result
            return _arrive(result, source)
        return result


class _Event:
    """torch.cuda.Event with wall-clock timing (everything is synchronous on the CPU)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self._t: float | None = None

    def record(self, stream: Any = None) -> None:
        self._t = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "_Event") -> float:
        if self._t is None or end._t is None:
            raise RuntimeError("Event.elapsed_time: both events must be recorded first")
        return (end._t - self._t) * 1000.0


class _Stream:
    def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
        self.device = _CPU

    def synchronize(self) -> None:
        return None

    def wait_stream(self, other: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> _Event:
        event = event or _Event()
        event.record()
        return event

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        # torch's optimizers ask torch.accelerator.current_stream() this before every step.
        return False


_CURRENT = [0]  # the index torch.cuda.set_device was given (a rank's local rank)


def _set_device(device: Any) -> None:
    # Trap: the index is not validated against device_count — the launch decides how many
    # devices there are, and torch.cuda.set_device(local_rank) must work on every rank.
    if isinstance(device, torch.device):
        index = device.index
    elif isinstance(device, str):
        index = torch.device(device).index
    else:
        index = device
    if isinstance(index, int) and index >= 0:
        _CURRENT[0] = index


def _device_count() -> int:
    """``CUDA2NEURON_DEVICE_COUNT`` when set — the emulated neuron device reads the same variable,
    and validate sets it for every run, so the original and the port take the same branch of
    ``if device_count() > 1`` (with 1 here and the emulator's 2, only the port wrapped its model
    in DataParallel) — else one device per local rank, as on a node launched with
    --nproc_per_node=#GPUs."""
    for var in ("CUDA2NEURON_DEVICE_COUNT", "LOCAL_WORLD_SIZE"):
        try:
            return max(1, int(os.environ[var]))
        except (KeyError, ValueError):
            continue
    return 1


#: What the emulated neuron device reports (backend/csrc/runtime/allocator.cpp): a script that
#: sizes its batches by device memory sizes them alike in the original and the port; and not 0,
#: which DataParallel's balance check divides by.
_MEMORY = 16 << 30


def _props(device: Any = None) -> types.SimpleNamespace:
    # Every field torch's own _CudaDeviceProperties has: torch.compile's inductor reads
    # `gcnArchName` on a torch without CUDA (torch.version.cuda is None) while the shim says a GPU
    # is there, and crashed the reference (AttributeError) for any compiled model.
    return types.SimpleNamespace(name="cuda2neuron CUDA-on-CPU shim", total_memory=_MEMORY, major=8, minor=0,
                                 multi_processor_count=1, gcnArchName="", uuid="00000000-0000-0000-0000-000000000000",
                                 is_integrated=False, is_multi_gpu_board=False, L2_cache_size=0, warp_size=32,
                                 max_threads_per_multi_processor=2048, max_threads_per_block=1024,
                                 regs_per_multiprocessor=65536, shared_memory_per_block=49152,
                                 shared_memory_per_block_optin=49152, shared_memory_per_multiprocessor=65536,
                                 pci_bus_id=0, pci_device_id=0, pci_domain_id=0)


def _patch_device_module(golden: bool, source: str) -> None:
    if source == "cuda":
        cuda = torch.cuda
    else:
        # Test-only: a stand-in `torch.neuron` so hand-written ports run without the emulator.
        cuda = getattr(torch, source, None) or types.ModuleType(f"torch.{source}")
        setattr(torch, source, cuda)
    noop = lambda *a, **k: None  # noqa: E731
    zero = lambda *a, **k: 0  # noqa: E731
    values: dict[str, Any] = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "init": noop,
        "device_count": _device_count,
        "current_device": lambda: _CURRENT[0],
        "set_device": _set_device,
        "synchronize": noop,
        "empty_cache": noop,
        "ipc_collect": noop,
        "manual_seed": noop,
        "manual_seed_all": noop,
        "seed": noop,
        "seed_all": noop,
        "initial_seed": lambda: torch.initial_seed(),
        "get_rng_state": lambda device=None: torch.get_rng_state(),
        "set_rng_state": lambda state, device=None: None,
        "get_rng_state_all": lambda: [torch.get_rng_state()],
        "set_rng_state_all": lambda states: None,
        "memory_allocated": zero,
        "max_memory_allocated": zero,
        "memory_reserved": zero,
        "max_memory_reserved": zero,
        "memory_cached": zero,
        "max_memory_cached": zero,
        "reset_peak_memory_stats": noop,
        "reset_max_memory_allocated": noop,
        "reset_accumulated_memory_stats": noop,
        "memory_stats": lambda device=None: {},
        "memory_summary": lambda *a, **k: "(CUDA-on-CPU shim: no device memory)",
        "mem_get_info": lambda device=None: (_MEMORY, _MEMORY),
        "is_bf16_supported": lambda *a, **k: True,
        "get_device_name": lambda device=None: "cuda2neuron CUDA-on-CPU shim",
        "get_device_capability": lambda device=None: (8, 0),
        "get_device_properties": _props,
        "get_amp_supported_dtype": lambda: [torch.float16, torch.bfloat16, torch.float32],
        "Event": _Event,
        "Stream": _Stream,
        "current_stream": lambda device=None: _Stream(),
        "default_stream": lambda device=None: _Stream(),
        "stream": lambda s=None: contextlib.nullcontext(),
        "set_stream": noop,
        "device": lambda device=None: contextlib.nullcontext(),
        # torch.compile asks this before tracing whenever torch.cuda.is_available() (True here). A
        # CPU build answers from a stand-in; a CUDA build -- PyPI's default Linux wheel, what most
        # users have -- asks the CUDA runtime, which fails without a GPU ("CUDA driver version is
        # insufficient"): every compiled original crashed in the reference run.
        "is_current_stream_capturing": lambda: False,
    }
    # Legacy typed-tensor classes (torch.cuda.FloatTensor & co.) -> their CPU twins, so that
    # constructors, `x.type(torch.cuda.FloatTensor)` and isinstance checks work.
    for legacy in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool"):
        name = f"{legacy}Tensor"
        if hasattr(torch, name):
            values[name] = getattr(torch, name)
    for name, value in values.items():
        if isinstance(value, types.FunctionType):
            # A distinct function object per name: torch._dynamo's trace rules assert that one
            # object is not registered under two names.
            value = types.FunctionType(value.__code__, value.__globals__, name, value.__defaults__, value.__closure__)
        setattr(cuda, name, value)
    if source != "cuda":
        return
    cuda.amp.autocast = _make_cuda_amp_autocast(golden)
    cuda.amp.GradScaler = _make_cuda_amp_scaler()


def _make_autocast(golden: bool, source: str) -> type:
    base = torch.amp.autocast_mode.autocast

    class ShimAutocast(base):  # type: ignore[misc, valid-type]
        def __init__(self, device_type: str, dtype: torch.dtype | None = None, enabled: bool = True,
                     cache_enabled: bool | None = None) -> None:
            if device_type == source:
                # CUDA's default autocast dtype is float16; keep it rather than CPU's bfloat16.
                device_type, dtype = "cpu", dtype or torch.float16
            if golden:
                # The golden is the float64 answer: mixed precision is switched off there.
                enabled = False
            super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    return ShimAutocast


_AUTOCAST: dict[bool, type] = {}


def _make_cuda_amp_autocast(golden: bool) -> type:
    shim = _AUTOCAST[golden]

    class CudaAmpAutocast(shim):  # type: ignore[misc, valid-type]
        # Trap: the old API's first positional parameter is `enabled`, not a device type.
        def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True) -> None:
            super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    return CudaAmpAutocast


def _make_scaler(source: str) -> type:
    base = torch.amp.grad_scaler.GradScaler

    class ShimGradScaler(base):  # type: ignore[misc, valid-type]
        def __init__(self, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
            if str(device).split(":")[0] == source:
                device = "cpu"
            super().__init__(device, *args, **kwargs)

    return ShimGradScaler


_SCALER: list[type] = []


def _make_cuda_amp_scaler() -> type:
    shim = _SCALER[0]

    class CudaAmpGradScaler(shim):  # type: ignore[misc, valid-type]
        def __init__(self, init_scale: float = 65536.0, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True) -> None:
            super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    return CudaAmpGradScaler


def _make_generator() -> type:
    base = torch.Generator  # captured: torch.Generator is this subclass once installed

    class ShimGenerator(base):  # type: ignore[misc, valid-type]
        def __new__(cls, device: Any = "cpu") -> "ShimGenerator":
            return base.__new__(cls, device="cpu")

        def __init__(self, device: Any = "cpu") -> None:
            pass

    return ShimGenerator


def _patch_distributed() -> None:
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch built without distributed
        return
    if not dist.is_available():  # pragma: no cover
        return
    original = dist.init_process_group

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(backend, str) and "nccl" in backend:
            backend = backend.replace("nccl", "gloo")
        if isinstance(kwargs.get("backend"), str):
            kwargs["backend"] = kwargs["backend"].replace("nccl", "gloo")
        device_id = kwargs.get("device_id")
        if device_id is not None and _is_source(device_id, "cuda"):
            # Binding a group to a device is for NCCL's eager init; torch refuses a CUDA device
            # id without CUDA, and a gloo group on the CPU needs none.
            kwargs["device_id"] = None
        return original(backend, *args, **kwargs)

    dist.init_process_group = init_process_group
    dist.is_nccl_available = lambda: True
    _patch_ddp()
    _patch_device_mesh()


def _patch_ddp() -> None:
    """DDP(model, device_ids=[local_rank], output_device=local_rank) on the CPU.

    Trap: DDP raises for a CPU module given device_ids ("device_ids ... only work with single-device
    GPU modules or CPU modules"): on the CPU both must be None. Patched on the class itself, so
    `from torch.nn.parallel import DistributedDataParallel as DDP` (bound before or after the
    shim) gets it, and subclasses too.
    """
    from torch.nn.parallel import DistributedDataParallel

    original = DistributedDataParallel.__init__
    if getattr(original, "_cuda2neuron_shim", False):
        return

    @functools.wraps(original)
    def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        # (module, device_ids=None, output_device=None, dim=0, ...): move the first two to keywords.
        for name, value in zip(("device_ids", "output_device"), args[:2]):
            kwargs[name] = value
        args = args[2:]
        on_cpu = all(p.device.type == "cpu" for p in module.parameters())
        if on_cpu:
            ids = kwargs.get("device_ids")
            if ids is not None and all(_is_source(d, "cuda") for d in ids):
                kwargs["device_ids"] = None
            out = kwargs.get("output_device")
            if out is not None and _is_source(out, "cuda"):
                kwargs["output_device"] = None
        original(self, module, *args, **kwargs)

    __init__._cuda2neuron_shim = True  # type: ignore[attr-defined]
    DistributedDataParallel.__init__ = __init__  # type: ignore[method-assign]


def _patch_device_mesh() -> None:
    """init_device_mesh("cuda", shape) -> a CPU mesh (FSDP2 / tensor-parallel setups build one)."""
    try:
        import torch.distributed.device_mesh as device_mesh
    except ImportError:  # pragma: no cover - torch built without it
        return
    original = device_mesh.init_device_mesh

    @functools.wraps(original)
    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        if _is_source(device_type, "cuda"):
            device_type = "cpu"
        return original(device_type, *args, **kwargs)

    device_mesh.init_device_mesh = init_device_mesh
    if hasattr(torch.distributed, "init_device_mesh"):
        torch.distributed.init_device_mesh = init_device_mesh  # type: ignore[attr-defined]


def _patch_module_to(mode: DeviceRedirectMode) -> None:
    """`nn.Module.to(<the device>)` copies the module's tensors like `.cuda()` does.

    Trap: Module.to parses its arguments first (`_parse_to`, where the mode maps the device to
    cpu) and only then calls `t.to(cpu, ...)` on each tensor: the mode cannot tell that call is a
    transfer, so the wrapper says so for the duration of the call.
    """
    original = torch.nn.Module.to
    if getattr(original, "_cuda2neuron_shim", False):
        return

    @functools.wraps(original)
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        target = kwargs.get("device", args[0] if args else None)
        if isinstance(target, torch.Tensor):
            moving = _on_device(target)
        else:
            moving = _targets(target, mode.source)
        if not moving:
            return original(self, *args, **kwargs)
        mode.module_transfer += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            mode.module_transfer -= 1

    to._cuda2neuron_shim = True  # type: ignore[attr-defined]
    torch.nn.Module.to = to  # type: ignore[method-assign]


def _patch_is_device(source: str) -> None:
    """`t.is_cuda` is True: every tensor of the original "lives on the GPU" under the shim.

    The C property stays intact on torch's own base class; the override sits on torch.Tensor.
    """
    setattr(torch.Tensor, f"is_{source}", property(lambda self: True))
    if source == "cuda":
        torch.nn.Module.is_cuda = property(lambda self: True)  # type: ignore[attr-defined]


def _patch_load(source: str) -> None:
    """torch.load: storages saved on (or mapped to) the source device are restored on the CPU.

    Trap: without a map_location a checkpoint saved on CUDA restores to CUDA — and the patched
    `torch.cuda.is_available()` would let torch try.
    """
    original = torch.load

    def remap(loc: Any) -> Any:
        if loc is None or _is_source(loc, source):
            return "cpu"
        if isinstance(loc, dict):
            return {k: ("cpu" if _is_source(v, source) else v) for k, v in loc.items()} | {
                k: "cpu" for k in loc if isinstance(k, str) and k.startswith(source)}
        return loc

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        return original(f, remap(map_location), *args, **kwargs)

    torch.load = load


def _patch_accelerator() -> None:
    acc = getattr(torch, "accelerator", None)
    if acc is None:
        return
    noop = lambda *a, **k: None  # noqa: E731
    zero = lambda *a, **k: 0  # noqa: E731
    values = {
        "is_available": lambda *a, **k: True,
        "current_accelerator": lambda *a, **k: torch.device("cuda"),
        # As torch.cuda here: one device per local rank, the index set_device was given.
        "device_count": lambda: _device_count(),
        "current_device_index": lambda: _CURRENT[0],
        "current_device_idx": lambda: _CURRENT[0],
        "set_device_index": lambda device, *a, **k: _set_device(device),
        "set_device_idx": lambda device, *a, **k: _set_device(device),
        "synchronize": noop,
        "empty_cache": noop,
        "device_index": lambda device=None: contextlib.nullcontext(),
        "current_stream": lambda device=None: _Stream(),
        "set_stream": noop,
        "get_device_capability": lambda device=None: {"major": 8, "minor": 0},
        "get_memory_info": lambda device=None: (0, 0),
        "memory_allocated": zero,
        "max_memory_allocated": zero,
        "memory_reserved": zero,
        "max_memory_reserved": zero,
        "memory_stats": lambda device=None: {},
        "reset_peak_memory_stats": noop,
        "reset_accumulated_memory_stats": noop,
    }
    for name, value in values.items():
        if hasattr(acc, name):
            setattr(acc, name, value)


_INSTALLED: list[DeviceRedirectMode] = []


def _to_device(obj: Any) -> Any:
    """What DataParallel's scatter gives a single GPU: every tensor in ``obj`` (tuples, lists,
    dicts, nested) as a device tensor — a copy of a host tensor, a device tensor as is — and any
    other object by reference."""
    if isinstance(obj, torch.Tensor):
        return obj if _on_device(obj) else _arrive(obj.clone(), obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(_to_device(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v)) for k, v in obj.items())
    return obj


def _patch_data_parallel() -> None:
    """nn.DataParallel (and the functional data_parallel) as on one GPU: the module is called on
    the inputs moved to the device, with no replicas. Its own forward checks that the parameters
    are on cuda:0 and scatters through CUDA's torch._C._scatter: under the shim the original
    crashed at its first forward ("module must have its parameters and buffers on device
    cuda:0"), and the shim has one device, where DataParallel never replicates either."""
    # The module, not the function torch.nn.parallel exports under the same name.
    dp = importlib.import_module("torch.nn.parallel.data_parallel")

    def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*_to_device(inputs), **_to_device(kwargs))

    def data_parallel(module: Any, inputs: Any, device_ids: Any = None, output_device: Any = None, dim: int = 0,
                      module_kwargs: Any = None) -> Any:
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        return module(*_to_device(inputs), **_to_device(module_kwargs or {}))

    dp.DataParallel.forward = forward
    dp.data_parallel = data_parallel
    torch.nn.parallel.data_parallel = data_parallel


def _patch_sync_batch_norm() -> None:
    """nn.SyncBatchNorm on the CPU: its forward refuses any tensor not on a GPU ("SyncBatchNorm
    expected input tensor to be on GPU"), and DDP trainers convert every BatchNorm with
    `convert_sync_batchnorm` — the reference raised at its first forward. Outside training, or
    in a group of one process, it is plain BatchNorm (as SyncBatchNorm itself does there); across
    ranks, the batch statistics are summed over the process group (gloo, on the CPU tensors),
    through torch.distributed.nn's all_reduce so that the backward sums the gradients of the
    statistics too, as CUDA's sync_batch_norm kernel does."""
    import torch.nn.functional as F

    def forward(self: Any, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        self._check_non_zero_input_channels(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        batch_stats = self.training or self.running_mean is None
        import torch.distributed as dist

        group = self.process_group or (dist.group.WORLD if dist.is_available() else None)
        world = dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1
        if not batch_stats or world == 1:
            running = not self.training or self.track_running_stats
            return F.batch_norm(input, self.running_mean if running else None, self.running_var if running else None,
                                self.weight, self.bias, batch_stats, factor, self.eps)
        from torch.distributed.nn.functional import all_reduce

        channels = input.shape[1]
        dims = [0, *range(2, input.dim())]
        local = torch.cat([input.sum(dims), (input * input).sum(dims), input.new_full((1,), input.numel() / channels)])
        total = all_reduce(local, group=group)
        n = total[-1]
        mean = total[:channels] / n
        var = total[channels:2 * channels] / n - mean * mean
        if self.running_mean is not None:
            with torch.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.detach(), alpha=factor)
                self.running_var.mul_(1 - factor).add_(var.detach() * (n / (n - 1)), alpha=factor)
        shape = (1, channels) + (1,) * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.weight is not None:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out

    torch.nn.SyncBatchNorm.forward = forward  # type: ignore[method-assign]
    from torch.nn.parallel import DistributedDataParallel

    # DDP refuses a CPU module holding SyncBatchNorm ("SyncBatchNorm layers only work with GPU
    # modules"); that check is all the method does.
    DistributedDataParallel._passing_sync_batchnorm_handle = lambda self, module: None  # type: ignore[method-assign]


def _hide_triton_devices() -> None:
    """Inductor on the CPU, as on a CPU build: a CUDA build of torch comes with triton, and with
    the shim's torch.cuda.is_available() inductor's has_triton() says yes; every `x.is_cuda` being
    True then sent a compiled original's matmuls to Triton's GPU benchmarking ("Found no NVIDIA
    driver", pad_mm). Inductor's own switch turns the device detection off; the generated code is
    the CPU's C++ either way (the tensors are on the CPU)."""
    os.environ.setdefault("TORCHINDUCTOR_TRITON_DISABLE_DEVICE_DETECTION", "1")
    config = sys.modules.get("torch._inductor.config")
    if config is not None:  # imported before the shim: the variable was read already
        config.triton_disable_device_detection = True


def _patch_pin_memory_thread(mode: DeviceRedirectMode) -> None:
    """A DataLoader with workers and `pin_memory=True` pins each batch in a thread of its own.
    Trap: a torch function mode is thread-local, so that thread ran the real `pin_memory()`
    ("Cannot access accelerator device when none is available") and the reference crashed on
    the most common loader setting of CUDA trainers. The thread's loop runs inside the shim's
    mode (a mode holds no per-thread state: entering it on a second thread's stack is safe)."""
    from torch.utils.data._utils import pin_memory as pin_module

    loop = pin_module._pin_memory_loop

    @functools.wraps(loop)
    def _pin_memory_loop(*args: Any, **kwargs: Any) -> None:
        with mode:
            loop(*args, **kwargs)

    pin_module._pin_memory_loop = _pin_memory_loop


def install(golden: bool = False, source: str = "cuda") -> DeviceRedirectMode:
    """Install the shim in this process (idempotent) and return the active device mode.

    `source="neuron"` is a test-only variant that runs a hand-written port on the CPU.
    """
    if _INSTALLED:
        return _INSTALLED[0]
    _AUTOCAST[golden] = _make_autocast(golden, source)
    if golden:
        from cuda2neuron.validate._golden_scaler import GoldenGradScaler

        _SCALER.append(GoldenGradScaler)
    else:
        _SCALER.append(_make_scaler(source))
    torch.autocast = _AUTOCAST[golden]
    torch.amp.autocast = _AUTOCAST[golden]
    torch.amp.autocast_mode.autocast = _AUTOCAST[golden]
    torch.amp.GradScaler = _SCALER[0]
    torch.amp.grad_scaler.GradScaler = _SCALER[0]
    if hasattr(torch, "GradScaler"):
        torch.GradScaler = _SCALER[0]
    torch.Generator = _make_generator()
    _patch_device_module(golden, source)
    _patch_load(source)
    _patch_is_device(source)
    if source == "cuda":
        _patch_distributed()
        _patch_accelerator()
        _patch_sync_batch_norm()
        _hide_triton_devices()
    _patch_data_parallel()
    mode = DeviceRedirectMode(source)
    _patch_module_to(mode)
    _patch_pin_memory_thread(mode)
    mode.__enter__()
    _INSTALLED.append(mode)
    return mode
