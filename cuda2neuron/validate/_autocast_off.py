"""Autocast forced off in this process: the logic runs of validate.

When the original runs under reduced-precision autocast (fp16 AMP), its own error against the
float64 golden can be so large that a broken port passes (BatchNorm over a handful of values per
channel is ~50% off in its gradients under fp16). The logic pair runs the original and the port
once more with autocast off in both — the same code, the same weights, float32 — where a changed
computation shows with tight bounds; the AMP runs then judge only the precision policy.

Mechanism: `torch.amp.autocast_mode.autocast.__init__` is wrapped to pass ``enabled=False``. Every
spelling goes through it — `torch.autocast(...)`, `torch.amp.autocast`, `torch.cuda.amp.autocast`
and `torch.cpu.amp.autocast` (subclasses that call it), the CUDA-on-CPU shim's autocast, autocast
used as a decorator — whenever the class was imported. Autocast entered by other means
(`torch.set_autocast_enabled`) is not covered.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

__all__ = ["install"]


def install() -> None:
    """Force every autocast region of this process off (idempotent)."""
    base = torch.amp.autocast_mode.autocast
    original = base.__init__
    if getattr(original, "_cuda2neuron_off", False):
        return

    @functools.wraps(original)
    def __init__(self: Any, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        original(self, device_type, dtype=dtype, enabled=False, cache_enabled=cache_enabled)

    __init__._cuda2neuron_off = True  # type: ignore[attr-defined]
    base.__init__ = __init__  # type: ignore[method-assign]
