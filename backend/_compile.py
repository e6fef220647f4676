"""torch.compile on the emulated device.

* ``backend="neuron"``: a dynamo backend that traces with dynamo + AOTAutograd and executes the
  graphs eagerly on the device (aot_eager). Inductor cannot generate code for the device.
* The default inductor backend on neuron tensors would die deep in code generation with
  ``KeyError: 'neuron'``; a guard in front of inductor's entry point says what to do instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NeuronInductorUnsupported", "register"]

_registered = False


class NeuronInductorUnsupported(RuntimeError):
    """Inductor was asked to generate code for neuron tensors."""


MESSAGE = ('torch.compile with the inductor backend cannot generate code for the neuron device; '
           'use torch.compile(model, backend="neuron") (on the emulator it runs the graph eagerly via aot_eager)')


def _neuron_backend(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    from torch._dynamo.backends.debugging import aot_eager

    return aot_eager(gm, example_inputs, **kwargs)


def _has_neuron_tensor(gm: Any, example_inputs: list[Any]) -> bool:
    import torch

    values = list(example_inputs)
    graph = getattr(gm, "graph", None)
    if graph is not None:
        values += [node.meta.get("val") for node in graph.nodes if node.op == "placeholder"]
    return any(isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in values)


def _guard_inductor() -> None:
    import torch._inductor.compile_fx as compile_fx_module

    original = compile_fx_module.compile_fx
    if getattr(original, "_neuron_guard", False):
        return

    def compile_fx(model_: Any, example_inputs_: list[Any], *args: Any, **kwargs: Any) -> Any:
        if _has_neuron_tensor(model_, example_inputs_):
            raise NeuronInductorUnsupported(MESSAGE)
        return original(model_, example_inputs_, *args, **kwargs)

    compile_fx._neuron_guard = True  # type: ignore[attr-defined]
    compile_fx_module.compile_fx = compile_fx


def register() -> None:
    global _registered
    if _registered:
        return
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "neuron" not in _BACKENDS:
        register_backend(name="neuron")(_neuron_backend)
    _guard_inductor()
    _registered = True
