"""CN619: CUDA-only FP8 operators (``torch._scaled_mm`` and friends) and float8 dtypes."""

from __future__ import annotations

import ast
import re
from pathlib import PurePath

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings, Valid

from .._shared import dtypes_ast
from .._shared.args import arg_by_name, positional_args
from .._shared.detector import AstDetector
from .._shared.dtypes import DtypeBindings, Use, dtype_test_of, dtype_use
from .._shared.names import call_qualname
from .._shared.strings import string_value

__all__ = ["CudaFp8Ops"]

# Private torch operators with CUDA kernels only (cuBLASLt / CUTLASS FP8 GEMMs on sm_89+).
_OPS = frozenset({"torch._scaled_mm", "torch._scaled_mm_v2", "torch._scaled_grouped_mm", "torch.ops.aten._scaled_mm"})
_DTYPES = frozenset({
    "torch.float8_e4m3fn", "torch.float8_e4m3fnuz", "torch.float8_e5m2", "torch.float8_e5m2fnuz", "torch.float8_e8m0fnu",
})  # fmt: skip
# An attribute named float8...: the dot, then blanks or line continuations, then the name.
_FLOAT8_ATTRIBUTE = re.compile(rb"\.[\s\\]*float8")
# Neuron 2.34's release notes (2026-11-30): "FP8 and MXFP8 matrix multiplications run on Neuron",
# new in torch-neuronx 2.13.3.1 / 2.14.3.1; TorchAO Neuron's fused MXFP8 linear needs Trn3 and
# torch-neuronx >= 2.14.3.1 (setup-torchao-neuron, 2026-11-06). Which float8 formats run on which
# chip is not on a readable GA page; the pre-release source had float8_e4m3 on Trn2 and neither
# e4m3fn nor MX-OCP there.
_OP_GUIDANCE = (
    "FP8 and MXFP8 matmuls run on Neuron from torch-neuronx 2.13.3.1 / 2.14.3.1 (Neuron 2.34) only; "
    "which float8 formats run depends on the chip (Trn2 vs Trn3): check the numerics on the device, "
    "or compute the product in bfloat16 (dequantize: "
    "`(a.to(torch.bfloat16) * scale_a) @ (b.to(torch.bfloat16) * scale_b)`)."
)
_DTYPE_GUIDANCE = (
    "float8 matmuls run on Neuron from torch-neuronx 2.13.3.1 / 2.14.3.1 (Neuron 2.34); the formats "
    "depend on the chip (Trn2 vs Trn3): verify on the device, or keep the data in bfloat16."
)


# The accelerator a test puts its tensors on, before or after the port.
_DEVICE_WORDS = frozenset({"cuda", "neuron"})


def _is_test_module(path: str) -> bool:
    parts = PurePath(path).parts
    name = parts[-1] if parts else ""
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or "tests" in parts[:-1]


def _names_device(value: str | None) -> bool:
    return value is not None and value.split(":")[0] in _DEVICE_WORDS


class CudaFp8Ops(Rule):
    """
    ## What it does
    Reports ``torch._scaled_mm`` / ``torch._scaled_grouped_mm`` (FP8 matrix products) and the
    float8 dtypes (``torch.float8_e4m3fn``, ``torch.float8_e5m2``, ...) where they reach the device.
    A dtype reaches the device where it makes or casts a tensor that may live there:
    ``w.to(torch.float8_e4m3fn)``, a factory given a device, a name bound to the dtype and used so
    in the same scope (rules/_shared/dtypes.py). So does a test of a tensor's dtype against it
    (``w.dtype == torch.float8_e4m3fn``): the code expects float8 tensors there. A dtype used as
    a value — a table of dtypes, a host tensor's test (``x.cpu().dtype == torch.float8_e4m3fn``)
    — is not reported. Nor is a dtype in a test that never touches a device: in a test module,
    the code that runs with it (its top-level function or class, joined with every one that
    names it or that it names, as CN410 judges a gloo group) has no ``.cuda()``, no
    ``torch.cuda``, no ``"cuda"`` device, no ``device=`` other than the CPU and no ``.to(...)``
    other than a dtype's, and the module's own top-level code has none either (a
    ``pytestmark`` skip without CUDA, ``DEV = "cuda"``): axolotl's LoRA-merge tests quantize
    CPU tensors to float8 and check the checkpoint they write.

    ## Why is this bad?
    ``_scaled_mm`` is a private operator written for CUDA's FP8 GEMMs (cuBLASLt on Ada/Hopper
    GPUs). Neuron 2.34's release notes say FP8 and MXFP8 matrix multiplications run on Neuron,
    new in torch-neuronx 2.13.3.1 / 2.14.3.1: on Neuron 2.33 and older the FP8 path fails or
    falls back to the CPU. Which float8 formats run depends on the chip (TorchAO Neuron's MXFP8
    linear needs Trn3; pre-release: ``float8_e4m3`` on Trn2, not ``e4m3fn``), and the numerics
    differ from cuBLASLt's, so FP8 code paths must be checked on the device.

    ## Example
    ```python
    out = torch._scaled_mm(a_fp8, b_fp8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    ```

    ## Fix safety
    No fix: whether the FP8 path runs depends on the torch-neuronx release and the chip, and the
    bfloat16 replacement changes numerics (effort medium for an operator, low for a dtype).
    """

    code = "CN619"
    name = "cuda-fp8-ops"
    triggers = ("_scaled_mm", "_scaled_grouped_mm", "float8")
    VALID = (
        "import torch\ny = a @ b\n",
        'import torch\nNAMES = {torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2"}\n',
        "import torch\nis_fp8 = w.cpu().dtype == torch.float8_e4m3fn\n",
        "import torch\nhost = w.cpu().to(torch.float8_e5m2)\n",
        "import torch\nx = torch.zeros(3, dtype=torch.bfloat16)\n",
        "def _scaled_mm(a, b):\n    return a @ b\ny = _scaled_mm(a, b)\n",  # the user's own helper
        # axolotl's tests/utils/lora/test_merge_lora.py: CPU tensors quantized to check a merge; the
        # device test beside them is another unit
        Valid(
            "import torch\n\ndef _make_fp8(w):\n    return w.to(torch.float8_e4m3fn)\n\n"
            "def test_merge():\n    out = merge(_make_fp8(torch.randn(4, 4)), device='cpu')\n"
            "    assert out.dtype == torch.float8_e4m3fn\n\n"
            "def test_on_gpu():\n    assert torch.ones(2).cuda().sum() == 2\n",
            path="tests/utils/test_merge.py",
        ),
    )
    INVALID = (
        Invalid("import torch\nout = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)\n"),
        Invalid("import torch\nw8 = w.to(torch.float8_e4m3fn)\n"),
        Invalid("import torch\n\ndef q(w):\n    fp8 = torch.float8_e5m2\n    return w.to(fp8)\n"),
        Invalid("import torch\nassert layer.weight.dtype == torch.float8_e4m3fn\n"),
        # In a test that puts its tensors on the device (a fixture's device, a module's DEV)
        Invalid(
            "import torch\n\ndef _quant(w):\n    return w.to(torch.float8_e4m3fn)\n\n"
            "def test_quant(device):\n    assert _quant(torch.ones(2, device=device)).dtype == torch.float8_e4m3fn\n",
            path="tests/test_quant.py",
        ),
        Invalid(
            "import torch\nDEV = 'cuda'\n\ndef test_quant(w):\n    assert w.to(torch.float8_e5m2).dtype\n",
            path="tests/test_quant.py",
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # An operator call names the operator (also through an alias's import); a dtype is an
        # attribute (`torch.float8_e4m3fn`): "float8" in strings and dict keys reports nothing.
        return b"_scaled_mm" in code or b"_scaled_grouped_mm" in code or _FLOAT8_ATTRIBUTE.search(code) is not None

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: every report is a call resolved to one of ``_OPS`` or an attribute resolved
        to one of ``_DTYPES`` that reaches the device, is compared with a tensor's dtype, or is
        bound to a name that reaches the device, so a file whose walk meets none of them gets no
        finding (``_Gate``); unsure elsewhere (libcst runs). diffusers' quantizers and tables
        spell ``.float8`` on other objects (``config.float8_...``), never resolve it, or hold
        the dtype as a value."""
        return None if _Gate(cls, file).reports() is None else []

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bindings = DtypeBindings()
        self._qualified: dict[int, str] = {}  # bound literals' qualified names
        # In a test module the dtypes wait for the module's end: whether their unit touches a
        # device is known only then (a helper is defined before the test that moves its output).
        self._test_module = _is_test_module(context.path)
        self._dtypes: list[tuple[cst.Attribute, tuple[cst.CSTNode, ...], str]] = []
        self._device: set[str] = set()  # units that touch a device
        self._names: dict[str, set[str]] = {}  # unit -> the names it reads
        self._defined: set[str] = set()  # top-level defs and classes (the units)

    def _unit(self, ancestors=None) -> str:
        """``<module>`` or the top-level function or class the node sits in."""
        chain = self.context.ancestors if ancestors is None else ancestors
        top = next((a for a in chain if isinstance(a, (cst.FunctionDef, cst.ClassDef))), None)
        return "<module>" if top is None else top.name.value

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._test_module and self._unit() == "<module>":
            self._defined.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self._test_module and self._unit() == "<module>":
            self._defined.add(node.name.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self._test_module and _names_device(string_value(node)):
            self._device.add(self._unit())

    def visit_Name(self, node: cst.Name) -> None:
        self._bindings.use(self, node)
        if self._test_module:
            self._names.setdefault(self._unit(), set()).add(node.value)

    def leave_Module(self, original_node: cst.Module) -> None:
        for node, ancestors in self._bindings.reached():
            self._dtype(node, ancestors)  # type: ignore[arg-type]
        if not self._dtypes:
            return
        touched = self._device_units()
        for node, ancestors, qualified in self._dtypes:
            if "<module>" in self._device or self._unit(ancestors) in touched:
                self._report_dtype(node, ancestors, qualified)

    def _device_units(self) -> set[str]:
        """The units joined (one names the other) with a unit that touches a device."""
        links: dict[str, set[str]] = {}
        for unit, names in self._names.items():
            for name in names & self._defined:
                links.setdefault(unit, set()).add(name)
                links.setdefault(name, set()).add(unit)
        seen, todo = set(self._device), list(self._device)
        while todo:
            for other in links.get(todo.pop(), ()):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    def _dtype(self, node: cst.Attribute, ancestors=None) -> None:
        qualified = self.qualname(node) if ancestors is None else self._qualified[id(node)]
        if self._test_module:
            chain = tuple(self.context.ancestors) if ancestors is None else tuple(ancestors)
            self._dtypes.append((node, chain, qualified or ""))
            return
        self._report_dtype(node, ancestors, qualified)

    def _report_dtype(self, node: cst.Attribute, ancestors, qualified: str | None) -> None:
        self.report(
            node,
            f"`{qualified}`: float8 on the neuron device needs torch-neuronx >= 2.13.3.1 / 2.14.3.1 and a chip with the format",
            guidance=_DTYPE_GUIDANCE,
            effort=Effort.LOW,
            ancestors=ancestors,
        )

    def _device_use(self, node: cst.Call) -> bool:
        """Device use by a call: ``device=`` other than the CPU, ``.to(x)`` other than to a
        dtype (``torch.float8_e4m3fn``) or the CPU."""
        device = arg_by_name(node, "device")
        if device is not None and not _on_cpu(device.value):
            return True
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "to":
            first = positional_args(node)[:1]
            if first and not _on_cpu(first[0].value) and not (self.qualname(first[0].value) or "").startswith("torch."):
                return True
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._test_module and node.attr.value in _DEVICE_WORDS:  # torch.cuda, x.cuda()
            self._device.add(self._unit())
        self._float8(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self._test_module and self._device_use(node):
            self._device.add(self._unit())
        qualified = call_qualname(self, node)
        if qualified in _OPS:
            self.report(
                node, f"`{qualified}` is an FP8 matrix product: on Neuron only from torch-neuronx 2.13.3.1 / 2.14.3.1", guidance=_OP_GUIDANCE, effort=Effort.MEDIUM
            )

    def _float8(self, node: cst.Attribute) -> None:
        if not node.attr.value.startswith("float8"):
            return
        if self.qualname(node) not in _DTYPES:
            return
        found = dtype_use(self, node)
        if found is None:
            if dtype_test_of(self, node) is not None:
                # `w.dtype == torch.float8_e4m3fn` on a tensor that may be on the device: the
                # code expects float8 there (a float64 test, by contrast, holds on Neuron too).
                self._dtype(node)
            return
        if found[0] == Use.BINDING:
            self._bindings.bind(self, found[1], node)
            self._qualified[id(node)] = self.qualname(node) or ""
        else:
            self._dtype(node)


def _on_cpu(value: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if string_value(value) == "cpu":
        return True
    return isinstance(value, cst.Call) and bool(value.args) and string_value(value.args[0].value) == "cpu"


class _Gate(AstDetector):
    """``visit_Call``, ``visit_Name`` and ``_float8`` above on CPython's ``ast``
    (``python/_ast_walk.py`` resolves names as libcst's scopes do, ``dtypes_ast`` answers as
    ``dtypes`` does): unsure (``Unsure``) at the first node the visitor could report. A float8
    dtype is such a node where it reaches the device, where it is compared with some tensor's
    ``.dtype`` (a superset of ``dtype_test_of``: the tensor may be on the host), or where it is
    bound to a name that reaches the device in its scope (known when the module is left). A
    test module's units only take findings away. diffusers' tables of dtypes, its
    ``storage_dtype=torch.float8_e4m3fn`` defaults and the names bound to them decide."""

    def __init__(self, rule: type, file) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self._bindings = dtypes_ast.DtypeBindings()

    def visit_Name(self, node) -> None:  # noqa: ANN001 - ast.Name or the walk's KeywordName
        self._bindings.use(self.ctx, node)

    visit_KeywordName = visit_Name

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not node.attr.startswith("float8") or self.ctx.qualname(node) not in _DTYPES:
            return
        found = dtypes_ast.dtype_use(self.ctx, node)
        if found is None:
            if _compared_with_dtype(self.ctx.ancestors, node):
                _unsure("a float8 dtype compared with a tensor's dtype")
        elif found[0] == Use.BINDING:
            self._bindings.bind(self.ctx, found[1], node)
        else:
            _unsure("a float8 dtype that reaches the device")

    def visit_Call(self, node: ast.Call) -> None:
        if self.ctx.call_qualname(node) in _OPS:
            _unsure("an FP8 operator")

    def leave_Module(self, node: ast.Module) -> None:
        if self._bindings.reached():
            _unsure("a name bound to a float8 dtype reaches the device")


def _compared_with_dtype(ancestors: list[object], node: ast.AST) -> bool:
    """``dtype_test_of``'s comparison without its host tests: is ``node`` (or the list, tuple or
    set it is an element of) a side of a comparison whose other side is some ``x.dtype``?"""
    chain = list(ancestors)
    child: object = node
    if chain and isinstance(chain[-1], (ast.List, ast.Tuple, ast.Set)):
        child = chain.pop()
    if not chain or not isinstance(chain[-1], ast.Compare):
        return False
    comparison = chain[-1]
    return any(
        isinstance(side, ast.Attribute) and side.attr == "dtype"
        for side in (comparison.left, *comparison.comparators)
        if side is not child and side is not node
    )


def _unsure(why: str) -> None:
    from cuda2neuron.python import Unsure

    raise Unsure(why)
