"""Names written in CPython's ``ast``, with nothing but the standard library: the round-trip
decision (``round_trip``) is imported by the residual pass too, which loads no libcst."""

from __future__ import annotations

import ast
import io
import tokenize

__all__ = ["ast_dotted", "one_literal"]


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


def one_literal(file, node: ast.Constant) -> bool:  # noqa: ANN001 - python.AstFile
    """Is the string ``node`` written as one literal (libcst's ``SimpleString``), not an implicit
    concatenation (``"m" "ps"``: libcst's ``ConcatenatedString``, whose parts it visits one by
    one and CPython joins into one value)?"""
    start, end = file.bounds(node)
    try:
        tokens = tokenize.generate_tokens(io.StringIO(file.text[start:end]).readline)
        return sum(t.type == tokenize.STRING for t in tokens) == 1
    except (tokenize.TokenError, SyntaxError):
        return False
