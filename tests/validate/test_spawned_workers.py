"""Training code that starts its worker with ``torch.multiprocessing.spawn`` (the ImageNet-example
launcher: ``mp.spawn(main_worker, nprocs=torch.cuda.device_count())``), with DDP and
``convert_sync_batchnorm`` (issue 40). The spawned child had no CUDA shim
(``init_process_group("nccl")`` failed) and no recorder; a spawn of one process now runs its
function in the run's own process, and SyncBatchNorm runs on the shim's CPU tensors."""

from __future__ import annotations

import textwrap

import pytest
import torch.multiprocessing

from cuda2neuron.cli import main as cli_main
from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._worker import _inline_spawn
from validate_helpers import PORT_DEVICE, copy_with_patches, needs_emulator

TRAIN = textwrap.dedent("""
    import os
    import tempfile

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def main_worker(gpu, ngpus):
        dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.gettempdir(), "pg"),
                                rank=gpu, world_size=ngpus)
        torch.cuda.set_device(gpu)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model).cuda(gpu)
        model = DDP(model, device_ids=[gpu])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(16, 4).cuda(gpu)
        for _ in range(3):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()


    if __name__ == "__main__":
        ngpus = torch.cuda.device_count()
        mp.spawn(main_worker, nprocs=ngpus, args=(ngpus,))
""")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("spawn")
    (root / "orig").mkdir()
    (root / "orig" / "train.py").write_text(TRAIN)
    assert cli_main(["migrate", str(root / "orig"), "--out", str(root / "port"), "-q"]) == 0
    return root


def _validate(original, port):
    return run_validation(ValidateRequest(original=original, port=port, port_device=PORT_DEVICE, mode="script",
                                          script="train.py"))


@pytest.mark.slow
@needs_emulator
def test_a_spawned_ddp_worker_with_sync_batchnorm_passes(pair):
    r = _validate(pair / "orig", pair / "port")
    assert r.verdict is Verdict.PASS, (r.failures, [(c.key, c.reason) for c in r.comparisons if c.verdict is not Verdict.PASS][:3])
    assert {c.step for c in r.comparisons if c.kind == "grad"} == {0, 1, 2}


@pytest.mark.slow
@needs_emulator
def test_a_defect_in_a_spawned_worker_fails(pair, tmp_path):
    port = copy_with_patches(pair / "port", tmp_path / "port", (("train.py", "nn.ReLU()", "nn.GELU()"),))
    r = _validate(pair / "orig", port)
    assert r.verdict is Verdict.FAIL, r.counts()
    d = r.divergence
    assert d is not None and d.module_path == "0:2", d  # the wrapped model's own path (DDP not recorded)
    assert any(h.path == "train.py" and "nn.GELU()" in h.text for h in d.hand_edits), d.hand_edits


def test_spawning_more_processes_than_validate_records_says_what_to_do(monkeypatch):
    monkeypatch.setattr(torch.multiprocessing, "spawn", torch.multiprocessing.spawn)
    monkeypatch.setattr(torch.multiprocessing, "start_processes", torch.multiprocessing.start_processes)
    _inline_spawn()
    seen = []
    torch.multiprocessing.spawn(lambda rank, tag: seen.append((rank, tag)), args=("x",), nprocs=1)
    assert seen == [(0, "x")]
    with pytest.raises(RuntimeError, match=r"^validate: torch.multiprocessing.spawn\(nprocs=2\) .* --nproc 2"):
        torch.multiprocessing.spawn(lambda rank: None, nprocs=2)
