"""torch.compile on the emulated device: a dynamo backend named "neuron" running aot_eager.

Inductor cannot generate code for the device; the emulator's "neuron" backend traces with dynamo
and AOTAutograd and executes the graphs eagerly on the device (documented in docs/backend.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]

_registered = False


def _neuron_backend(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    from torch._dynamo.backends.debugging import aot_eager

    return aot_eager(gm, example_inputs, **kwargs)


def register() -> None:
    global _registered
    if _registered:
        return
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "neuron" not in _BACKENDS:
        register_backend(name="neuron")(_neuron_backend)
    _registered = True
