"""Small helpers shared by rules: reading call arguments and building nodes."""

from __future__ import annotations

import libcst as cst

__all__ = ["arg_by_name", "positional_args", "string_value", "make_string"]


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def arg_by_name(call: cst.Call, keyword: str, position: int | None = None) -> cst.Arg | None:
    """The argument bound to parameter ``keyword`` (by keyword, or at ``position``)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a
    if position is not None:
        pos = positional_args(call)
        if any(a.star for a in call.args[: position + 1]):
            return None  # *args makes positions unknowable
        if position < len(pos):
            return pos[position]
    return None


def string_value(node: cst.BaseExpression) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, concatenations included."""
    if isinstance(node, cst.SimpleString):
        if "b" in node.prefix.lower():
            return None
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def make_string(value: str, like: cst.BaseExpression | None = None) -> cst.SimpleString:
    """A string literal with the quote style of ``like`` (keeps the user's formatting habits)."""
    quote = '"'
    if isinstance(like, cst.SimpleString):
        body = like.value.lstrip("rRuU")
        if body.startswith("'") and "'" not in value:
            quote = "'"
    return cst.SimpleString(f"{quote}{value}{quote}")
