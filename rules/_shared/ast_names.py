"""Names written in CPython's ``ast``, with nothing but the standard library: the round-trip
decision (``round_trip``) is imported by the residual pass too, which loads no libcst."""

from __future__ import annotations

import ast

__all__ = ["ast_dotted"]


def ast_dotted(node: object) -> str | None:
    """``a.b.c`` for a chain of names and attributes (``python.dotted_name`` on ``ast``); None for
    anything else, the walk's keyword names included."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
