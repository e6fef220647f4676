"""CN607: bitsandbytes (8-bit optimizers, k-bit quantized layers)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Settings

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
        """A gate: every report is an import of the package or a call resolved through one, so
        a file without such an import gets no finding; unsure elsewhere (libcst runs)."""
        return None if imports_package(file.tree, cls.packages) else []

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
