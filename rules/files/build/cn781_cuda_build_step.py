"""CN781: Makefiles and CMake files that compile CUDA (nvcc, CUDA flags, the CUDA language)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import TextRule

__all__ = ["CudaBuildStep"]


_NKI = (
    "port the kernels it builds to NKI (`@nki.jit`, registered with `torch_neuronx.nki_op`) or to PyTorch ops; "
    "the CUDA build step then goes away"
)
# What makes a build file line a CUDA build: the compiler, its flags and libraries, CUDA paths,
# `.cu` sources, and CMake's CUDA language, package and targets.
_CUDA_BUILD_RE = re.compile(
    r"""(?x)
      (?<![\w-])nvcc(?![\w-])
    | \bNVCC\w*
    | (?<![\w-])-arch[= ](?:sm|compute)_\d+ | --gpu-architecture | -gencode | --generate-code | \bsm_\d{2,3}a?\b
    | (?<![\w-])-l(?:cudart|cublas\w*|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc|cuda)\b
    | /usr/local/cuda | \bCUDA_(?:HOME|PATH|ROOT|TOOLKIT_ROOT_DIR|ARCH\w*|INCLUDE\w*|LIB\w*|FLAGS|NVCC\w*)\b
    | [\w./-]+\.cuh?\b
    | \benable_language\s*\(\s*CUDA\b | \bLANGUAGES\b[^)\n]*\bCUDA\b
    | \bfind_package\s*\(\s*(?:CUDA|CUDAToolkit|CUDNN|NCCL)\b
    | \bCUDA::\w+ | \bCMAKE_CUDA_\w+ | \bCUDA_ARCHITECTURES\b | \bcuda_add_\w+ | \bLANGUAGE\s+CUDA\b
    | \bcuda_(?:select_nvcc_arch_flags|compile\w*)\b
    """,
)
# The lines that start the CUDA build (its one high-effort finding; the others point at it).
_ENTRY_RE = re.compile(
    r"(?<![\w-])nvcc(?![\w-])|\benable_language\s*\(\s*CUDA\b|\bLANGUAGES\b[^)\n]*\bCUDA\b|\bfind_package\s*\(\s*(?:CUDA|CUDAToolkit)\b|\bcuda_add_\w+"
)


class CudaBuildStep(TextRule):
    """
    ## What it does
    Reports the lines of Makefiles and CMake files that compile CUDA.

    Read: ``nvcc`` calls and ``NVCC`` variables, CUDA flags (``-arch=sm_80``, ``-gencode``),
    CUDA libraries (``-lcudart``, ``-lcublas``), CUDA paths (``/usr/local/cuda``,
    ``CUDA_HOME``), ``.cu`` sources, and CMake's ``enable_language(CUDA)``,
    ``project(... LANGUAGES CXX CUDA)``, ``find_package(CUDAToolkit)``, ``CUDA::`` targets and
    ``CMAKE_CUDA_*`` settings, in ``Makefile``, ``*.mk``, ``CMakeLists.txt`` and ``*.cmake``.
    The first line that starts the CUDA build carries the effort of porting its kernels; the
    others point at what goes with it. (A ``setup.py`` that builds a ``CUDAExtension`` is
    CN602's; a Makefile's recipes are also read by the launch-script rules.)

    ## Why is this bad?
    There is no CUDA compiler or CUDA runtime on Trainium: the build fails, and the kernels it
    builds cannot run there anyway.

    ## Example
    ```makefile
    fused.so: fused.cu
    	nvcc -O3 -arch=sm_80 --shared -o $@ $<
    ```
    is reported: port the kernel to NKI (or PyTorch ops) and drop the CUDA build step.

    ## Fix safety
    Report only: the port of the kernels is hand work.
    """

    code = "CN781"
    name = "cuda-build-step"
    file_kinds = frozenset({"build"})
    triggers = ("nvcc", "NVCC", "cuda", "CUDA", "sm_", "cublas", "cudnn", "nccl", ".cu")
    VALID = (
        Valid("all:\n\tg++ -O2 -o helpers helpers.cpp\n", path="Makefile"),
        Valid("# nvcc -O3 kernel.cu\nall:\n\techo done\n", path="Makefile"),
        Valid('project(helpers LANGUAGES CXX)\nmessage(STATUS "no cuda here")\n', path="CMakeLists.txt"),
    )
    INVALID = (
        Invalid("fused.so: fused.cu\n\tnvcc -O3 -arch=sm_80 --shared -o $@ $<\n", path="Makefile"),
        Invalid("NVCC ?= $(CUDA_HOME)/bin/nvcc\nLDFLAGS += -lcudart -lcublas\n", path="kernels.mk"),
        Invalid("cmake_minimum_required(VERSION 3.18)\nproject(ops LANGUAGES CXX CUDA)\nfind_package(CUDAToolkit REQUIRED)\n"
                "target_link_libraries(ops PRIVATE CUDA::cudart)\n", path="CMakeLists.txt"),
        Invalid("enable_language(CUDA)\nset(CMAKE_CUDA_ARCHITECTURES 80 90)\n", path="cmake/cuda.cmake"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        code = doc.code
        out: list[TextReport] = []
        entry_seen = False
        reported_lines: set[int] = set()
        for m in _CUDA_BUILD_RE.finditer(code):
            line_start = code.rfind("\n", 0, m.start()) + 1
            if line_start in reported_lines:
                continue
            line_end = code.find("\n", m.start())
            line_end = len(code) if line_end == -1 else line_end
            line = code[line_start:line_end]
            entry = not entry_seen and _ENTRY_RE.search(line) is not None
            entry_seen = entry_seen or entry
            reported_lines.add(line_start)
            first = len(line) - len(line.lstrip())
            last = len(line.rstrip())
            token = m.group(0).strip()
            token = token + ")" if "(" in token and ")" not in token else token
            out.append(TextReport(
                line_start + first, line_start + last,
                "this build compiles CUDA kernels" if entry else f"`{token}` belongs to a CUDA build",
                guidance=_NKI,
                effort=Effort.HIGH if entry else Effort.LOW,
            ))
        return out
