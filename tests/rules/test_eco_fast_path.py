"""CN603/CN608 against a device rule that turns every CUDA check into a neuron check.

The device family (CN1xx) rewrites ``x.device.type == "cuda"`` and ``x.is_cuda``; for a guard
that selects a CUDA-only kernel that rewrite would send neuron tensors into CUDA code. What we
rely on: the engine applies non-overlapping fixes outer-first, and our fixes span the enclosing
``if`` / block / call, so they are applied before the comparison inside them is looked at.

The device rules land on main in parallel, so this test brings a deliberately naive stand-in for
them (never registered in the catalog): if our fixes were not applied first, its output would
contain ``"neuron"`` checks in front of CUDA kernels.
"""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.core import Invalid, Rule, Settings
from cuda2neuron.kinds import catalog
from cuda2neuron.python import fix_module


class _NaiveDeviceChecks(Rule):
    """
    ## What it does
    Test stand-in: rewrites every CUDA check to a neuron check.
    ## Why is this bad?
    ## Example
    ## Fix safety
    """

    abstract = True  # keeps it out of the catalog
    code = "CN199"
    name = "naive-device-checks"
    triggers = ("cuda",)
    VALID = ("x",)
    INVALID = (Invalid("x.is_cuda"),)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "is_cuda":
            self.report(node, "is_cuda", replacement=node.with_changes(attr=cst.Name("is_neuron")))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        parent = self.context.parent
        if node.evaluated_value == "cuda" and isinstance(parent, cst.ComparisonTarget):
            self.report(node, "cuda", replacement=cst.SimpleString('"neuron"'))


def _port(source: str, target: str = "neuron", may_suppress: bool | None = None) -> tuple[str, list]:
    rules = [r for r in catalog().values() if r.code.startswith(("CN5", "CN6", "CN8"))]
    if may_suppress is None:
        # What the engine's file processing passes: suppressions only if the input has one.
        may_suppress = "cuda2neuron:" in source
    outcome = fix_module(
        cst.parse_module(source),
        [*rules, _NaiveDeviceChecks],
        "t.py",
        Settings(target=target),
        unsafe=False,
        may_suppress=may_suppress,
    )
    return outcome.module.code, outcome.remaining


PLUGIN = '''\
from torch.utils.cpp_extension import load


def _ext():
    return load(name="e", sources=["e.cu"])


class _Fn:
    @staticmethod
    def apply(x):
        return _ext().forward(x)


def op(x):
    if x.device.type == "cuda":
        return _Fn.apply(x)
    return x * 2
'''

PIN = "  # cuda2neuron: ignore[CN1,CN2] CUDA-only fast path; other devices take the fallback"


def _pinned(source: str, line: str) -> str:
    """``source`` with the CN603 pin on ``line`` (nothing deleted: the check keeps saying CUDA)."""
    assert source.count(line + "\n") == 1, line
    return source.replace(line + "\n", line + PIN + "\n")


EARLY_EXIT = PLUGIN.replace(
    '    if x.device.type == "cuda":\n        return _Fn.apply(x)\n    return x * 2\n',
    "    if not x.is_cuda:\n        return x * 2\n    y = _Fn.apply(x)\n    return y\n",
)
TRITON_ELSE = (
    "import triton as tr\n\n@tr.jit\ndef _k(p):\n    pass\n\n"
    "def op(x):\n    if x.is_cuda:\n        _k[(1,)](x)\n    else:\n        x = x + 1\n    return x\n"
)
CONDITIONAL = (
    "import xformers.ops as xops\n\ndef op(q):\n"
    "    return xops.memory_efficient_attention(q, q, q) if q.is_cuda else q\n"
)
AVAILABLE = (
    # `torch.cuda.is_available()` is False on a Trainium host; the API family would turn it
    # into `torch.neuron.is_available()`, which is True there.
    "import torch\nimport triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
    "USE = torch.cuda.is_available() and HAS_TRITON\n\n"
    "def op(x):\n    if torch.cuda.is_available() and HAS_TRITON:\n        return _k[(1,)](x)\n    return x\n"
)

CASES = [
    pytest.param(PLUGIN, _pinned(PLUGIN, '    if x.device.type == "cuda":'), id="cpp-extension-through-a-class-and-a-helper"),
    pytest.param(TRITON_ELSE, _pinned(TRITON_ELSE, "    if x.is_cuda:"), id="aliased-triton-kernel-with-else"),
    pytest.param(
        CONDITIONAL,
        _pinned(CONDITIONAL, "    return xops.memory_efficient_attention(q, q, q) if q.is_cuda else q"),
        id="conditional-expression",
    ),
    pytest.param(EARLY_EXIT, _pinned(EARLY_EXIT, "    if not x.is_cuda:"), id="early-exit-to-the-fallback"),
    pytest.param(
        "import torch\n\ndef opt(ps, device):\n"
        '    return torch.optim.AdamW(ps, lr=1e-3, fused=device.type == "cuda")\n',
        "import torch\n\ndef opt(ps, device):\n    return torch.optim.AdamW(ps, lr=1e-3)\n",
        id="fused-guard-on-device-type",
    ),
    pytest.param(
        'use_fused = fused_available and device_type == "cuda"\n',
        "use_fused = False\n",
        id="nanogpt-use-fused-flag",
    ),
    pytest.param(
        AVAILABLE, _pinned(AVAILABLE, "    if torch.cuda.is_available() and HAS_TRITON:"), id="cuda-available-guard"
    ),
    pytest.param(
        "import torch\nopt = torch.optim.AdamW(ps, fused=torch.cuda.is_available())\n",
        "import torch\nopt = torch.optim.AdamW(ps)\n",
        id="fused-if-cuda-available",
    ),
    pytest.param(
        # `x.load` is an attribute, not the cpp_extension `load` imported here.
        "from torch.utils.cpp_extension import load\n\n"
        "def f(x):\n    if x.is_cuda:\n        return x.load()\n    return x\n",
        "from torch.utils.cpp_extension import load\n\n"
        "def f(x):\n    if x.is_neuron:\n        return x.load()\n    return x\n",
        id="attribute-named-like-a-cuda-import",
    ),
    pytest.param(
        # Not a CUDA-only path: the device rules port it (here: the stand-in).
        "import torch\n\ndef f(x):\n    if x.is_cuda:\n        x = x.pin_memory()\n    return x\n",
        "import torch\n\ndef f(x):\n    if x.is_neuron:\n        x = x.pin_memory()\n    return x\n",
        id="ordinary-device-branch-is-left-to-device-rules",
    ),
]


@pytest.mark.parametrize(("source", "expected"), CASES)
def test_port_keeps_the_cuda_check_so_the_fallback_runs(source, expected):
    output, _ = _port(source)
    assert output == expected
    again, _ = _port(output)
    assert again == output


def test_accelerator_target_keeps_the_kernel_branch_and_its_cuda_check():
    # Intended behaviour, with suppression comments honoured in every round.
    output, remaining = _port(PLUGIN, target="accelerator", may_suppress=True)
    assert "_Fn.apply(x)" in output
    # The pinned guard still says "cuda": the suppression comment kept the device rule off it.
    assert 'if x.device.type == "cuda":  # cuda2neuron: ignore[CN1,CN2]' in output
    assert '"neuron"' not in output
    # What stays is the hand edit (the kernel is still CUDA-only), not a second pin.
    assert [f.message for f in remaining if f.code == "CN603"] == [
        "a CUDA-only fast path is kept behind its CUDA check (never taken on Trainium)"
    ]


def test_accelerator_pin_is_honoured_through_file_processing():
    output, _ = _port(PLUGIN, target="accelerator")
    assert 'if x.device.type == "cuda":' in output


def test_stand_in_is_not_in_the_catalog():
    assert all(rule is not _NaiveDeviceChecks for rule in catalog().values())
