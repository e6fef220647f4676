"""The cuda_api rules' name helpers on CPython's ``ast``, for their detectors (``Rule.detect``).

Each function is its libcst namesake's (``_shared/names.is_reference``, ``_helpers.aliased_members``,
``RuleContext.spell``) asked of the ``python/_ast_walk.py`` walk, which visits the nodes libcst
visits, in its order, with the same scopes. Where ``ast`` drops a node libcst visits (an import's
names, a parameter, a keyword's name, an attribute's member), the walk does not visit it either,
so only the shapes both trees have are told apart here.
"""

from __future__ import annotations

import ast

from .._shared.detector import AstDetector

__all__ = ["AstMemberReferences", "aliased_members", "is_reference", "name_parts", "spelled", "written_names"]


def is_reference(ctx, node: ast.Name) -> bool:  # noqa: ANN001 - python.AstWalk
    """``names.is_reference``: does ``node`` read the binding of its name? libcst's ``AssignTarget``
    (``x = ...``, each target of ``a = b = ...``) and ``AsName`` (``with f() as x``) hold a name
    that is no use; a name inside a tuple target sits in an ``Element`` there, which is a use, as
    it is in ``ast``'s ``Tuple``. The other names libcst excludes (imports, parameters, keywords,
    ``global``) are no ``ast.Name`` and are never visited."""
    parent = ctx.parent
    if isinstance(parent, ast.Assign):
        return not any(t is node for t in parent.targets)
    if isinstance(parent, ast.withitem):
        return parent.optional_vars is not node
    return True


def aliased_members(node: ast.ImportFrom, members: frozenset[str]) -> list[str]:
    """``_helpers.aliased_members``: the local names ``from torch... import member as alias``
    binds to one of ``members`` (absolute imports from torch only, as libcst's reads them)."""
    if node.level or node.module is None or node.module.split(".")[0] != "torch":
        return []
    return [a.asname for a in node.names if a.asname is not None and a.name in members]


def spelled(scope, qualified: str) -> tuple[str, bool] | None:  # noqa: ANN001 - python.Scope
    """``RuleContext.spell`` as text: the expression for ``qualified`` valid in ``scope`` (the
    user's alias reused: ``th.neuron.synchronize``) and whether it needs an import of its top
    name; None where that name is shadowed here."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        local = scope.local_name_for(".".join(parts[:cut]))
        if local is not None:
            return ".".join([local, *parts[cut:]]), False
    top = parts[0]
    if scope.lookup(top) is None and scope.bound_anywhere(top):
        return None
    return qualified, True


def name_parts(qualified_names: object) -> tuple[tuple[str, ...], ...]:
    """Each qualified name's parts below ``torch`` (``written_names``' table), distinct."""
    return tuple(sorted({tuple(q.split(".")[1:]) for q in qualified_names}))  # type: ignore[attr-defined]


def written_names(text: str, parts: tuple[tuple[str, ...], ...]) -> bool:
    """Could a name of the file resolve to one of the qualified names ``parts`` spell? Every
    part below ``torch`` of a resolved name is written in the file: an import writes the module
    path and the name it binds (an alias replaces only what the import wrote), the attribute
    chain the rest (``from torch.cuda import graphs as g`` then ``g.graph_pool_handle``). So a
    text missing one part of every name holds no reference to any (most files a rule wakes on
    for ``cuda`` name no API of its table: a device string, a ``.cuda()`` call)."""
    return any(all(p in text for p in name) for name in parts)


class AstMemberReferences(AstDetector):
    """``MemberReferences``'s visits on CPython's ``ast``: ``check_reference`` is asked of every
    attribute named like one of ``members`` and every name a from-import binds to one."""

    members: frozenset[str] = frozenset()

    def __init__(self, rule: type, file) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self._aliases: frozenset[str] = frozenset()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.members:
            self.check_reference(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in aliased_members(node, self.members):
            self._aliases = self._aliases | {alias}

    def visit_Name(self, node: ast.Name) -> None:
        if (node.id in self.members or node.id in self._aliases) and is_reference(self.ctx, node):
            self.check_reference(node)

    def check_reference(self, node: ast.Attribute | ast.Name) -> None:
        raise NotImplementedError
