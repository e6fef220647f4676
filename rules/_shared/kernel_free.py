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

__all__ = ["kernel_free", "plain_import"]

# Words without which no build, hub kernel, CUDA operator, GPU launch, raw pointer or CUDA
# provider can be spelled (kernels.py's `_Collector`, process_gpus.py). Whole words where a
# longer one is common prose ("Number of subprocesses to use for data loading"): the launcher's
# module is imported by its name. A dynamic import is read from the tree instead (`_dynamic`).
_RUNTIME_WORDS = re.compile(
    r"load_inline|cpp_extension|CUDAExtension|get_kernel|load_kernel|"
    r"_jit_get_operation|\bops\b|CUDA_VISIBLE_DEVICES|ExecutionProvider|\bsubprocess\b|\bPopen\b|\bspawn\b|"
    r"\bcupy\b|ctypes|data_ptr"
)
_DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


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
                if alias.name == "*" or (alias.name in _DYNAMIC_IMPORTERS and alias.asname):
                    return False  # everything, or an importer under another name
                if node.level:
                    candidates = tuple(f"{b}.{alias.name}" for b in relative_module(file.path, node.level, node.module))
                    if not candidates or not _plain(candidates[0], candidates, facts, relative=True):
                        return False
                elif node.module:
                    full = f"{node.module}.{alias.name}"
                    if not _plain(full, (full,), facts, relative=False) or describe_module(node.module, facts) is not None:
                        return False
        elif isinstance(node, ast.Call) and not _plain_dynamic(node, facts):
            return False
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            if ("-" in value or any(c in value for c in "<>=~")) and _cuda_requirement(cst.SimpleString(repr(value))):
                return False
    return True


def plain_import(module: str, settings: Settings) -> bool:
    """Does ``import module`` (absolute, unaliased) bind a name the kernel index records nothing for?"""
    return _plain(module, (module,), settings.project, relative=False)


def _plain_dynamic(call: ast.Call, facts) -> bool:  # noqa: ANN001 - ProjectFacts
    """Does a call record nothing as a dynamic import (``kernels.dynamic_import``)? The index
    records ``importlib.import_module("fused_adam_cuda")`` / ``__import__(...)`` only where the
    literal names a module ``describe_module`` knows; a call of a name or attribute spelled
    otherwise is no importer (an alias of one is refused at its import), nor is one whose first
    argument is no string literal."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in _DYNAMIC_IMPORTERS or not call.args:
        return True
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return True
    return describe_module(first.value, facts) is None


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
