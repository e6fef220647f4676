"""CN602: CUDA C++ extensions built ahead of time or just in time."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.args import arg_by_name
from .._shared.names import call_qualname, terminal_name

__all__ = ["CudaExtension"]

_GUIDANCE = (
    "Port the kernel to NKI (@nki.jit, registered with "
    "torch_neuronx.nki_op) or replace the call with plain PyTorch (keep/use the Python fallback); "
    "drop the .cu sources from the build."
)
_EXT = "torch.utils.cpp_extension"
# A CUDA source named in a literal: "kernel.cu", 'x.cuh', f".../{name}.cu" ...
_CU_SOURCE = re.compile(r"""\.cuh?['"]""")
_NAMES = frozenset({"CUDAExtension", "load_inline", "load"})


class CudaExtension(Rule):
    """
    ## What it does
    Reports CUDA C++ extensions: ``CUDAExtension(...)`` in a build script,
    ``load_inline(..., cuda_sources=...)`` and ``torch.utils.cpp_extension.load(...)`` of ``.cu``
    sources (or with CUDA flags).

    ## Why is this bad?
    nvcc-compiled kernels only run on NVIDIA GPUs. On Trainium a custom kernel is written in NKI,
    or the operation is expressed in PyTorch and left to the neuron compiler.

    ## Example
    ```python
    from torch.utils.cpp_extension import load
    ext = load(name="fused", sources=["fused.cu"], extra_cuda_cflags=["-O3"])
    ```

    ## Fix safety
    No fix (effort high): the kernel must be ported or dropped. C++-only extensions (``.cpp``
    sources, ``CppExtension``) are not reported: they build for the host CPU.
    """

    code = "CN602"
    name = "cuda-extension"
    triggers = ("cpp_extension",)
    VALID = (
        "from torch.utils.cpp_extension import load\next = load(name='e', sources=['e.cpp'])\n",
        "from torch.utils.cpp_extension import CppExtension\nx = CppExtension('e', ['e.cpp'])\n",
        "import json\ndata = json.load(f)\n",  # another load
    )
    INVALID = (
        Invalid(
            "from torch.utils.cpp_extension import CUDAExtension\n"
            "ext = CUDAExtension('e', ['e.cpp', 'e_kernel.cu'])\n"
        ),
        Invalid(
            "from torch.utils.cpp_extension import load\n"
            "ext = load(name='e', sources=[str(CSRC / 'e.cu')])\n"
        ),
        Invalid(
            "import torch.utils.cpp_extension as ce\n"
            "ext = ce.load('e', srcs, extra_cuda_cflags=['-O3'])\n"
        ),
        Invalid(
            "from torch.utils.cpp_extension import load_inline\n"
            "m = load_inline(name='m', cpp_sources=cpp, cuda_sources=cu, functions=['f'])\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = terminal_name(node.func)
        if name not in _NAMES:
            return
        qualified = call_qualname(self, node)
        if qualified == f"{_EXT}.CUDAExtension":
            self._report(node, "`CUDAExtension` builds CUDA C++ kernels")
        elif qualified == f"{_EXT}.load_inline":
            if arg_by_name(node, "cuda_sources") is not None or arg_by_name(node, "with_cuda") is not None:
                self._report(node, "`load_inline(cuda_sources=...)` compiles CUDA kernels at run time")
        elif qualified == f"{_EXT}.load":
            cuda_flags = arg_by_name(node, "extra_cuda_cflags") is not None
            sources = arg_by_name(node, "sources") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
            cu = sources is not None and _CU_SOURCE.search(self.context.code(sources.value)) is not None
            if cuda_flags or cu:
                self._report(node, "`cpp_extension.load` compiles CUDA sources at run time")

    def _report(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, message, guidance=_GUIDANCE, effort=Effort.HIGH)
