"""Shared fixtures of the emulated neuron device tests.

The device is activated once per test session (the C++ build is cached across sessions under
$CUDA2NEURON_CACHE or ~/.cache/cuda2neuron; on a fresh machine the first test builds it).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")


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
