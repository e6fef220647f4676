"""The part of ``torch_neuronx``'s API a port may call, for runs on the emulated device.

Ported code that checks its CPU fallbacks (``torch_neuronx.clear_op_tracking()``, run,
``torch_neuronx.get_fallback_ops()``; 2026 third-party code calls these on 2.33-era builds,
neuron-target-api-2.34.md section 4) must run under validate. ``install()`` puts this module in
``sys.modules["torch_neuronx"]`` after the emulator is active; it is marked
``__cuda2neuron_emulated__`` so that the checks for the *real* TorchNeuron (``activate()``
refuses to load next to it) look past it.

The shapes follow torch-neuronx's own: each getter returns a list of distinct op names (its
trackers keep a set of names; the order is not specified, here it is sorted), tracking is on from
the import, and ``clear_op_tracking()`` empties both lists. (AWS's page "how to find CPU fallbacks
in your own model" was not readable; the shapes were read in torch-neuronx's pre-release sources
and in 2026 third-party code that calls the three functions.)

* ``get_fallback_ops()``: the CPU_FALLBACK rows of the op-support layer (``op_support.py``) that ran.
* ``get_executed_ops()``: the device ops that ran, by name (``aten::add``), from the C++ op tracking
  (``accounting.cpp``: counted per name while tracking is on, which ``install()`` turns on). The
  op-support table's rows are left out: a CPU_FALLBACK op ran on the host, an N op failed, and
  neither executed on Trainium. ``executed_op_counts()`` (the emulator's own) gives the counts.
"""

from __future__ import annotations

import sys
import types

# The marker test lives with the refusal it serves (_registration), which must not import this
# module back: the layers test forbids the cycle.
from ._registration import extension, is_emulated

__all__ = ["executed_op_counts", "install", "is_emulated", "uninstall"]


def _get_fallback_ops() -> list[str]:
    """Ops that ran on the host since the last ``clear_op_tracking()`` (one name per op)."""
    from . import op_support

    return list(op_support.fallback_ops())


def executed_op_counts() -> dict[str, int]:
    """Device ops run since the last ``clear_op_tracking()``: name -> executions (the emulator's
    own; ``torch_neuronx.get_executed_ops()`` gives the names)."""
    from . import op_support
    excluded = op_support.table_ops()
    return {name: int(count) for name, count in extension().op_tracking_executed() if name not in excluded}


def _get_executed_ops() -> list[str]:
    """Ops that executed on the device since the last ``clear_op_tracking()`` (one name per op)."""
    return sorted(executed_op_counts())


def _clear_op_tracking() -> None:
    from . import op_support
    op_support.clear()
    extension().op_tracking_clear()


def install() -> types.ModuleType:
    """Make ``import torch_neuronx`` give this surface (idempotent); the module."""
    have = sys.modules.get("torch_neuronx")
    if have is not None:
        return have
    module = types.ModuleType("torch_neuronx", "cuda2neuron's emulated torch_neuronx surface (op tracking only)")
    module.__cuda2neuron_emulated__ = True  # type: ignore[attr-defined]
    module.get_fallback_ops = _get_fallback_ops  # type: ignore[attr-defined]
    module.get_executed_ops = _get_executed_ops  # type: ignore[attr-defined]
    module.clear_op_tracking = _clear_op_tracking  # type: ignore[attr-defined]
    # Tracking from the import on, as torch-neuronx's: a port may read get_executed_ops() without
    # ever clearing. It costs the accounting's callback on every op (bench_backend.py --accounting).
    extension().op_tracking_set(True)
    import importlib.machinery

    module.__spec__ = importlib.machinery.ModuleSpec("torch_neuronx", None)
    sys.modules["torch_neuronx"] = module
    return module


def uninstall() -> None:
    """Take an emulated ``torch_neuronx`` out of ``sys.modules`` and turn its tracking off (tests)."""
    if is_emulated(sys.modules.get("torch_neuronx")):
        del sys.modules["torch_neuronx"]
    extension().op_tracking_set(False)
