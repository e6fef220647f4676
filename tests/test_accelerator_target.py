"""`--target accelerator` output of the fixture projects runs on the emulated device and on CPU.

The CPU run has no accelerator at all: ``torch.accelerator.*`` raises there, so this is what
proves the port guards its device-module calls and keeps the CPU from passing for the
accelerator in device tests. These are the engine issue's projects (a CNN trainer, a GPT
trainer; the module of non-device strings must come out unchanged). `lstm_tagger` is not here:
it refuses to start without a GPU by its own check, and its legacy typed-tensor aliases
(`LongTensor = torch.cuda.LongTensor if use_cuda else ...`) are reported for a hand edit (CN106).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda2neuron.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = ROOT / "tests" / "fixtures" / "projects"

# name: (source tree, train.py arguments, what a finished run prints)
CASES = {
    "cnn_cuda": (ROOT / "examples" / "cnn_cuda", ("--steps", "2", "--ckpt-dir", "{tmp}/ckpt"), "saved and reloaded"),
    "gpt_trainer": (PROJECTS / "gpt_trainer", ("--steps", "2"), "saved "),
}


@pytest.fixture(scope="module")
def ports(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("acc")
    out = {}
    for name, (src, *_rest) in CASES.items():
        out[name] = root / name
        assert main(["migrate", str(src), "--out", str(out[name]), "--target", "accelerator", "-q"]) == 0
    return out


def _run(port: Path, args: tuple[str, ...], tmp: Path, *prefix: str) -> subprocess.CompletedProcess:
    # TMPDIR: the GPT trainer writes its checkpoint under tempfile.gettempdir().
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp)}
    cmd = [*prefix, sys.executable, "train.py", *(a.format(tmp=tmp) for a in args)]
    return subprocess.run(cmd, cwd=port, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow  # a training run in a subprocess (4-8 s)
@pytest.mark.parametrize("name", list(CASES))
def test_accelerator_port_runs_on_the_emulated_device(ports, tmp_path, name):
    _src, args, done = CASES[name]
    result = _run(ports[name], args, tmp_path, sys.executable, "-m", "cuda2neuron", "emulate", "--")
    assert result.returncode == 0, result.stderr[-2000:]
    assert done in result.stdout


@pytest.mark.slow  # a training run in a subprocess (4-8 s)
@pytest.mark.parametrize("name", list(CASES))
def test_accelerator_port_runs_on_cpu(ports, tmp_path, name):
    _src, args, done = CASES[name]
    result = _run(ports[name], args, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert done in result.stdout


def test_port_guards_what_needs_an_accelerator(ports):
    """The calls that raise without an accelerator are behind an availability check."""
    cnn = (ports["cnn_cuda"] / "train.py").read_text()
    assert "if torch.accelerator.is_available():\n                    torch.accelerator.synchronize()" in cnn
    assert "max_memory_allocated() if torch.accelerator.is_available() else 0" in cnn
    assert 'if torch.accelerator.is_available() else "cpu")' in cnn  # map_location="cuda:0"
    gpt = (ports["gpt_trainer"] / "train.py").read_text()
    assert 'getattr(torch.accelerator.current_accelerator(), "type", "no accelerator")' in gpt


def test_non_device_strings_stay_unchanged(tmp_path):
    src = PROJECTS / "not_device_strings"
    out = tmp_path / "nds"
    assert main(["migrate", str(src), "--out", str(out), "--target", "accelerator", "--unsafe-fixes", "-q"]) == 0
    for path in src.rglob("*"):
        if path.is_file():
            assert (out / path.relative_to(src)).read_bytes() == path.read_bytes(), path


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # a process group in a subprocess (2-4 s)
def test_distributed_port_runs_on_cpu_with_gloo(tmp_path):
    """The accelerator port of a torchrun script (init_process_group(device_id=...), DDP with
    device_ids) runs as one gloo process on this CPU-only machine: the backend falls back to
    gloo and the device arguments to None (CN401, CN407). The port is migrated afresh here, not
    read from the fixture pair, so the test follows the rules as they are."""
    src = ROOT / "tests" / "fixtures" / "pairs" / "dist" / "ddp_device_args.in.py"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_bytes(src.read_bytes())
    out = tmp_path / "port"
    assert main(["migrate", str(tmp_path / "src"), "--out", str(out), "--target", "accelerator", "-q"]) in (0, 1)
    port = (out / "train.py").read_text()
    assert "device_ids=([local_rank] if torch.accelerator.is_available() else None)" in port
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = subprocess.run(
        [sys.executable, "train.py"], cwd=out, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "step done" in result.stdout
