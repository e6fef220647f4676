"""Rules about one CUDA-only package (CN6xx): ``PackageRule`` reports each import of it."""

from __future__ import annotations

from typing import ClassVar

import libcst as cst

from cuda2neuron.core import Effort, Rule
from cuda2neuron.python import dotted_name

__all__ = ["PackageRule", "in_package"]


def in_package(qualified: str | None, packages: tuple[str, ...]) -> bool:
    """True when ``qualified`` is one of ``packages`` or lives inside one of them."""
    if qualified is None:
        return False
    for p in packages:
        if qualified.startswith(p) and (len(qualified) == len(p) or qualified[len(p)] == "."):
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
