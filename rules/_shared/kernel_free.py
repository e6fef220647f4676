"""Proof on CPython's ``ast`` that a module's kernel index (``kernels.kernel_index``) is empty.

A detector whose visitor asks the kernel index (``handed_to_kernel``: a device or a ``.cuda()``
tensor handed to CUDA-only code stays CUDA) cannot build that index without libcst. Most modules
have none: nothing they import is CUDA-only code (a kernel package, a compiled extension, a
project module that reaches a kernel, a hub kernel), no member of ``torch.cuda`` that only CUDA
has is spelled, nothing is built, imported by name or launched on a GPU at run time, and no
literal names a CUDA provider or requirement. ``kernel_free`` says so only where each of those
is ruled out (by the same tables, on the same imports); anything it cannot rule out keeps the
detector unsure.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import libcst as cst

from cuda2neuron.core import Settings

from .kernels import (
    _TORCH_CUDA_ONLY_MEMBERS,
    CUDA_IPC_CALLS,
    _cuda_requirement,
    describe_module,
    project_module,
    relative_module,
)

__all__ = ["kernel_free"]

# Words without which no build, dynamic import, hub kernel, CUDA operator, GPU launch, raw
# pointer or CUDA provider can be spelled (kernels.py's `_Collector`, process_gpus.py).
_RUNTIME_WORDS = re.compile(
    r"load_inline|cpp_extension|CUDAExtension|import_module|__import__|get_kernel|load_kernel|"
    r"_jit_get_operation|\bops\b|CUDA_VISIBLE_DEVICES|ExecutionProvider|subprocess|Popen|spawn|"
    r"\bcupy\b|ctypes|data_ptr"
)


def kernel_free(file: Any, settings: Settings) -> bool:  # file: python.AstFile
    """Is the kernel index of ``file`` provably empty (see the module docstring)?"""
    text = file.text
    if _RUNTIME_WORDS.search(text):
        return False
    if any(member in text for member in _TORCH_CUDA_ONLY_MEMBERS):
        return False
    facts = settings.project
    for node in ast.walk(file.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                full = alias.name
                candidate = full if alias.asname else full.split(".")[0]
                if not _plain(candidate, (candidate,), facts, relative=False):
                    return False
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return False
                if node.level:
                    candidates = tuple(f"{b}.{alias.name}" for b in relative_module(file.path, node.level, node.module))
                    if not candidates or not _plain(candidates[0], candidates, facts, relative=True):
                        return False
                elif node.module:
                    full = f"{node.module}.{alias.name}"
                    if not _plain(full, (full,), facts, relative=False) or describe_module(node.module, facts) is not None:
                        return False
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            if ("-" in value or any(c in value for c in "<>=~")) and _cuda_requirement(cst.SimpleString(repr(value))):
                return False
    return True


def _plain(first: str, candidates: tuple[str, ...], facts, relative: bool) -> bool:  # noqa: ANN001 - ProjectFacts
    """Does an import of ``candidates`` bind nothing the kernel index records?"""
    if relative:
        found = project_module(facts, candidates)
        if found is not None and describe_module(found, facts) is not None:
            return False
    elif describe_module(first, facts) is not None:
        return False
    if any(facts.sink(c) is not None or facts.sinks_in(c) for c in candidates):
        return False
    if facts.selections and any(facts.selected(c) for c in candidates):
        return False
    return first not in CUDA_IPC_CALLS
