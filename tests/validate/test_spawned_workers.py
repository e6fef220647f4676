"""Training code that starts its worker with ``torch.multiprocessing.spawn`` (the ImageNet-example
launcher: ``mp.spawn(main_worker, nprocs=torch.cuda.device_count())``), with DDP and
``convert_sync_batchnorm`` (issue 40). The spawned child had no CUDA shim
(``init_process_group("nccl")`` failed) and no recorder; a spawn of one process now runs its
function in the run's own process, and SyncBatchNorm runs on the shim's CPU tensors. Under
``--nproc N`` a spawn of N processes runs one in each of validate's N ranks, recorded and compared
rank by rank, each run's group meeting at its own rendezvous whatever address the script names."""

from __future__ import annotations

import textwrap

import pytest
import torch.multiprocessing

from cuda2neuron.cli import main as cli_main
from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
import torch.distributed

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


# The ImageNet example's shape: the address comes from --dist-url, the same in every run.
# SyncBatchNorm left out: over two ranks it runs torch.batch_norm_stats, which the emulated device
# does not have (a gap of its own; one rank runs plain BatchNorm).
_TWO = (
    ('dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.gettempdir(), "pg"),',
     'dist.init_process_group("nccl", init_method="tcp://127.0.0.1:23456",'),
    ("model = nn.SyncBatchNorm.convert_sync_batchnorm(model).cuda(gpu)", "model = model.cuda(gpu)"),
    ("x = torch.randn(16, 4).cuda(gpu)",
     "x = torch.randn(16, 4, generator=torch.Generator().manual_seed(gpu)).cuda(gpu)"),
)
TRAIN_TWO = TRAIN
for _old, _new in _TWO:
    assert TRAIN_TWO.count(_old) == 1, _old
    TRAIN_TWO = TRAIN_TWO.replace(_old, _new)


def _launched_as(monkeypatch, rank: int, world: int) -> list:
    for name, value in (("LOCAL_RANK", rank), ("LOCAL_WORLD_SIZE", world), ("GROUP_WORLD_SIZE", 1),
                        ("TORCHELASTIC_RUN_ID", "cuda2neuron-validate")):
        monkeypatch.setenv(name, str(value))
    for module in (torch.multiprocessing,):
        monkeypatch.setattr(module, "spawn", module.spawn)
        monkeypatch.setattr(module, "start_processes", module.start_processes)
    calls: list = []
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda *a, **kw: calls.append((a, kw)))
    _inline_spawn()
    return calls


def test_under_nproc_each_rank_runs_its_own_spawned_process_at_the_runs_rendezvous(monkeypatch):
    calls = _launched_as(monkeypatch, rank=1, world=2)
    seen = []

    def worker(gpu, ngpus):
        seen.append((gpu, ngpus))
        torch.distributed.init_process_group("gloo", "tcp://127.0.0.1:23456", rank=gpu, world_size=ngpus)

    torch.multiprocessing.spawn(worker, args=(2,), nprocs=2)
    assert seen == [(1, 2)]
    assert calls == [(("gloo", "env://"), {"rank": 1, "world_size": 2})]
    with pytest.raises(RuntimeError, match=r"^validate: torch.multiprocessing.spawn\(nprocs=4\) .* --nproc 4"):
        torch.multiprocessing.spawn(worker, args=(4,), nprocs=4)


@pytest.fixture(scope="module")
def pair_two(tmp_path_factory):
    root = tmp_path_factory.mktemp("spawn2")
    (root / "orig").mkdir()
    (root / "orig" / "train.py").write_text(TRAIN_TWO)
    assert cli_main(["migrate", str(root / "orig"), "--out", str(root / "port"), "-q"]) == 0
    return root


@needs_emulator
def test_two_spawned_ddp_workers_under_nproc_2_are_compared_rank_by_rank(pair_two):
    r = run_validation(ValidateRequest(original=pair_two / "orig", port=pair_two / "port", port_device=PORT_DEVICE,
                                       mode="script", script="train.py", nproc=2))
    problems = [(c.key, c.reason) for c in r.comparisons if c.verdict is not Verdict.PASS][:3]
    assert r.verdict is Verdict.PASS, (r.failures, problems)
    grads = {(c.key.split("/")[0], c.step) for c in r.comparisons if c.kind == "grad"}
    assert grads == {(f"rank{r}", s) for r in (0, 1) for s in (0, 1, 2)}, sorted(grads)
