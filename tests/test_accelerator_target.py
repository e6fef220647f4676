"""`--target accelerator` output of the bundled example runs on the emulated device and on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda2neuron.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def port(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("acc") / "cnn"
    assert main(["migrate", str(ROOT / "examples" / "cnn_cuda"), "--out", str(out), "--target", "accelerator", "-q"]) == 0
    return out


def _run(port: Path, *prefix: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [*prefix, sys.executable, "train.py", "--steps", "2", "--ckpt-dir", str(port / "ckpt")]
    return subprocess.run(cmd, cwd=port, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_accelerator_port_runs_on_the_emulated_device(port):
    result = _run(port, sys.executable, "-m", "cuda2neuron", "emulate", "--")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "val loss" in result.stdout


@pytest.mark.xfail(
    strict=True,
    reason="the original calls torch.cuda.synchronize() unguarded; its accelerator port "
    "torch.accelerator.synchronize() raises where no accelerator exists (guarding such calls "
    "is not implemented yet)",
)
def test_accelerator_port_runs_on_cpu(port):
    result = _run(port)
    assert result.returncode == 0, result.stderr[-2000:]
