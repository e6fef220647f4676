"""CN607: bitsandbytes (8-bit optimizers, k-bit quantized layers)."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Settings

from .._shared.detector import AstDetector
from .._shared.names import call_qualname
from .._shared.packages import PackageRule, imports_any, imports_package, in_package

__all__ = ["Bitsandbytes"]

_GUIDANCE = {
    "optim": (
        "bitsandbytes optimizers are CUDA kernels. Use the torch.optim counterpart (AdamW8bit -> "
        "torch.optim.AdamW, ...); optimizer state then takes full precision memory."
    ),
    "nn": (
        "bitsandbytes quantized layers (Linear8bitLt, Linear4bit, ...) run on CUDA only. Use "
        "torch.nn.Linear in bf16 on Neuron, or a Neuron-supported quantization flow."
    ),
}
_DEFAULT = (
    "Replace its optimizers with torch.optim "
    "and its quantized layers with torch.nn layers in bf16."
)


class Bitsandbytes(PackageRule):
    """
    ## What it does
    Reports bitsandbytes imports and calls (8-bit optimizers, ``Linear8bitLt``/``Linear4bit``,
    ``BitsAndBytesConfig``-driven quantization).

    ## Why is this bad?
    bitsandbytes ships CUDA kernels only; importing it on a Trainium host fails or falls back
    to errors at the first call.

    ## Example
    ```python
    import bitsandbytes as bnb
    opt = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
    ```
    could become ``torch.optim.AdamW(model.parameters(), lr=1e-4)``.

    ## Fix safety
    No fix: dropping 8-bit optimizer state or weight quantization changes memory use (and for
    quantized layers, numerics) too much to do silently.
    """

    code = "CN607"
    name = "bitsandbytes"
    packages = ("bitsandbytes",)
    triggers = ("bitsandbytes",)
    VALID = (
        "import torch\nopt = torch.optim.AdamW(ps)\n",
        "use_bitsandbytes = False\n",
    )
    INVALID = (
        Invalid("import bitsandbytes as bnb\n"),
        Invalid("import bitsandbytes as bnb\nopt = bnb.optim.AdamW8bit(ps, lr=1e-4)\n"),
        Invalid("from bitsandbytes.nn import Linear8bitLt\nlayer = Linear8bitLt(16, 16)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Every report is an import of bitsandbytes or a name resolved through one (diffusers
        # names it in availability checks and version tables in a dozen files).
        return imports_any(code, cls.packages)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visitor on CPython's ``ast`` (``_Detector``): each absolute import of the package
        and each call resolved into it, as the walk resolves names; nothing where no import names
        it (every reported call resolves through one)."""
        if not imports_package(file.tree, cls.packages):
            return []
        return _Detector(cls, file).made_findings()

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        self._report(node, "bitsandbytes is CUDA-only and not available on Trainium", _DEFAULT)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if not in_package(qualified, self.packages):
            return
        assert qualified is not None
        section = qualified.split(".")[1] if qualified.count(".") >= 2 else ""
        self._report(
            node, f"`{qualified}` is a bitsandbytes CUDA kernel", _GUIDANCE.get(section, _DEFAULT)
        )

    def _report(self, node: cst.CSTNode, message: str, guidance: str) -> None:
        self.report(node, message, guidance=guidance, effort=Effort.MEDIUM)


class _Detector(AstDetector):
    """``PackageRule``'s import visits and ``visit_Call`` above on ``ast``: an ``import`` of
    the package (``alias.name``), a ``from`` import of it without dots, a call whose callee the
    walk resolves into it (``AstWalk.call_qualname``, the memo libcst's ``call_qualname`` keeps)."""

    def visit_Import(self, node: ast.Import) -> None:
        if any(in_package(alias.name, self.rule.packages) for alias in node.names):
            self._reports.append((node, "bitsandbytes is CUDA-only and not available on Trainium", _DEFAULT, ()))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not node.level and node.module is not None and in_package(node.module, self.rule.packages):
            self._reports.append((node, "bitsandbytes is CUDA-only and not available on Trainium", _DEFAULT, ()))

    def visit_Call(self, node: ast.Call) -> None:
        qualified = self.ctx.call_qualname(node)
        if not in_package(qualified, self.rule.packages):
            return
        assert qualified is not None
        section = qualified.split(".")[1] if qualified.count(".") >= 2 else ""
        message = f"`{qualified}` is a bitsandbytes CUDA kernel"
        self._reports.append((node, message, _GUIDANCE.get(section, _DEFAULT), tuple(self.ctx.ancestors)))

    def _finding(self, node: ast.AST, message: str, guidance: str, ancestors: tuple) -> Finding:
        return self.finding(node, message, guidance, Effort.MEDIUM)
