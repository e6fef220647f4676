"""CN612: CuPy arrays and kernels."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid

from .._shared.names import call_qualname
from .._shared.packages import PackageRule, in_package

__all__ = ["Cupy"]

_GUIDANCE = (
    "Express the computation with torch tensors on the neuron "
    "device (or NumPy on the host); cupy.RawKernel/ElementwiseKernel code must be ported to "
    "PyTorch or NKI. DLPack hand-offs (cupy.from_dlpack/toDlpack) go away with it."
)


class Cupy(PackageRule):
    """
    ## What it does
    Reports ``cupy`` imports and calls.

    ## Why is this bad?
    CuPy allocates CUDA memory and launches CUDA kernels; it has no Trainium backend.

    ## Example
    ```python
    import cupy as cp
    y = cp.asarray(x.cpu().numpy()) * 2
    ```

    ## Fix safety
    No fix: array code must be re-expressed in torch (or NumPy), and raw kernels ported.
    """

    code = "CN612"
    name = "cupy"
    packages = ("cupy", "cupyx")
    triggers = ("cupy",)
    VALID = ("import numpy as np\ny = np.asarray(x)\n", "use_cupy = False\n")
    INVALID = (
        Invalid("import cupy as cp\n"),
        Invalid("import cupy as cp\ny = cp.asarray(x)\n"),
        Invalid("from cupy import RawKernel\nk = RawKernel(src, 'f')\n"),
    )

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        self._report(node, "CuPy is CUDA-only", Effort.LOW)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if in_package(qualified, self.packages):
            self._report(node, f"`{qualified}` runs on a CUDA device", Effort.MEDIUM)

    def _report(self, node: cst.CSTNode, message: str, effort: Effort) -> None:
        self.report(node, message, guidance=_GUIDANCE, effort=effort)
