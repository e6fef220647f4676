"""CN741: CUDA C++ source files (``.cu``, ``.cuh``)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Valid
from cuda2neuron.core import TextReport

from .._helpers import TextRule

__all__ = ["CudaSourceFile"]

_CU = "csrc/kernels.cu"
# `__global__ void name(`, templates and launch bounds included; the name is the last word
# before the parameter list.
_KERNEL_RE = re.compile(r"\b__global__\b[^;{(]*?\b(\w+)\s*\(")
_GUIDANCE = (
    "Trainium runs no CUDA code: rewrite the kernel in NKI (`@nki.jit`, registered with "
    "`torch_neuronx.nki_op`) or replace it with PyTorch ops, and take the Python fallback until "
    "then (the build and load calls are reported by CN602)"
)


class CudaSourceFile(TextRule):
    """
    ## What it does
    Reports every CUDA kernel (``__global__`` function) in ``.cu`` / ``.cuh`` files, by name and
    line; a CUDA source with no kernel (host code, device helpers) is reported once.

    ## Why is this bad?
    Trainium has no CUDA: the extension these files build cannot exist on Neuron. Each kernel
    must become an NKI kernel or PyTorch ops; the list is the size of that work.

    ## Example
    ```cpp
    __global__ void fused_gelu_kernel(const float* x, float* y, int n) { ... }
    ```
    is reported: "CUDA kernel `fused_gelu_kernel`".

    ## Fix safety
    Display only: there is no mechanical translation of a CUDA kernel.
    """

    code = "CN741"
    name = "cuda-source-file"
    file_kinds = frozenset({"cuda-source"})
    # Every CUDA source names the runtime or declares a kernel.
    triggers = ("__global__", "cuda", "CUDA")
    VALID = (Valid("// portable helpers, no kernels\nint add(int a, int b) { return a + b; }\n", path="csrc/util.cuh"),)
    INVALID = (
        Invalid("__global__ void scale_kernel(float* x, float a, int n) {\n  x[0] *= a;\n}\n", path=_CU),
        Invalid(
            "template <typename T>\n__global__ void __launch_bounds__(256) add_kernel(T* x) {}\n"
            "__global__ void mul_kernel(float* x) {}\n",
            path=_CU,
        ),
        Invalid("#include <cuda_runtime.h>\nvoid launch(float* x) { cudaDeviceSynchronize(); }\n", path=_CU),
    )

    @classmethod
    def check_text(cls, doc, settings):
        text = doc.text
        kernels = [m for m in _KERNEL_RE.finditer(text) if not _in_comment(text, m.start())]
        if not kernels:
            return [TextReport(0, min(len(text), text.find("\n") if "\n" in text else len(text)),
                               "CUDA C++ source: no Neuron equivalent", guidance=_GUIDANCE, effort=Effort.HIGH)]
        return [
            TextReport(m.start(1), m.end(1), f"CUDA kernel `{m.group(1)}`", guidance=_GUIDANCE, effort=Effort.HIGH)
            for m in kernels
        ]


def _in_comment(text: str, offset: int) -> bool:
    """Inside a // line comment (block comments are rare around kernel declarations)."""
    line_start = text.rfind("\n", 0, offset) + 1
    return "//" in text[line_start:offset]
