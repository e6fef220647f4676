"""The bundled, emulated ``neuron`` device: a PrivateUse1 backend on host memory.

Importing this package registers nothing and does not import torch (the rewrite commands must
stay torch-free). :func:`activate` builds/loads the C++ extension and registers the device;
``cuda2neuron build-backend`` (or :func:`build`) prebuilds it.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any

from ._api import NEURON_MODULE_API
from ._errors import BackendUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    import torch

__all__ = [
    "INSTALL_HINT",
    "NEURON_MODULE_API",
    "SUPPORTED_TORCH",
    "TESTED_TORCH",
    "TESTED_TORCHES",
    "TORCHNEURON_TORCH",
    "BackendUnavailable",
    "activate",
    "build",
    "cpu_alias",
    "is_active",
    "install_torch_neuronx",
    "is_available",
    "real_torch_neuronx",
    "torch_support_note",
]

#: Inclusive lower, exclusive upper bound of the torch versions the emulator supports (tested: 2.13.0).
SUPPORTED_TORCH = ((2, 10), (2, 15))
#: The torch the emulator is built and tested against (README's install lines pin it).
TESTED_TORCH = "2.13.0"
#: Every torch the emulator's backend, OpInfo and validate suites have passed on (bench/torch214.sh
#: runs them on 2.14).
TESTED_TORCHES = ("2.13.0", "2.14.1")
#: The torch families a public TorchNeuron ships for, inclusive lower and exclusive upper bound:
#: Neuron 2.33/2.34 ship torch-neuronx 2.13.3.x for PyTorch 2.13 and 2.14.3.x for PyTorch 2.14
#: (AWS's TorchNeuron release notes; neuron-target-api-2.34.md section 5). torch 2.10-2.12 had
#: only private or vLLM-only builds.
TORCHNEURON_TORCH = ((2, 13), (2, 15))


def real_torch_neuronx() -> bool:
    """Is the real TorchNeuron importable here (not the emulator's ``torch_neuronx`` surface)?"""
    from ._registration import real_torch_neuronx as real

    return real()


def install_torch_neuronx() -> ModuleType:
    """``import torch_neuronx`` then gives the emulator's op-tracking surface (``get_fallback_ops``,
    ``clear_op_tracking``); call after ``activate()``. Idempotent."""
    from ._torch_neuronx import install

    return install()


def torch_support_note(version: str | None = None) -> str | None:
    """What a validation on torch ``version`` (default: the installed one) cannot say about
    Trainium, or None when a public TorchNeuron exists for it. Reads no torch module."""
    if version is None:
        version = importlib.metadata.version("torch")
    from ._registration import _parse_version

    have = _parse_version(version)
    lo, hi = TORCHNEURON_TORCH
    if lo <= have < hi:
        return None
    return (
        f"torch {version} has no public TorchNeuron release (torch-neuronx ships for torch "
        f"{lo[0]}.{lo[1]} and {hi[0]}.{hi[1] - 1} only): the emulator ran the port, but a PASS here says nothing "
        f"about the torch a Trainium run uses; validate on torch {lo[0]}.{lo[1]} or {hi[0]}.{hi[1] - 1}"
    )
#: What to install for validate / emulate / build-backend, in one line: torch's CPU build first
#: (on Linux PyPI's default wheel is the multi-GB CUDA build, and validation runs on the CPU),
#: then the extra's other packages (ninja, numpy).
INSTALL_HINT = (
    f'pip install "torch=={TESTED_TORCH}" --index-url https://download.pytorch.org/whl/cpu && '
    'pip install "cuda2neuron[validate]" (from a checkout: pip install -e ".[validate]")'
)


def activate(*, strict: bool | None = None, poison: bool | None = None) -> ModuleType:
    """Register the emulated ``neuron`` device (idempotent) and return ``torch.neuron``.

    ``strict`` makes float64 and complex tensors on the device an error (default: CUDA2NEURON_STRICT).
    ``poison`` fills every new host allocation of the process — device memory, and the results of
    the CPU kernels the device runs, which become device memory — with NaN bytes, so a value read
    from memory nobody wrote is NaN on every run instead of varying between runs (default:
    CUDA2NEURON_POISON; it costs one write pass over each new allocation). None keeps the setting.
    """
    from ._registration import activate as _activate

    return _activate(strict=strict, poison=poison)


def is_active() -> bool:
    """True once :func:`activate` registered the device in this process."""
    from ._registration import is_active as _is_active

    return _is_active()


def is_available() -> bool:
    """True when the device can be built or loaded here; has no side effects."""
    from ._registration import is_available as _is_available

    return _is_available()


def build(*, verbose: bool = False, progress: Callable[[str], None] | None = None) -> Any:
    """Compile the C++ extension into the cache (if needed) in a subprocess; returns the library path.

    ``progress`` is called with each progress line of a build (start, end); nothing is printed.
    Raises ``BackendBuildError`` (a RuntimeError) with the compiler's errors when the build fails.
    """
    from ._registration import prebuild

    return prebuild(verbose=verbose, progress=progress)


def cpu_alias(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor sharing ``t``'s memory (same sizes, strides, offset): zero copy."""
    from ._registration import extension

    return extension().cpu_alias(t)
