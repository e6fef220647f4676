"""Alias-aware name resolution without libcst's full scope analysis.

``QualifiedNameProvider`` costs ~7x a parse on large files; rules only need to know what a dotted
name *means* (``th.cuda.synchronize`` -> ``torch.cuda.synchronize``). The walker (``_walk``)
records, per scope, which names are bound by imports and which by anything else (parameters,
assignments, loop targets...). A name bound locally by a non-import shadows the import: in
``def f(torch): torch.cuda.x()`` the inner ``torch`` is not the module.

Traps handled here, in one guarded place, so no rule spells names itself:
* ``torch.zeros(3).cuda`` must not resolve to ``torch.zeros.cuda``: chains through calls or
  subscripts are rejected.
* A parameter, assignment or loop variable named like an import shadows it in that scope.
* Class bodies do not enclose the functions defined in them (Python's scoping rule).
* ``try: import apex / except ImportError: apex = None`` still resolves ``apex`` to the module.
"""

from __future__ import annotations

import libcst as cst

from ._scopes import LOCAL, Scope

__all__ = ["LOCAL", "Scope", "bind_import", "bind_target", "dotted_name"]


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a pure Name/Attribute chain; None if it passes through a call/subscript."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(node: cst.BaseExpression) -> str:
    name = dotted_name(node)
    assert name is not None  # import targets are always dotted names
    return name


def bind_import(node: cst.Import | cst.ImportFrom, scope: Scope) -> None:
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = _module_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                scope.bind(alias.asname.name.value, full)
            else:
                top = full.split(".")[0]
                scope.bind(top, top)
        return
    if isinstance(node.names, cst.ImportStar):
        return
    relative = bool(node.relative) or node.module is None
    base = "" if relative else _module_name(node.module)  # type: ignore[arg-type]
    for alias in node.names:
        local = (
            alias.asname.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
            else _module_name(alias.name).split(".")[0]
        )
        # A relative import names the user's own module, never torch.
        scope.bind(local, LOCAL if relative else f"{base}.{_module_name(alias.name)}")


def bind_target(target: cst.BaseExpression, scope: Scope) -> None:
    if isinstance(target, cst.Name):
        scope.bind(target.value, LOCAL)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            bind_target(el.value, scope)
    elif isinstance(target, cst.StarredElement):
        bind_target(target.value, scope)
