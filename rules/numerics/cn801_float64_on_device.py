"""CN801: float64 on the device (Trainium has no float64; it is downcast silently)."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import PurePath

import libcst as cst

from cuda2neuron.core import Effort, Finding, Fix, Invalid, Rule, Safety, Settings

from .._shared import dtypes_ast
from .._shared.args import positional_args
from .._shared.detector import AstDetector
from .._shared.dtypes import DtypeBindings, Use, dtype_use, on_host

__all__ = ["Float64OnDevice"]

_DTYPES = {"torch.float64": "float32", "torch.double": "float"}
_GUIDANCE = (
    "Trainium computes in float32 at most: float64 tensors on the neuron device are silently "
    "downcast, so code that relies on double precision gets float32 results. Use torch.float32 "
    "for device tensors; keep float64 only for host (CPU) tensors, e.g. metric accumulation."
)

_MESSAGE = "`{}` on the neuron device is silently computed in float32"
_DOUBLE_MESSAGE = "`.double()` makes a float64 tensor, which the neuron device computes in float32"

# Each pattern starts with a literal word, which the regex engine finds fast; none looks at what
# comes before it, so ``mytorch.float64`` wakes the rule too (the parse then says no).
_DOUBLE_CALL = re.compile(rb"double[ \t\\]*\([\s\\]*\)")
_FROM_TORCH = re.compile(rb"from[ \t\\]+torch[ \t\\]+import")
# A name imported from torch is used as itself: the whole word (not `double_self_attention`).
_BARE_NAME = re.compile(rb"\b(?:float64|double)\b")
_TORCH_ALIAS = re.compile(rb"torch[ \t\\]+as[ \t\\]+([A-Za-z_\x80-\xff][\w\x80-\xff]*)")
# A test module that never names a device (no `cuda`, `device`, `.to(`, accelerator words, even
# in a comment) makes and checks host tensors only: its float64 reference computations stay on
# the CPU after the port, so there is nothing to report there.
_DEVICE_WORD = re.compile(r"cuda|device|\.to\(|neuron|accelerator|xla|mps|gpu", re.IGNORECASE)


def _host_only_test(context) -> bool:  # noqa: ANN001 - the engine's RuleContext, or the ast walk's
    parts = PurePath(context.path).parts
    name = parts[-1] if parts else ""
    is_test = name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or "tests" in parts[:-1]
    # The path first: the module's text is only asked for in a test module.
    return is_test and _DEVICE_WORD.search(context.source) is None


@lru_cache(maxsize=64)
def _dtype_attribute(head: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(head) + rb"[ \t\\]*\.[ \t\\]*(?:float64|double)\b")


class Float64OnDevice(Rule):
    """
    ## What it does
    Reports ``torch.float64`` / ``torch.double`` where it makes or casts a tensor that may live on
    the device, and ``.double()`` calls; the unsafe fix writes float32.

    Reported: ``x.to(torch.float64)`` and ``x.double()`` (unless ``x`` is provably on the CPU:
    ``x.cpu()``, ``torch.from_numpy(a)``, a factory without a device), a factory given a device
    (``torch.zeros(3, dtype=torch.float64, device=device)``) or moved at once
    (``torch.tensor(a, dtype=torch.float64).to(device)``), a torch operation or module built with
    it (``torch.sum(x, dtype=...)``, ``nn.Linear(4, 4, dtype=...)``), a model loader's
    ``torch_dtype=``, ``torch.set_default_dtype(...)``, and a name bound to it that reaches one of
    those in the same scope. Not reported: a dtype used as a value — a dict key, a comparison, a
    membership test, a table or a test parametrization — and a factory without a device (a
    schedule built on the CPU and handed to NumPy).

    ## Why is this bad?
    Trainium has no float64 arithmetic: the device keeps float64 tensors as float32 without an
    error. Results that need double precision (numerically delicate losses, reference checks
    with tight tolerances) silently lose it; AWS advises float32 (and int32).

    ## Example
    ```python
    x = torch.zeros(3, dtype=torch.float64, device=device)
    y = y.double()
    ```
    becomes (unsafe fix)
    ```python
    x = torch.zeros(3, dtype=torch.float32, device=device)
    y = y.float()
    ```

    ## Fix safety
    Unsafe: a tensor the rule cannot place may still be a host tensor, for which the fix really
    does lower precision. On the device it writes down what already happens. A dtype used as a
    value is never rewritten (a dict keyed by dtypes would lose its float32 entry).
    """

    code = "CN801"
    name = "float64-on-device"
    advisory = True  # float64 runs on the device, in float32: never holds back a group of linked fixes
    fixes = frozenset({Safety.UNSAFE})
    triggers = ("float64", "double")
    emits = ("torch.float32", "torch.float")
    VALID = (
        "import torch\nx = torch.zeros(3, dtype=torch.float32)\n",
        "import numpy as np\na = np.zeros(3, dtype=np.float64)\n",  # host NumPy
        "x = obj.double(2)\n",  # not the tensor method (it takes no argument)
        'print("double-check the float64 results")\n',
        # dtype values: a table, a membership test, a comparison, a parametrization
        'import torch\nNAMES = {torch.float64: "F64", torch.float32: "F32"}\n',
        "import torch\nif logits.dtype in [torch.float32, torch.float64]:\n    pass\nok = x.dtype == torch.double\n",
        'import pytest, torch\n\n@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])\ndef test(dtype):\n    pass\n',
        # built on the CPU and handed to NumPy
        "import torch\nbetas = torch.linspace(1e-4, 2e-2, 1000, dtype=torch.float64).numpy()\n",
        "import torch\nref = x.cpu().double()\ny = torch.from_numpy(a).to(torch.float64)\n",
        'import torch\nz = torch.zeros(3, dtype=torch.float64, device="cpu")\n',
    )
    INVALID = (
        Invalid(
            "import torch\nx = torch.zeros(3, dtype=torch.float64, device=device)\n",
            "import torch\nx = torch.zeros(3, dtype=torch.float32, device=device)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nx = torch.tensor(a, dtype=torch.float64).to(device)\n",
            "import torch\nx = torch.tensor(a, dtype=torch.float32).to(device)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\n\ndef f(x, double):\n    dtype = torch.float64 if double else torch.float32\n    return x.to(dtype)\n",
            "import torch\n\ndef f(x, double):\n    dtype = torch.float32 if double else torch.float32\n    return x.to(dtype)\n",
            unsafe=True,
        ),
        Invalid("import torch\nlayer = torch.nn.Linear(4, 4, dtype=torch.float64)\n"),
        Invalid("import torch\nmodel = AutoModel.from_pretrained(name, torch_dtype=torch.float64)\n"),
        Invalid(
            "import torch as th\nth.set_default_dtype(th.double)\n",
            "import torch as th\nth.set_default_dtype(th.float)\n",
            unsafe=True,
        ),
        Invalid("y = y.double()\n", "y = y.float()\n", unsafe=True),
        Invalid("import torch\nx = x.to(torch.float64)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # NumPy's float64 is everywhere in model code and never reported: a report needs torch's
        # float64/double (through ``torch``, an alias of it, or ``from torch import``) or a
        # ``.double()`` call.
        if _DOUBLE_CALL.search(code) or (_FROM_TORCH.search(code) and _BARE_NAME.search(code)):
            return True
        heads = {b"torch", *(m.group(1) for m in _TORCH_ALIAS.finditer(code))}
        return any(_dtype_attribute(head).search(code) for head in heads)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings()

    def __init__(self, context) -> None:
        super().__init__(context)
        self._host_only = _host_only_test(context)
        self._bindings = DtypeBindings()
        # Bound names' literals, reported when the module is left: node -> (message, fix).
        self._bound: dict[int, tuple[str, cst.CSTNode | None]] = {}

    def _reaches(self, node: cst.BaseExpression, message: str, replacement: cst.CSTNode | None) -> None:
        found = dtype_use(self, node)
        if found is None:
            return
        use, name = found
        if use == Use.BINDING:
            self._bindings.bind(self, name, node)
            self._bound[id(node)] = (message, replacement)
            return
        self._emit(node, message, replacement)

    def _emit(self, node: cst.CSTNode, message: str, replacement: cst.CSTNode | None, ancestors=None) -> None:
        if self._host_only:
            return
        if replacement is None:
            # No fix: the float32 name would need its own import; the message says what to use.
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW, ancestors=ancestors)
        else:
            self._report(node, message, replacement, ancestors)

    def leave_Module(self, original_node: cst.Module) -> None:
        for node, ancestors in self._bindings.reached():
            message, replacement = self._bound[id(node)]
            self._emit(node, message, replacement, ancestors)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        if attr in ("float64", "double"):
            qualified = self.qualname(node)
            if qualified in _DTYPES:
                self._reaches(
                    node,
                    _MESSAGE.format(qualified),
                    node.with_changes(attr=cst.Name(_DTYPES[qualified])),
                )

    def visit_Name(self, node: cst.Name) -> None:
        self._bindings.use(self, node)
        # `from torch import float64` then `x.to(float64)`: the bare name, not the attribute part
        # of `torch.float64` (handled above) nor the name inside the import statement.
        if node.value not in ("float64", "double"):
            return
        parent = self.context.parent
        if isinstance(parent, cst.ImportAlias) or (isinstance(parent, cst.Attribute) and parent.attr is node):
            return
        qualified = self.qualname(node)
        if qualified in _DTYPES:
            self._reaches(node, _MESSAGE.format(qualified), None)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "double") or positional_args(node) or node.args:
            return
        if self.qualname(func) is not None:
            return  # a module function, not the tensor method
        if on_host(self, func.value):
            return  # `x.cpu().double()`: a host tensor keeps its precision
        self._report(
            node,
            _DOUBLE_MESSAGE,
            node.with_changes(func=func.with_changes(attr=cst.Name("float"))),
        )

    def _report(self, node: cst.CSTNode, message: str, replacement: cst.CSTNode, ancestors=None) -> None:
        if self._host_only:
            return
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.UNSAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            description="use float32",
            ancestors=ancestors,
        )


class _Detector(AstDetector):
    """The visits above on CPython's ``ast`` (``python/_ast_walk.py``, ``dtypes_ast``): the same
    findings for a file the engine does not parse with libcst. Each method is its namesake's
    above; a report is kept as (node, message, replacement name or None, ancestors) and made a
    finding once the walk is done."""

    def __init__(self, rule: type[Rule], file) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self._bindings = dtypes_ast.DtypeBindings()
        self._bound: dict[int, tuple[str, str | None]] = {}

    def findings(self) -> list[Finding] | None:
        if _host_only_test(self.file):
            return []
        return self.made_findings()

    def _finding(self, node: ast.AST, message: str, name: str | None, ancestors: tuple[object, ...]) -> Finding:
        from cuda2neuron.python import generated_text

        fix = None
        if name is not None:
            # The node's code as libcst generates it, its last name replaced: `torch.float64`
            # -> `torch.float32`, `x.double()` -> `x.float()`.
            renamed = node.func if isinstance(node, ast.Call) else node
            end = self.file.offset(renamed.end_lineno, renamed.end_col_offset)
            at = end - len(renamed.attr)
            fix = Fix(Safety.UNSAFE, generated_text(self.file, node, ancestors, at, len(renamed.attr), name), "use float32")
        return self.finding(node, message, _GUIDANCE, Effort.LOW, fix)

    def _reaches(self, node: ast.AST, message: str, name: str | None) -> None:
        found = dtypes_ast.dtype_use(self.ctx, node)
        if found is None:
            return
        use, bound = found
        if use == Use.BINDING:
            self._bindings.bind(self.ctx, bound, node)
            self._bound[id(node)] = (message, name)
            return
        self._reports.append((node, message, name, tuple(self.ctx.ancestors)))

    def leave_Module(self, node: ast.Module) -> None:
        for bound, ancestors in self._bindings.reached():
            message, name = self._bound[id(bound)]
            self._reports.append((bound, message, name, ancestors))  # type: ignore[arg-type]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("float64", "double"):
            qualified = self.ctx.qualname(node)
            if qualified in _DTYPES:
                self._reaches(node, _MESSAGE.format(qualified), _DTYPES[qualified])

    def visit_Name(self, node) -> None:  # noqa: ANN001 - ast.Name or the walk's KeywordName
        self._bindings.use(self.ctx, node)
        if node.id not in ("float64", "double"):
            return
        qualified = self.ctx.qualname(node)
        if qualified in _DTYPES:
            self._reaches(node, _MESSAGE.format(qualified), None)

    visit_KeywordName = visit_Name

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "double") or self.ctx.args(node):
            return
        if self.ctx.qualname(func) is not None:
            return
        if dtypes_ast.on_host(self.ctx, func.value):
            return
        self._reports.append((node, _DOUBLE_MESSAGE, "float", tuple(self.ctx.ancestors)))
