"""CN624: torch's int4 weight-only matmul operators, which have CUDA kernels only."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.kernels import TORCH_INT4_OPS

__all__ = ["CudaInt4Matmul"]

_GUIDANCE = (
    "Neither operator has a Neuron kernel. Keep the weights in bfloat16 on the neuron device "
    "(dequantize once: `w = (w_int4 - zero) * scale`), or write the int4 matmul as an NKI kernel."
)


class CudaInt4Matmul(Rule):
    """
    ## What it does
    Reports ``torch.ops.aten._convert_weight_to_int4pack`` and ``torch.ops.aten._weight_int4pack_mm``
    (also as ``torch._weight_int4pack_mm``, and their ``.default`` overloads): the int4
    weight-only quantization of gpt-fast and torchao's tinygemm path.

    ## Why is this bad?
    Both are private operators with CUDA kernels only; on a CPU or neuron tensor they raise
    ``NotImplementedError``. A port that moves the weights to the neuron device stops at the first
    packed matmul, with nothing in a device rule's report to say why.

    ## Example
    ```python
    packed = torch.ops.aten._convert_weight_to_int4pack(weight_int32, inner_k_tiles)
    y = torch.ops.aten._weight_int4pack_mm(x, packed, groupsize, scales_and_zeros)
    ```

    ## Fix safety
    No fix: replacing the kernel changes memory use and numerics (bfloat16 weights, or a
    hand-written NKI kernel), which is the user's call (effort medium).
    """

    code = "CN624"
    name = "cuda-int4-matmul"
    triggers = ("_convert_weight_to_int4pack", "_weight_int4pack_mm")
    VALID = (
        "import torch\ny = x @ w\n",
        # The CPU operators by name: a host path, not the CUDA kernel.
        "import torch\ny = torch.ops.aten._weight_int4pack_mm_for_cpu(x, w, 32, sz)\n",
        "def _weight_int4pack_mm(x, w):\n    return x @ w\ny = _weight_int4pack_mm(x, w)\n",  # the user's own
    )
    INVALID = (
        # gpt-fast's quantize.py: pack on the device, then the packed matmul in the forward.
        Invalid("import torch\npacked = torch.ops.aten._convert_weight_to_int4pack(w, 8)\n"),
        Invalid("import torch\ny = torch.ops.aten._weight_int4pack_mm(x, packed, 128, sz)\n"),
        Invalid("import torch\ny = torch._weight_int4pack_mm(x, packed, 128, sz)\n"),
        Invalid("import torch\ny = torch.ops.aten._weight_int4pack_mm.default(x, packed, 128, sz)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "default":
            func = func.value  # the overload: `op.default(...)`
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if name not in ("_convert_weight_to_int4pack", "_weight_int4pack_mm"):
            return
        qualified = self.qualname(func)
        if qualified in TORCH_INT4_OPS:
            self.report(node, f"`{qualified}` has CUDA kernels only (int4 weight-only matmul)", guidance=_GUIDANCE, effort=Effort.MEDIUM)
