"""The part of ``torch_neuronx``'s API a port may call, for runs on the emulated device.

Ported code that checks its CPU fallbacks (``torch_neuronx.clear_op_tracking()``, run,
``torch_neuronx.get_fallback_ops()``; 2026 third-party code calls these on 2.33-era builds,
neuron-target-api-2.34.md section 4) must run under validate. ``install()`` puts this module in
``sys.modules["torch_neuronx"]`` after the emulator is active; it is marked
``__cuda2neuron_emulated__`` so that the checks for the *real* TorchNeuron (``activate()``
refuses to load next to it) look past it.

Backed by the emulator's op-support layer (``op_support.py``): the fallback ops are the
CPU_FALLBACK rows that ran. Left out: ``get_executed_ops()`` (it needs the device ops by name,
which the C++ accounting counts only in total).
"""

from __future__ import annotations

import sys
import types

__all__ = ["install", "is_emulated"]


def _get_fallback_ops() -> list[str]:
    """Ops that ran on the host since the last ``clear_op_tracking()`` (one name per op)."""
    from . import op_support

    return list(op_support.fallback_ops())


def _clear_op_tracking() -> None:
    from . import op_support

    op_support.clear()


def is_emulated(module: object) -> bool:
    return bool(getattr(module, "__cuda2neuron_emulated__", False))


def install() -> types.ModuleType:
    """Make ``import torch_neuronx`` give this surface (idempotent); the module."""
    have = sys.modules.get("torch_neuronx")
    if have is not None:
        return have
    module = types.ModuleType("torch_neuronx", "cuda2neuron's emulated torch_neuronx surface (op tracking only)")
    module.__cuda2neuron_emulated__ = True  # type: ignore[attr-defined]
    module.get_fallback_ops = _get_fallback_ops  # type: ignore[attr-defined]
    module.clear_op_tracking = _clear_op_tracking  # type: ignore[attr-defined]
    import importlib.machinery

    module.__spec__ = importlib.machinery.ModuleSpec("torch_neuronx", None)
    sys.modules["torch_neuronx"] = module
    return module
