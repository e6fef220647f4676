"""String literals: their value, and new ones in the quote style of the code around them."""

from __future__ import annotations

import libcst as cst

__all__ = ["fstring_text", "make_string", "string_value"]


def string_value(node: cst.BaseExpression | None) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, concatenations included."""
    if isinstance(node, cst.SimpleString):
        if "b" in node.prefix.lower():
            return None
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def fstring_text(node: cst.BaseExpression | None) -> str | None:
    """The text of an f-string with no placeholder (``f"cuda"``): a constant, though written as
    an f-string (a leftover of an edit, or a style habit). None for any other node."""
    if not isinstance(node, cst.FormattedString) or "b" in node.prefix.lower():
        return None
    if not all(isinstance(part, cst.FormattedStringText) for part in node.parts):
        return None
    text = "".join(part.value for part in node.parts if isinstance(part, cst.FormattedStringText))
    return text.replace("{{", "{").replace("}}", "}")


def make_string(value: str, like: cst.BaseExpression | None = None) -> cst.SimpleString:
    """A string literal with the quote style of ``like`` (keeps the user's formatting habits)."""
    quote = '"'
    if isinstance(like, cst.SimpleString):
        body = like.value.lstrip("rRuU")
        if body.startswith("'") and "'" not in value:
            quote = "'"
    return cst.SimpleString(f"{quote}{value}{quote}")
