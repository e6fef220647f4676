"""Where a node of a rewritten module came from in the file as read.

The fixed point rewrites a module round after round; a finding made in a later round, and the
edit it describes, must still be located in the *original* text: that is the text a person
reads next to the report, and the text SARIF's fix regions refer to. Reporting in the
coordinates of the round's own module put, after a `set_device` call moved below
`init_process_group`, the `"nccl"` finding on the set_device line.

libcst nodes are immutable and a fix rebuilds only the path from the root to the replaced
node, so most nodes of a later module are the very objects of the parsed one. The lineage
records every node that is not: the rebuilt ancestors (each stands for the node it was rebuilt
from), a fix's replacement (it stands for the node it replaced), and what a replacement or an
import change built afresh (each stands for the node its builder replaced). A node the
lineage does not know is a node of the parsed module, located by one position pass over it.
A node a replacement reuses from the code it replaced (a statement moved below another) keeps
its own, exact place.

Every recorded node is kept alive with its entry: ids are only unique among live objects.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from ._walk import _child_fields, _is_node

__all__ = ["Lineage"]


class Lineage:
    def __init__(self) -> None:
        # id(new node) -> (new node, the node of the previous module it stands for)
        self._stands_for: dict[int, tuple[cst.CSTNode, cst.CSTNode]] = {}
        # Replacements that are a part of the code they replaced (``x.cuda()`` -> ``x``): old
        # nodes in a new place, which the rebuilt path above them must not take for new ones.
        self._reused: dict[int, cst.CSTNode] = {}

    def __len__(self) -> int:
        return len(self._stands_for)

    def __contains__(self, node: cst.CSTNode) -> bool:
        return id(node) in self._stands_for

    def rebuilt(self, new: cst.CSTNode, old: cst.CSTNode) -> None:
        """``new`` is ``old`` with some children changed (a path node, an import statement)."""
        if new is not old and id(new) not in self._stands_for:
            self._stands_for[id(new)] = (new, old)

    def replaced(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        """A fix replaced ``old`` by ``new``: ``new`` and whatever it built afresh stand for
        ``old``; what it reuses from ``old`` stays where it was."""
        kept = _subtree_ids(old)
        if id(new) in kept:
            self._reused[id(new)] = new  # unwrapped: the replacement is a part of the replaced code
            return
        self._fresh(new, old, kept)

    def built(self, new: cst.CSTNode, old: cst.CSTNode, kept: Iterable[cst.CSTNode]) -> None:
        """``new`` (rebuilt from ``old``) may hold nodes nobody recorded, made by code we do not
        control (libcst's import helpers): each stands for ``old``. ``kept``: the children that
        are old nodes, whose subtrees need no look."""
        self._fresh(new, old, {id(k) for k in kept})

    def _fresh(self, new: cst.CSTNode, old: cst.CSTNode, kept: set[int]) -> None:
        stands_for = self._stands_for
        stack = [new]
        while stack:
            node = stack.pop()
            if id(node) in kept or id(node) in stands_for or id(node) in self._reused:
                continue
            stands_for[id(node)] = (node, old)
            stack.extend(_children(node))

    def origin(self, node: cst.CSTNode) -> cst.CSTNode:
        """The node of the parsed module that ``node`` stands for (itself if it is one)."""
        entry = self._stands_for.get(id(node))
        while entry is not None:
            node = entry[1]
            entry = self._stands_for.get(id(node))
        return node


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    for field in _child_fields(type(node)):
        value = getattr(node, field)
        t = type(value)
        if t is tuple or t is list:
            out.extend(item for item in value if _is_node(type(item)))
        elif _is_node(t):
            out.append(value)
    return out


def _subtree_ids(node: cst.CSTNode) -> set[int]:
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        seen.add(id(n))
        stack.extend(_children(n))
    return seen
