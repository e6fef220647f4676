"""Rules about one CUDA-only package (CN6xx): ``PackageRule`` reports each import of it."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import ClassVar

import libcst as cst

from cuda2neuron.core import Effort, Rule
from cuda2neuron.python import dotted_name

from .names import call_qualname

__all__ = ["PackageRule", "imports_any", "imports_package", "in_package", "probed_package"]


def in_package(qualified: str | None, packages: tuple[str, ...]) -> bool:
    """True when ``qualified`` is one of ``packages`` or lives inside one of them."""
    if qualified is None:
        return False
    for p in packages:
        if qualified.startswith(p) and (len(qualified) == len(p) or qualified[len(p)] == "."):
            return True
    return False


# Calls that ask whether a package is installed (or load it by name): their first argument names a
# package, it selects no implementation (litgpt's `_TRITON_AVAILABLE = RequirementCache("triton")`).
_PACKAGE_PROBES = frozenset({
    "importlib.util.find_spec", "importlib.import_module", "importlib.metadata.version",
    "importlib.metadata.distribution", "pkg_resources.get_distribution", "pkg_resources.require",
    "lightning_utilities.core.imports.RequirementCache", "lightning_utilities.core.imports.package_available",
    "lightning_utilities.core.imports.module_available", "lightning_utilities.RequirementCache",
    "transformers.utils.import_utils._is_package_available",
    # imports the module or skips the test: on Trainium, without the package, the test skips
    "pytest.importorskip",
})


def probed_package(rule: Rule, ancestors, node: cst.CSTNode) -> bool:  # noqa: ANN001 - the chain above node
    """Whether ``node`` is the first argument of a call that asks for a package by name."""
    if len(ancestors) < 2 or not isinstance(ancestors[-1], cst.Arg) or not isinstance(ancestors[-2], cst.Call):
        return False
    arg, call = ancestors[-1], ancestors[-2]
    if not call.args or call.args[0] is not arg or arg.keyword is not None:
        return False
    return call_qualname(rule, call) in _PACKAGE_PROBES


@lru_cache(maxsize=64)
def _import_pattern(tops: tuple[str, ...]) -> re.Pattern[bytes]:
    words = b"|".join(re.escape(t.encode()) for t in tops)
    # `from P...` (continued with `\\` too), or P anywhere in an `import` clause up to the
    # statement's end (`import os, P`, `import a, \\` + newline + `P`, `from x import y as P`).
    return re.compile(
        rb"\bfrom[ \t\\\r\n]+(?:" + words + rb")\b|\bimport\b(?:[^;\r\n]|\\\r?\n)*\b(?:" + words + rb")\b"
    )


def imports_any(code: bytes, tops: tuple[str, ...]) -> bool:
    """Can ``code`` (comments and docstrings blanked) import a module whose first name is one of
    ``tops``? A rule that reports only names resolved through such an import uses it as its
    ``wakes`` test: diffusers spells ``enable_xformers_memory_efficient_attention`` and
    ``image_rotary_emb`` in hundreds of files and imports xformers or rotary_emb in a handful."""
    return _import_pattern(tops).search(code) is not None


def imports_package(tree: ast.Module, packages: tuple[str, ...]) -> bool:
    """Does an absolute import anywhere in ``tree`` (CPython's ``ast``) name a module whose first
    name is one of ``packages``? A name resolves to a qualified one only through an import (a
    relative one binds none): where this says no, a ``PackageRule`` whose reports are all imports
    of its packages or names resolved through them reports nothing (its detector, a gate)."""
    tops = frozenset(p.split(".")[0] for p in packages)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(alias.name.split(".")[0] in tops for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module is not None:
            if node.module.split(".")[0] in tops:
                return True
    return False


class PackageRule(Rule):
    """Base of a rule about a CUDA-only package: each import statement of one of ``packages``
    (top-level module names) is handed to ``report_import`` once. The rule may visit calls and
    attributes of the package as well."""

    abstract = True
    packages: ClassVar[tuple[str, ...]] = ()
    # A rule whose imports need no more than a fixed message says so here instead of
    # overriding ``report_import``.
    import_message: ClassVar[str] = ""
    import_guidance: ClassVar[str] = ""

    def visit_Import(self, node: cst.Import) -> None:
        # Import targets are always dotted names, so dotted_name never answers None here.
        if any(in_package(dotted_name(alias.name), self.packages) for alias in node.names):
            self.report_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not node.relative and node.module is not None and in_package(dotted_name(node.module), self.packages):
            self.report_import(node)

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if not self.import_message:
            raise NotImplementedError(f"{type(self).__name__}: set import_message or override report_import")
        self.report(node, self.import_message, guidance=self.import_guidance, effort=Effort.LOW)
