"""The last Python text CPython parsed for the splicer, kept for the residual pass of the same file.

A file with findings is cut into statements by ``python/_splice.py`` (an ``ast.parse`` of the
file as read), and a file that ends unchanged is then read once more by the residual pass
(``kinds/_residual.py``: ``parse_names`` of the same bytes), in the same process, right after.
Only the last tree is kept: the trap is holding trees alive, which every later cyclic
collection would scan (the project sweep pauses the collector for that reason); one tree, replaced
by the next file's, costs nothing of the sort. The tree is only read, never changed.
"""

from __future__ import annotations

import ast
import warnings

__all__ = ["kept_tree", "parse_kept"]

# The last text parsed here and its tree: one slot, replaced whole (a reader on another thread
# sees the old pair or the new one, never half of each).
_kept: list[tuple[str, ast.Module] | None] = [None]


def parse_kept(text: str) -> ast.Module:
    """``ast.parse(text)`` (its warnings, about the user's code, not shown), kept for
    ``kept_tree``; raises as ``ast.parse`` does (and then keeps nothing)."""
    _kept[0] = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(text)
    _kept[0] = (text, tree)
    return tree


def kept_tree(text: str) -> ast.Module | None:
    """The tree ``parse_kept`` made of ``text``, if it was the last text parsed there."""
    kept = _kept[0]
    if kept is not None and (kept[0] is text or kept[0] == text):
        return kept[1]
    return None
