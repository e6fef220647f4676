"""The emulated ``neuron`` process group: registration, zero copy, every collective against gloo on
CPU in a 2-process run, and a DDP training run under ``emulate`` + ``torchrun`` against gloo."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from neuron_testutil import REPO



torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from cuda2neuron.backend import BackendUnavailable  # noqa: E402
from cuda2neuron.backend import distributed as neuron_dist  # noqa: E402


FIXTURES = REPO / "tests" / "fixtures" / "ddp"
TIMEOUT = 300  # seconds for a whole multi-process run; 2 shared cores make startup slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load_fixture(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_ddp_fixture_{name}", FIXTURES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COLLECTIVE_NAMES = sorted(_load_fixture("collectives").COLLECTIVES)
# These results are built on the host by the collective itself (objects, a barrier's marker).
HOST_RESULTS = {"barrier", "all_gather_object"}


def _launch_ranks(script: Path, args: list[str], env: dict[str, str], world: int = 2) -> list[str]:
    """Start ``world`` ranks of ``script`` the way torchrun would and return each rank's stdout."""
    port = _free_port()
    procs = []
    for rank in range(world):
        rank_env = {**os.environ, **env, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                    "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                    "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(script), *args], env=rank_env, cwd=str(REPO),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            assert p.returncode == 0, f"{script.name} rank failed ({p.returncode}):\n{err[-3000:]}"
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


@pytest.fixture(scope="module")
def collective_reports() -> dict[int, dict[str, Any]]:
    outs = _launch_ranks(FIXTURES / "collectives.py", [], {})
    reports = {}
    for out in outs:
        line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
        data = json.loads(line[len("RESULT "):])
        assert data["backend"] == "neuron"
        reports[data["rank"]] = data["report"]
    assert sorted(reports) == [0, 1]
    return reports


@pytest.mark.slow  # two rank processes (shared by the table through the module fixture)
@pytest.mark.parametrize("name", COLLECTIVE_NAMES)
def test_collective_matches_gloo_on_cpu(collective_reports: dict[int, dict[str, Any]], name: str) -> None:
    for rank, report in collective_reports.items():
        got = report[name]
        assert "error" not in got, f"rank {rank}: {got.get('error')}"
        assert got["equal"], f"rank {rank}: neuron result differs from gloo on CPU ({got['values']})"
        expected_devices = ["cpu"] if name in HOST_RESULTS else ["neuron"]
        if got["devices"]:
            assert got["devices"] == expected_devices, f"rank {rank}: results on {got['devices']}"
    if name not in ("reduce", "gather"):  # these deliver only on the destination rank
        assert any(v for v in collective_reports[1][name]["values"]), "the reference produced no values"


def test_covers_the_collectives_data_parallel_and_fsdp_use() -> None:
    needed = {"all_reduce_sum", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
              "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier", "send_recv"}
    assert needed <= set(COLLECTIVE_NAMES)


# -- in-process: registration and zero copy on a 1-rank group ------------------------------------

def test_register_is_idempotent_and_maps_the_neuron_device() -> None:
    assert neuron_dist.register() is True
    assert neuron_dist.register() is True
    assert neuron_dist.is_registered()
    assert dist.Backend.NEURON == "neuron"
    assert dist.Backend.backend_capability["neuron"] == ["neuron"]
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    assert dist.Backend._plugins["NEURON"].creator_fn is neuron_dist._create


def test_register_is_a_no_op_without_gloo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(neuron_dist, "_registered", False)
    monkeypatch.setattr(dist, "is_gloo_available", lambda: False)
    assert neuron_dist.register() is False
    assert not neuron_dist.is_registered()


def test_register_refuses_a_foreign_neuron_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    def foreign(*args: object) -> None:
        raise AssertionError("never called")

    monkeypatch.setattr(neuron_dist, "_registered", False)
    monkeypatch.setitem(dist.Backend._plugins, "NEURON", dist.Backend._BackendPlugin(foreign, False))
    with pytest.raises(BackendUnavailable, match="already registered"):
        neuron_dist.register()


@pytest.fixture()
def one_rank_group() -> Any:
    neuron_dist.register()
    return neuron_dist._create(dist.HashStore(), 0, 1, timedelta(seconds=30))


def test_all_reduce_writes_into_the_neuron_tensor_without_a_copy(one_rank_group: Any) -> None:
    t = torch.arange(1024, dtype=torch.float32, device="neuron")
    ptr = t.data_ptr()
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.memory_allocated()
    work = one_rank_group.allreduce([t])
    work.wait()
    assert torch.neuron.max_memory_allocated() == before  # no staging buffer on the device
    assert t.data_ptr() == ptr and t.device.type == "neuron"
    (result,) = work.get_future().value()
    assert result.device.type == "neuron" and result.data_ptr() == ptr
    torch.testing.assert_close(t.cpu(), torch.arange(1024, dtype=torch.float32))


@pytest.mark.parametrize("device", ["meta"], ids=["meta-tensor"])
def test_a_tensor_on_another_device_is_a_clear_error(one_rank_group: Any, device: str) -> None:
    with pytest.raises(RuntimeError, match=f"'neuron' process group got a tensor on {device}"):
        one_rank_group.allreduce([torch.ones(2, device=device)])


def test_the_group_reports_its_backend_name(one_rank_group: Any) -> None:
    assert one_rank_group.getBackendName() == "neuron"
    assert one_rank_group.size() == 1 and one_rank_group.rank() == 0


# -- DDP and FSDP2: torchrun under `cuda2neuron emulate` against gloo on CPU ------------------------------

_LOSS = re.compile(r"^LOSS (\w+) (\d+) (\d+) (\S+) (\w+)$", re.M)
_SYNC = re.compile(r"^SYNC (\d+) (True|False) (\S+)$", re.M)


def _losses(out: str) -> tuple[dict[tuple[str, int, int], float], set[str]]:
    found = _LOSS.findall(out)
    return {(w, int(s), int(r)): float(v) for w, s, r, v, _ in found}, {d for *_, d in found}


@pytest.fixture(scope="module")
def training_runs() -> tuple[str, str]:
    """stdout of train_ddp.py: gloo on CPU (ranks launched directly), then neuron under
    `cuda2neuron emulate -- torchrun --nproc_per_node=2` (a ported script, no cuda2neuron import)."""
    script = FIXTURES / "train_ddp.py"
    reference = "".join(_launch_ranks(script, ["--backend", "gloo"], {}))
    cmd = [sys.executable, "-m", "cuda2neuron", "emulate", "--", sys.executable, "-m", "torch.distributed.run",
           "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={_free_port()}", str(script),
           "--backend", "neuron"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA2NEURON_EMULATE")}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=str(REPO), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return reference, proc.stdout


@pytest.mark.slow  # gloo ranks, then torchrun under emulate (one run shared by these tests)
@pytest.mark.parametrize("wrapper", ["ddp", "fsdp"], ids=["DDP", "FSDP2-fully_shard"])
def test_training_under_emulate_torchrun_matches_gloo_on_cpu(training_runs: tuple[str, str], wrapper: str) -> None:
    reference, emulated = training_runs
    ref_all, ref_devices = _losses(reference)
    got_all, got_devices = _losses(emulated)
    ref = {k: v for k, v in ref_all.items() if k[0] == wrapper}
    got = {k: v for k, v in got_all.items() if k[0] == wrapper}
    print(f"{wrapper} gloo on CPU:", sorted(ref.items()))
    print(f"{wrapper} neuron (emulated):", sorted(got.items()))
    assert got, f"no losses printed:\n{emulated[-2000:]}"
    assert ref_devices == {"cpu"} and got_devices == {"neuron"}
    assert sorted(got) == [(wrapper, s, r) for s in range(3) for r in range(2)] == sorted(ref)
    for key, value in ref.items():
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-7), key


@pytest.mark.slow  # shares the torchrun run above
def test_ddp_ranks_end_in_sync_with_the_cpu_weights(training_runs: tuple[str, str]) -> None:
    reference, emulated = training_runs
    syncs = _SYNC.findall(emulated)
    assert len(syncs) == 2 and all(ok == "True" for _, ok, _ in syncs)
    ref_weights = {w for *_, w in _SYNC.findall(reference)}
    got_weights = {w for *_, w in syncs}
    assert len(ref_weights) == 1 and len(got_weights) == 1  # every rank holds the same weights
    assert float(got_weights.pop()) == pytest.approx(float(ref_weights.pop()), rel=1e-6)
