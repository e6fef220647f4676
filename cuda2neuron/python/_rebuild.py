"""Apply replacements by rebuilding only the paths from the root to the replaced nodes.

A full ``CSTTransformer`` pass rebuilds the whole tree (as costly as a parse); a fix touches a
few nodes, so we copy only their ancestors. Reports carry their ancestor chain, so the path is
known without parent metadata.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import libcst as cst

from ._lineage import Lineage

__all__ = ["direct_children", "rebuild"]

Replacement = cst.CSTNode | cst.RemovalSentinel


def rebuild(
    module: cst.Module,
    replacements: Mapping[int, Replacement],
    paths: Sequence[Sequence[cst.CSTNode]],
    lineage: Lineage | None = None,
) -> cst.Module:
    """``replacements`` by node id; ``paths`` hold each replaced node's ancestors (root first).
    ``lineage`` learns what each new node stands for (the replaced nodes are the caller's to
    record)."""
    on_path = {id(n) for path in paths for n in path}
    result = _rebuild(module, replacements, on_path, lineage)
    assert isinstance(result, cst.Module)
    return result


def _rebuild(
    node: cst.CSTNode, replacements: Mapping[int, Replacement], on_path: set[int], lineage: Lineage | None
) -> Replacement:
    replacement = replacements.get(id(node))
    if replacement is not None:
        return replacement
    if id(node) not in on_path:
        return node
    changes: dict[str, object] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, cst.CSTNode):
            new = _rebuild(value, replacements, on_path, lineage)
            if new is not value:
                if isinstance(new, cst.RemovalSentinel):
                    raise ValueError(f"cannot remove the {f.name} of a {type(node).__name__}")
                changes[f.name] = new
        elif isinstance(value, (tuple, list)) and any(isinstance(v, cst.CSTNode) for v in value):
            items = []
            changed = False
            for v in value:
                new = _rebuild(v, replacements, on_path, lineage) if isinstance(v, cst.CSTNode) else v
                if new is not v:
                    changed = True
                if not isinstance(new, cst.RemovalSentinel):
                    items.append(new)
            if changed:
                changes[f.name] = _fix_sequence(node, f.name, items)
    if not changes:
        return node
    if isinstance(node, cst.SimpleStatementLine) and changes.get("body") == []:
        # Every small statement of the line was removed: remove the line itself.
        return cst.RemovalSentinel.REMOVE
    new_node = node.with_changes(**changes)
    if lineage is not None:
        # The node, and a `pass` put where a block lost its only statement.
        lineage.built(new_node, node, direct_children(node))
    return new_node


def direct_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes held by ``node``'s own fields (one level down, in field order)."""
    kept: list[cst.CSTNode] = []
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, cst.CSTNode):
            kept.append(value)
        elif isinstance(value, (tuple, list)):
            kept.extend(v for v in value if isinstance(v, cst.CSTNode))
    return kept


def _fix_sequence(parent: cst.CSTNode, field: str, items: list) -> object:
    # Removing the only statement of a block would leave invalid code: put `pass` there.
    if field == "body" and not items:
        if isinstance(parent, cst.IndentedBlock):
            return [cst.SimpleStatementLine([cst.Pass()])]
        if isinstance(parent, cst.SimpleStatementSuite):
            return [cst.Pass()]
    return items
