"""Shared fixtures of the emulated neuron device tests.

The device is activated once per test session (the C++ build is cached across sessions under
$CUDA2NEURON_CACHE or ~/.cache/cuda2neuron; on a fresh machine the first test builds it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def neuron() -> ModuleType:
    import cuda2neuron.backend as backend

    if not backend.is_available():
        pytest.skip("the neuron emulator cannot be built here (no C++ compiler or unsupported torch)")
    return backend.activate()


@pytest.fixture(autouse=True)
def _seeded() -> Iterator[None]:
    torch.manual_seed(0)
    yield


def run_python(code: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (activation is per process) and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=str(REPO))


def assert_close_to_cpu(dev: torch.Tensor, ref: torch.Tensor, *, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    assert dev.device.type == "neuron", dev.device
    torch.testing.assert_close(dev.cpu(), ref, atol=atol, rtol=rtol)
