"""torch.compile on the emulated device.

* ``backend="neuron"``: a dynamo backend that traces with dynamo + AOTAutograd and executes the
  graphs eagerly on the device (aot_eager). Inductor cannot generate code for the device.
* The default inductor backend on neuron tensors would die deep in code generation with
  ``KeyError: 'neuron'``; a guard in front of inductor's entry point says what to do instead.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

__all__ = ["NeuronDynamicUnsupported", "NeuronInductorUnsupported", "register"]

_registered = False


class NeuronInductorUnsupported(RuntimeError):
    """Inductor was asked to generate code for neuron tensors."""


MESSAGE = ('torch.compile with the inductor backend cannot generate code for the neuron device; '
           'use torch.compile(model, backend="neuron") (on the emulator it runs the graph eagerly via aot_eager)')


DYNAMIC_MESSAGE = ('torch.compile(dynamic=True) is not supported by the neuron backend: TorchNeuron rejects it '
                   'during compilation (AWS torch.compile reference: "dynamic" Unsupported). Leave dynamic unset or pass '
                   'dynamic=False; shapes that vary between steps recompile per shape')


class NeuronDynamicUnsupported(RuntimeError):
    """torch.compile(dynamic=True) with the neuron backend."""


def _neuron_backend(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    import torch._dynamo.config
    from torch._dynamo.backends.debugging import aot_eager

    # torch.compile(dynamic=True) compiles under assume_static_by_default=False (dynamo's
    # make_set_enable_dynamic); automatic dynamic shapes after a recompile leave it True.
    if not torch._dynamo.config.assume_static_by_default:
        raise NeuronDynamicUnsupported(DYNAMIC_MESSAGE)

    return aot_eager(gm, example_inputs, **kwargs)


def _has_neuron_tensor(gm: Any, example_inputs: list[Any]) -> bool:
    import torch

    values = list(example_inputs)
    graph = getattr(gm, "graph", None)
    if graph is not None:
        values += [node.meta.get("val") for node in graph.nodes if node.op == "placeholder"]
    return any(isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in values)


def _guard_inductor() -> None:
    # Guard torch.compile's inductor wrapper (defined in torch/__init__, already imported) rather
    # than torch._inductor.compile_fx: importing inductor at activation would cost seconds.
    import torch

    wrapper = torch._TorchCompileInductorWrapper
    original = wrapper.__call__
    if getattr(original, "_neuron_guard", False):
        return

    def __call__(self: Any, model_: Any, inputs_: list[Any], *args: Any, **kwargs: Any) -> Any:
        if _has_neuron_tensor(model_, inputs_):
            raise NeuronInductorUnsupported(MESSAGE)
        return original(self, model_, inputs_, *args, **kwargs)

    __call__._neuron_guard = True  # type: ignore[attr-defined]
    wrapper.__call__ = __call__  # type: ignore[method-assign]


def _register_now(registry: Any) -> None:
    if "neuron" not in registry._BACKENDS:
        registry.register_backend(name="neuron")(_neuron_backend)


class _RegisterWhenDynamoLoads(importlib.abc.MetaPathFinder):
    """Registers the "neuron" dynamo backend when dynamo's registry is first imported.

    Importing torch._dynamo at activation would cost seconds; torch.compile imports the registry
    itself before looking the backend name up.
    """

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module: Any) -> None:
            exec_module(module)
            _register_now(module)

        spec.loader.exec_module = exec_and_register  # type: ignore[method-assign]
        return spec


_REGISTRY = "torch._dynamo.backends.registry"


def register() -> None:
    global _registered
    if _registered:
        return
    if _REGISTRY in sys.modules:
        _register_now(sys.modules[_REGISTRY])
    else:
        sys.meta_path.insert(0, _RegisterWhenDynamoLoads())
    _guard_inductor()
    _registered = True
