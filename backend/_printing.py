"""Printing neuron tensors without float64 on the device.

torch formats a tensor's values by converting them to float64 *on the tensor's device*
(torch._tensor_str.tensor_totype). On the neuron device that would trip the float64 warning on
every first print, and fail in strict mode. Format from a host copy instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    import torch._tensor_str as tensor_str

    original = tensor_str.tensor_totype

    def tensor_totype(t: Any) -> Any:
        return original(t.cpu() if t.device.type == "neuron" else t)

    tensor_str.tensor_totype = tensor_totype
    _installed = True
