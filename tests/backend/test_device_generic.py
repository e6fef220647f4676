"""PyTorch's device-generic test framework pointed at the emulated device.

``instantiate_device_type_tests(..., only_for="privateuse1")`` makes a ``...PRIVATEUSE1`` copy of
each class below on ``PrivateUse1TestBase``, which names its device from the renamed backend
(``neuron:0``). The classes use PyTorch's own databases from the wheel: ``module_db``
(``@modules``: every nn module's constructor and forward inputs) and ``op_db`` (``@ops``).
Each test runs a case on neuron and again on CPU and asserts equality. The test files of PyTorch
(test_modules.py, test_ops.py) are not in the wheel and not copied here; docs/backend.md shows how
to run a larger set and reports the pass rate.

``CUDA2NEURON_DEVICE_GENERIC=all`` instantiates the module test for every entry of module_db
instead of the fixed subset below (a few minutes).
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

import cuda2neuron.backend as backend  # noqa: E402

if not backend.is_available():
    pytest.skip("the neuron emulator cannot be built here", allow_module_level=True)
# The framework decides at class-instantiation time (collection) which device bases exist.
backend.activate()

from torch.testing._internal.common_device_type import (  # noqa: E402
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_modules import module_db, modules  # noqa: E402
from torch.testing._internal.common_utils import TestCase  # noqa: E402
from torch.utils._pytree import tree_map  # noqa: E402

# Modules whose forward runs a kernel of the device's own (the fused LSTM/GRU cells, as on CUDA):
# equal within float32 rounding, not bit for bit (docs/backend.md, "Differences by design").
FUSED_CELLS = {"GRU", "GRUCell", "LSTM", "LSTMCell"}
MODULES = {"Linear", "LayerNorm", "GroupNorm", "BatchNorm2d", "Conv2d", "Embedding", "GELU", "CrossEntropyLoss",
           "GRU"}
OPS = {"add", "matmul", "softmax", "nn.functional.layer_norm", "nn.functional.scaled_dot_product_attention"}

_ALL = os.environ.get("CUDA2NEURON_DEVICE_GENERIC", "") == "all"
_module_infos = [m for m in module_db if _ALL or m.module_cls.__name__ in MODULES]


def _cpu(x: object) -> object:
    return tree_map(lambda t: t.detach().cpu().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t, x)


class TestNeuronModules(TestCase):
    @modules(_module_infos, allowed_dtypes=(torch.float32,))
    def test_forward_matches_cpu(self, device, dtype, module_info, training):
        name = module_info.module_cls.__name__
        tol = {"atol": 1e-6, "rtol": 1e-5} if name in FUSED_CELLS else {"atol": 0, "rtol": 0}
        inputs = module_info.module_inputs_func(module_info, device=device, dtype=dtype, requires_grad=False,
                                                training=training)
        for mi in inputs:
            if mi.forward_input is None:
                continue
            args, kwargs = mi.constructor_input.args, mi.constructor_input.kwargs
            torch.manual_seed(0)
            m = module_info.module_cls(*args, **kwargs).to(device=device, dtype=dtype).train(training)
            torch.manual_seed(1)
            out = m(*mi.forward_input.args, **mi.forward_input.kwargs)
            m_cpu = m.to("cpu")
            torch.manual_seed(1)
            ref = m_cpu(*_cpu(mi.forward_input.args), **_cpu(mi.forward_input.kwargs))
            self.assertEqual(_cpu(out), ref, exact_device=True, **tol)


class TestNeuronOps(TestCase):
    @ops([op for op in op_db if op.name in OPS and not op.variant_test_name], allowed_dtypes=(torch.float32,))
    def test_forward_matches_cpu(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            torch.manual_seed(0)
            out = op(sample.input, *sample.args, **sample.kwargs)
            cpu = sample.transform(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t)
            torch.manual_seed(0)
            ref = op(cpu.input, *cpu.args, **cpu.kwargs)
            self.assertEqual(_cpu(out), ref, atol=0, rtol=0)


instantiate_device_type_tests(TestNeuronModules, globals(), only_for="privateuse1")
instantiate_device_type_tests(TestNeuronOps, globals(), only_for="privateuse1")


def test_the_classes_are_instantiated_for_neuron() -> None:
    from torch.testing._internal.common_device_type import PrivateUse1TestBase

    cls = globals()["TestNeuronModulesPRIVATEUSE1"]
    assert issubclass(cls, PrivateUse1TestBase)
    tests = [n for n in dir(cls) if n.startswith("test_forward_matches_cpu_")]
    assert tests and all(n.endswith("_neuron_float32") for n in tests), tests[:3]
