"""What the safety nets' detectors share (``nets.py`` on CPython's ``ast``): their unit of report
and the places a name is only text, read on the detector walk's ancestors (``python/_ast_walk``)."""

from __future__ import annotations

import ast

from .values import _OUTPUT_METHODS

__all__ = ["is_text", "net_unit"]

_DECORATED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def net_unit(ancestors) -> object | None:  # noqa: ANN001 - the walk's ancestors
    """``_lint.net_unit`` on the walk's ancestors: the innermost statement, ``with`` item or
    decorator (an expression in a ``decorator_list``)."""
    for i in range(len(ancestors) - 1, -1, -1):
        a = ancestors[i]
        if isinstance(a, (ast.stmt, ast.withitem)):
            return a
        if i >= 1 and isinstance(ancestors[i - 1], _DECORATED) and any(d is a for d in ancestors[i - 1].decorator_list):
            return a
    return None


def is_text(ancestors, node: ast.AST) -> bool:  # noqa: ANN001 - the walk's ancestors
    """``_shared/nets.is_text`` on ``ast``: outside any unit, a docstring, printed or logged text."""
    unit = net_unit(ancestors)
    if unit is None or (isinstance(unit, ast.Expr) and unit.value is node):
        return True
    for a in reversed(ancestors):
        if isinstance(a, ast.Call):
            func = a.func
            if isinstance(func, ast.Name):
                return func.id == "print"
            return isinstance(func, ast.Attribute) and func.attr in _OUTPUT_METHODS
        if a is unit:
            return False
    return False
