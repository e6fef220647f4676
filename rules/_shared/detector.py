"""The frame every rule's detector on CPython's ``ast`` shares (``Rule.detect``).

A detector subclasses ``AstDetector`` with the rule's ``visit_*`` / ``leave_*`` methods, which
``python/_ast_walk.walk_ast`` calls in libcst's order, and keeps each report as a tuple whose last
item is the node's ancestors. ``reports()`` walks the file and hands them back, or None where the
walk cannot tell what the libcst visitor would find; the engine then parses the file with libcst.
"""

from __future__ import annotations

import ast
from typing import Any

from cuda2neuron.core import Effort, Finding, Fix

__all__ = ["AstDetector"]


class AstDetector:
    def __init__(self, rule: type, file: Any) -> None:  # file: python.AstFile (rules name no engine type)
        self.rule = rule
        self.file = file
        self._reports: list[tuple[Any, ...]] = []

    def reports(self) -> list[tuple[Any, ...]] | None:
        """The walk's reports, or None: a visit could not tell (``Unsure``), or a report sits inside
        an f-string, where CPython 3.11 may misplace a node's position."""
        from cuda2neuron.python import AstWalk, Unsure, walk_ast

        self.ctx = AstWalk(self.file)
        try:
            walk_ast(self.ctx, self)
        except Unsure:
            return None
        if any(isinstance(a, ast.JoinedStr) for *_, above in self._reports for a in above):
            return None
        return self._reports

    def finding(self, node: ast.AST, message: str, guidance: str, effort: Effort, fix: Fix | None = None) -> Finding:
        """The rule's finding at ``node``, as its libcst visitor's report becomes one."""
        return Finding(
            code=self.rule.code,
            name=self.rule.name,
            message=message,
            path=self.file.path,
            span=self.file.span(node),
            fix=fix,
            guidance=guidance,
            effort=effort,
        )
