"""The kernel index is the module's, whatever rule builds it and wherever the rule walk stands:
torch's CUDA-only calls are resolved through the module's imports, not the walk's scope
(diffusers' Nunchaku quantizer imports torch inside a method; the index built at module level
missed `torch.cuda.get_device_capability` there, so the prefilter changed a CN201 finding)."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.core import Rule, Settings
from cuda2neuron.python import lint_module

from cuda2neuron.rules._shared.kernels import kernel_index

_SEEN: dict[str, dict[str, str]] = {}


class _IndexAtModule(Rule):
    """Test rule: builds the kernel index when the walk enters the module (module scope)."""

    abstract = True
    # Triggers are admitted as coarse words for every test in the process: kept unlikely.
    code, name, triggers = "CN988", "index-at-module", ("index_probe_module",)

    def visit_Module(self, node: cst.Module) -> None:
        _SEEN["module"] = dict(kernel_index(self).names)


class _IndexInFunction(Rule):
    """Test rule: builds the kernel index at the first call inside a function."""

    abstract = True
    code, name, triggers = "CN987", "index-in-function", ("index_probe_function",)

    def visit_Call(self, node: cst.Call) -> None:
        if "function" not in _SEEN and any(isinstance(a, cst.FunctionDef) for a in self.context.ancestors):
            _SEEN["function"] = dict(kernel_index(self).names)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "def check():\n    import torch\n    ok = torch.cuda.is_available()\n    cc = torch.cuda.get_device_capability()\n",
            id="import-inside-a-function",
        ),
        pytest.param("import torch as th\ndef f():\n    return th.cuda.mem_get_info()\n", id="aliased-module-import"),
        pytest.param("from torch import cuda\ndef f():\n    g = cuda.CUDAGraph()\n", id="from-import-of-torch-cuda"),
    ],
)
def test_the_index_does_not_depend_on_where_it_is_built(source):
    _SEEN.clear()
    for rule in (_IndexAtModule, _IndexInFunction):
        lint_module(cst.parse_module(source), [rule], "t.py", Settings())
    assert _SEEN["module"] == _SEEN["function"]
    assert any("no Neuron counterpart" in what for what in _SEEN["module"].values()), _SEEN["module"]
