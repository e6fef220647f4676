"""CN802: complex tensors on the device (``view_as_complex``, complex dtypes, FFTs)."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.detector import AstDetector
from .._shared.packages import in_package

__all__ = ["ComplexOnDevice"]

_NAMES = frozenset(
    {
        "torch.view_as_complex",
        "torch.view_as_real",
        "torch.polar",
        "torch.complex",
        "torch.complex32",
        "torch.complex64",
        "torch.complex128",
        "torch.cfloat",
        "torch.cdouble",
        "torch.chalf",
    }
)
_ATTRS = frozenset(q.rsplit(".", 1)[1] for q in _NAMES) | {"fft", "rfft", "ifft", "irfft", "fft2", "rfft2", "stft"}
# Every report is one of these names as a whole identifier, resolved to torch: the code holds
# the name and "torch" (`complex_human_instruction`, `is_complex()`, NumPy's fft hold neither).
_WORD = re.compile(rb"\b(?:" + b"|".join(sorted(a.encode() for a in _ATTRS)) + rb")\b")
# AWS's environment-variable reference (torch/reference/env-vars, 2026-10-14):
# TORCH_NEURONX_COMPLEX_DECOMPOSE defaults to True for PyTorch >= 2.13, every torch TorchNeuron ships
# for; with it off only "verified native complex operations" lower, the rest follows the fallback
# policy. So complex code runs, decomposed, and which ops are covered is the compatibility table's word.
_GUIDANCE = (
    "TorchNeuron decomposes complex ops into real arithmetic by default (torch >= 2.13, "
    "TORCH_NEURONX_COMPLEX_DECOMPOSE); per-op coverage is in the torch-neuronx compatibility table, "
    "and an op left out falls back to the CPU. A real-valued form stays the portable and fast one: for "
    "rotary embeddings, precompute cos and sin and rotate pairs, out = cat(x1 * cos - x2 * sin, "
    "x1 * sin + x2 * cos); express FFTs as real matmuls or keep them on the host (CPU)."
)


class ComplexOnDevice(Rule):
    """
    ## What it does
    Reports complex-number tensors: ``torch.view_as_complex`` / ``view_as_real``,
    ``torch.polar``, ``torch.complex``, complex dtypes (``torch.complex64``, ``torch.cfloat``...)
    and ``torch.fft.*`` / ``torch.stft`` (which produce complex results).

    ## Why is this bad?
    The neuron device has no complex dtypes of its own: TorchNeuron decomposes complex ops into
    real arithmetic by default since PyTorch 2.13 (``TORCH_NEURONX_COMPLEX_DECOMPOSE``, AWS's
    environment-variable reference), and which ops that covers is per op (the torch-neuronx
    compatibility table); an op it leaves out runs on the CPU. So the code runs, but check it:
    the decomposed form costs more than a real-valued one, and a fallback copies to the host.
    The common case is rotary position embeddings written with ``view_as_complex`` (LLaMA-style
    ``freqs_cis``).

    ## Example
    ```python
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    ```
    should become a real-valued rotation with precomputed ``cos``/``sin``.

    ## Fix safety
    No fix: the real-valued rewrite changes the shapes of the precomputed tables too.
    """

    code = "CN802"
    name = "complex-on-device"
    triggers = ("complex", "polar", "cfloat", "cdouble", "chalf", "view_as_real", "fft")
    VALID = (
        "import torch\ny = torch.cos(x) * a - torch.sin(x) * b\n",
        "import cmath\nz = cmath.polar(1j)\n",
        "import numpy as np\nf = np.fft.rfft(a)\n",  # host NumPy
        # a table of dtype names (nanotron's dtype_to_str): looked up, nothing computed
        'import torch\nNAMES = {torch.float32: "float32", torch.complex64: "complex64"}\n',
        'import torch\nDTYPES = {"float32": torch.float32, "complex64": torch.complex64}\n',
    )
    INVALID = (
        Invalid("import torch\nxq_ = torch.view_as_complex(xq.reshape(4, -1, 2))\n"),
        Invalid("import torch\nfreqs_cis = torch.polar(torch.ones_like(freqs), freqs)\n"),
        Invalid("import torch\nz = torch.zeros(4, dtype=torch.complex64)\n"),
        Invalid("import torch\nspec = torch.fft.rfft(x)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        return b"torch" in code and _WORD.search(code) is not None

    def visit_Name(self, node: cst.Name) -> None:
        # `from torch import view_as_complex` then a bare call; not the attribute part of
        # `torch.view_as_complex` (visit_Attribute) nor the name inside the import statement.
        if node.value not in _ATTRS:
            return
        parent = self.context.parent
        if isinstance(parent, cst.ImportAlias) or (isinstance(parent, cst.Attribute) and parent.attr is node):
            return
        self._check(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _ATTRS:
            return
        self._check(node)

    def _check(self, node: cst.Name | cst.Attribute) -> None:
        qualified = self.qualname(node)
        parent = self.context.parent
        if isinstance(parent, cst.DictElement) and _named(parent.value if parent.key is node else parent.key):
            return  # `{torch.complex64: "complex64"}`: a table of dtype names computes nothing
        if _reported(qualified):
            self.report(node, _MESSAGE.format(qualified), guidance=_GUIDANCE, effort=Effort.MEDIUM)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings()


_MESSAGE = "`{}` uses complex numbers, which the neuron device only runs decomposed into real ops: check it"


def _named(other: object) -> bool:
    """Whether the other side of a dict item is a string (a dtype's name in a table of them,
    nanotron's ``dtype_to_str``): the dtype there is looked up, no tensor is made with it."""
    if isinstance(other, cst.SimpleString):
        return True
    return isinstance(other, ast.Constant) and isinstance(other.value, str)


def _reported(qualified: str | None) -> bool:
    if qualified is None:
        return False
    return qualified in _NAMES or (in_package(qualified, ("torch.fft",)) and qualified != "torch.fft") or qualified == "torch.stft"


class _Detector(AstDetector):
    """The visits above on CPython's ``ast`` (``python/_ast_walk.py``), for files the engine does
    not parse with libcst. libcst visits every ``Name``, also those ``ast`` keeps as strings
    without a position (a function's or parameter's name, an import's module or ``as`` name,
    ``except ... as``, ``global``): where the rule would report one of those, the detector is
    unsure; a keyword's name is visited with its position (``KeywordName``)."""

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [
            self.finding(node, _MESSAGE.format(qualified), _GUIDANCE, Effort.MEDIUM) for node, qualified, _ in reports
        ]

    def _check(self, node: object) -> None:
        qualified = self.ctx.qualname(node)
        parent = self.ctx.ancestors[-1] if self.ctx.ancestors else None
        if isinstance(parent, ast.Dict):
            for key, value in zip(parent.keys, parent.values):
                if key is node and _named(value) or value is node and _named(key):
                    return
        if _reported(qualified):
            self._reports.append((node, qualified, tuple(self.ctx.ancestors)))  # type: ignore[arg-type]

    def visit_Name(self, node) -> None:  # noqa: ANN001 - ast.Name or the walk's KeywordName
        if node.id in _ATTRS:
            self._check(node)

    visit_KeywordName = visit_Name

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _ATTRS:
            self._check(node)

    # -- names without a position: unsure where the rule would report one ------------------------
    def _unplaced(self, name: str, resolved: str | None) -> None:
        from cuda2neuron.python import Unsure

        if name in _ATTRS and _reported(resolved):
            raise Unsure(f"a report on the name {name!r}, which ast gives no position")

    def _dotted(self, dotted: str, first_visited: bool) -> None:
        """An import's dotted module name (``torch.fft``): libcst visits its first name (unless
        an ``ImportAlias`` holds it alone) and each attribute of the chain."""
        from cuda2neuron.python import Unsure

        parts = dotted.split(".")
        head = self.ctx.scope.lookup(parts[0])
        if first_visited:
            self._unplaced(parts[0], head)
        for i in range(1, len(parts)):
            if parts[i] in _ATTRS and head is not None and _reported(".".join([head, *parts[1 : i + 1]])):
                raise Unsure("a report inside an import's module name")

    def leave_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._dotted(alias.name, "." in alias.name)
            if alias.asname is not None:
                self._unplaced(alias.asname, self.ctx.scope.lookup(alias.asname))

    def leave_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is not None:
            self._dotted(node.module, True)
        for alias in node.names:
            if alias.asname is not None:
                self._unplaced(alias.asname, self.ctx.scope.lookup(alias.asname))

    def _defined(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda) -> None:
        # Visited before the walk binds the name, which libcst looks up after: bound here the
        # same way (the walk's binding right after changes nothing). No import can sit in a
        # header, so the parameters' names resolve now as they do when libcst reaches them.
        from cuda2neuron.python import LOCAL

        scope = self.ctx.scope
        if not isinstance(node, ast.Lambda):
            scope.bind(node.name, LOCAL)
            self._unplaced(node.name, scope.lookup(node.name))
        if isinstance(node, ast.ClassDef):
            for keyword in node.keywords:
                if keyword.arg is not None:
                    self._unplaced(keyword.arg, scope.lookup(keyword.arg))
            return
        args = node.args
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None and a.arg in _ATTRS:
                self._unplaced(a.arg, scope.lookup(a.arg))

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _defined

    def leave_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name is not None:
            self._unplaced(node.name, self.ctx.scope.lookup(node.name))

    def leave_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self._unplaced(name, self.ctx.scope.lookup(name))

    leave_Nonlocal = leave_Global
