"""Shared fixtures of the emulated neuron device tests.

The device is activated once per test session (the C++ build is cached across sessions under
$CUDA2NEURON_CACHE or ~/.cache/cuda2neuron; on a fresh machine the first test builds it).
When it cannot be built, the tests fail in CI (CI=true) and skip elsewhere, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType
from typing import NoReturn

import pytest

torch = pytest.importorskip("torch")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _cannot_run(reason: str) -> NoReturn:
    """In CI (CI=true) the emulator must build: a skip there would hide a broken build behind a
    green run. Elsewhere (a laptop without a compiler) the backend tests skip with the reason."""
    if _in_ci():
        pytest.fail(f"the neuron emulator cannot be used in CI: {reason}", pytrace=False)
    pytest.skip(f"the neuron emulator cannot be used here: {reason}")


@pytest.fixture(scope="session", autouse=True)
def neuron() -> ModuleType:
    import cuda2neuron.backend as backend
    from cuda2neuron.backend._build import BackendBuildError
    from cuda2neuron.backend._emulate import reason_unavailable

    if not backend.is_available():
        _cannot_run(reason_unavailable() or "no C++ compiler or ninja, or an unsupported torch")
    try:
        return backend.activate()
    except (backend.BackendUnavailable, BackendBuildError) as exc:
        _cannot_run(str(exc))


@pytest.fixture(autouse=True)
def _seeded() -> Iterator[None]:
    torch.manual_seed(0)
    yield
