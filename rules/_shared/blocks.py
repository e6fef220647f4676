"""Statements by their blocks: what a rule needs when it looks for defs or imports anywhere in a
module without walking (and libcst rebuilding) every expression."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

__all__ = ["statements"]

# Where statements nest: a module's or a block's body, a compound statement's body, its
# else/elif, except, finally and match-case parts.
_BLOCK_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")


def statements(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every statement under ``root``: compound ones (``def``, ``if``, ...) and the small ones of
    each line (``import``, assignments), nested blocks included, in no particular order.
    Expressions are never entered."""
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body
            continue
        if isinstance(node, cst.BaseSmallStatement):
            yield node  # a small statement of a one-line suite (`if ok: import x`)
            continue
        if isinstance(node, cst.BaseCompoundStatement):
            yield node
        for field in _BLOCK_FIELDS:
            value = getattr(node, field, None)
            if isinstance(value, (list, tuple)):
                stack.extend(value)
            elif isinstance(value, cst.CSTNode):
                stack.append(value)
