"""The cuda_api rules' name helpers on CPython's ``ast``, for their detectors (``Rule.detect``).

Each function is its libcst namesake's (``_shared/names.is_reference``, ``_helpers.aliased_members``,
``RuleContext.spell``) asked of the ``python/_ast_walk.py`` walk, which visits the nodes libcst
visits, in its order, with the same scopes. Where ``ast`` drops a node libcst visits (an import's
names, a parameter, a keyword's name, an attribute's member), the walk does not visit it either,
so only the shapes both trees have are told apart here.
"""

from __future__ import annotations

import ast

__all__ = ["aliased_members", "is_reference", "spelled"]


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
