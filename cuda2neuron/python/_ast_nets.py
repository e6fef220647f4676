"""The safety nets' filter (``_lint._without_covered_net_reports``) on the detectors' findings.

A net (``Rule.net``: CN109, CN409, CN623) speaks once per unit, and only where no other rule
reports the same node, one of its ancestors, or another part of its unit. The libcst path decides
that on report nodes; the detectors hand the engine findings, whose nodes are found again here
through the spans ``AstFile.span`` made (``AstFile.spanned``): each finding's node is the one its
detector located it by. Where a finding's span names no node, or names several that the filter
would tell apart, the answer is None and the file goes to libcst.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator

from cuda2neuron.core import Finding

from ._ast_walk import AstFile

__all__ = ["net_filtered"]

_DECORATED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def net_filtered(file: AstFile, nets: Collection[str], found: list[Finding]) -> list[Finding] | None:
    """``found`` (each rule's findings in walk order, before suppression comments) without the
    nets' findings that ``_lint`` drops: a second one of the same net in a unit, and any in a unit
    another rule reports in or under a node another rule reports. None where that cannot be told."""
    if not nets or not any(f.code in nets for f in found):
        return found
    parents: dict[int, ast.AST] | None = None
    others = [f for f in found if f.code not in nets]
    units: set[int] = set()  # the units other rules report in
    reported: dict[int, list[int]] = {}  # a node other rules report (id) -> those findings (index)
    nodes: list[list[ast.AST]] = []  # per other finding, the nodes its span names
    if others:
        parents = _parents(file.tree)
        for index, f in enumerate(others):
            named = file.spanned.get(f.span)
            if not named:
                return None
            if len({id(_unit(n, parents)) for n in named}) != 1:
                return None
            unit = _unit(named[0], parents)
            if unit is not None:
                units.add(id(unit))
            nodes.append(named)
            for n in named:
                reported.setdefault(id(n), []).append(index)
    kept: list[Finding] = []
    said: set[tuple[str, int]] = set()
    for f in found:
        if f.code not in nets:
            kept.append(f)
            continue
        named = file.spanned.get(f.span)
        if not named:
            return None
        if parents is None:
            parents = _parents(file.tree)
        verdicts = {_verdict(n, parents, units, reported, nodes) for n in named}
        if len(verdicts) != 1:
            return None
        unit, covered = verdicts.pop()
        if covered is None:
            return None
        if covered or (f.code, unit) in said:
            continue
        said.add((f.code, unit))
        kept.append(f)
    return kept


def _verdict(
    node: ast.AST, parents: dict[int, ast.AST], units: set[int], reported: dict[int, list[int]], nodes: list[list[ast.AST]]
) -> tuple[int, bool | None]:
    """(the unit of a net's node, whether another rule covers it: None where a finding's nodes
    are some on the node's chain and some off it)."""
    unit = _unit(node, parents)
    if id(unit) in units:
        return id(unit), True
    on = {id(n) for n in _chain(node, parents)}
    covered: bool | None = False
    for key in on:
        for index in reported.get(key, ()):
            if not all(id(n) in on for n in nodes[index]):
                return id(unit), None
            covered = True
    return id(unit), covered


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append(child)
    return parents


def _chain(node: ast.AST, parents: dict[int, ast.AST]) -> Iterator[ast.AST]:
    """``node`` and its ancestors, innermost first."""
    while node is not None:
        yield node
        node = parents.get(id(node))  # type: ignore[assignment]


def _unit(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    """``_lint.net_unit`` on ``ast``: the innermost statement, ``with`` item or decorator (libcst's
    small and compound statements are ``ast``'s statements; a ``Decorator`` is an expression in a
    ``decorator_list``)."""
    for n in _chain(node, parents):
        if isinstance(n, (ast.stmt, ast.withitem)):
            return n
        parent = parents.get(id(n))
        if isinstance(parent, _DECORATED) and any(d is n for d in parent.decorator_list):
            return n
    return None
