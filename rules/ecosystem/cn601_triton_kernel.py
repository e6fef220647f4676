"""CN601: Triton kernels and ``triton_op`` registrations."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule
from cuda2neuron.python import dotted_name

from .._shared.names import terminal_name
from .._shared.packages import in_package

__all__ = ["TritonKernel"]

_GUIDANCE = (
    "Rewrite the kernel in NKI (a function decorated with "
    "@nki.jit, registered as a torch op with torch_neuronx.nki_op), or call the "
    "plain PyTorch code it replaces (the fallback branch, if the file has one)."
)
_TRITON_OP = ("torch.library.triton_op", "torch.library.wrap_triton", "torch._library.triton")


class TritonKernel(Rule):
    """
    ## What it does
    Reports Triton imports, ``@triton.jit`` / ``@triton.autotune`` kernels and
    ``torch.library.triton_op`` / ``wrap_triton`` registrations.

    ## Why is this bad?
    Triton compiles for NVIDIA (and AMD) GPUs only; there is no Triton for Trainium. The
    equivalent on Neuron is an NKI kernel (``@nki.jit``) registered with
    ``torch_neuronx.nki_op``, or plain PyTorch that the neuron compiler fuses itself.

    ## Example
    ```python
    import triton

    @triton.jit
    def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr): ...
    ```

    ## Fix safety
    No fix: a kernel rewrite is a port of its own (effort high). An import guarded by
    ``try/except ImportError`` keeps working without Triton; the finding still marks the kernel
    as code that never runs on Neuron.
    """

    code = "CN601"
    name = "triton-kernel"
    triggers = ("triton",)
    VALID = (
        'kernel = "triton"\n',  # an implementation selector, not an import
        "import torch\n\ndef f(x):\n    return torch.nn.functional.gelu(x)\n",
        "from . import triton_ops\n",  # a project module named after triton
    )
    INVALID = (
        Invalid("import triton\n"),
        Invalid("import triton.language as tl\n"),
        Invalid("from triton import language as tl\n"),
        Invalid(
            "import triton\n\n@triton.jit\ndef k(x_ptr, n):\n    pass\n",
        ),
        Invalid("from torch.library import triton_op\n"),
        Invalid(
            "import torch\n\n@torch.library.triton_op('mylib::add', mutates_args=())\ndef add(x):\n    return x\n"
        ),
    )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name)
            if name == "triton" or name.startswith("triton."):
                # An import is not the work: the kernels are (an import beside them costs nothing on
                # top in the estimate, report/_model.py); alone it is guarded or dropped.
                self._report(node, f"`import {name}`: Triton is not available on Trainium", Effort.LOW)
                return

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if module == "triton" or module.startswith("triton."):
            self._report(node, f"`from {module} import ...`: Triton is not available on Trainium", Effort.LOW)
            return
        if module in ("torch.library", "torch._library.triton") and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                if dotted_name(alias.name) in ("triton_op", "wrap_triton"):
                    self._report(node, "`torch.library.triton_op` registers a Triton kernel")
                    return

    def visit_Decorator(self, node: cst.Decorator) -> None:
        deco = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        name = terminal_name(deco)
        if name is None:
            return
        qualified = self.qualname(deco)
        if in_package(qualified, ("triton",)):
            self._report(node, f"`@{qualified}` kernel: Triton is not available on Trainium")
        elif in_package(qualified, _TRITON_OP):
            self._report(node, f"`@{qualified}` registers a Triton kernel as a torch op")

    def _report(self, node: cst.CSTNode, message: str, effort: Effort = Effort.HIGH) -> None:
        self.report(node, message, guidance=_GUIDANCE, effort=effort)
