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

from dataclasses import dataclass, field

import libcst as cst

__all__ = ["LOCAL", "Scope", "bind_import", "bind_target", "dotted_name"]

# Marker for "bound in this scope by something other than an import".
LOCAL = ""


@dataclass
class Scope:
    parent: Scope | None
    is_class: bool = False
    # name -> qualified name for import bindings, or LOCAL for other bindings.
    bindings: dict[str, str] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)
    # qualified name -> the names bound to it by imports here, in binding order: ``spell`` asks
    # for every fix, and a module's scope holds every function and class of the file (scanning
    # it per fix made 50,000 fixes in one file quadratic).
    by_qualified: dict[str, list[str]] = field(default_factory=dict)

    def bind(self, name: str, qualified: str) -> None:
        # An import binding wins over other bindings in the same scope (the try/except
        # ImportError fallback pattern).
        if self.bindings.get(name):
            return
        self.bindings[name] = qualified
        if qualified:
            self.by_qualified.setdefault(qualified, []).append(name)

    def lookup(self, name: str) -> str | None:
        """Qualified name an unqualified ``name`` refers to here, or None if not an import."""
        scope: Scope | None = self
        first = True
        while scope is not None:
            # `global x` at module level is a no-op: the module scope is already where x lives,
            # and jumping "to the module" from there would never end.
            if scope.parent is not None and name in scope.globals_:
                scope = _module_of(scope)
                first = True
                continue
            # Class scopes are only visible from their own body, not from nested functions.
            if (first or not scope.is_class) and name in scope.bindings:
                return scope.bindings[name] or None
            first = False
            scope = scope.parent
        return None

    def bound_anywhere(self, name: str) -> bool:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.bindings:
                return True
            scope = scope.parent
        return False

    def local_name_for(self, qualified: str) -> str | None:
        """A name visible here that is bound to the module ``qualified`` (``th`` for torch)."""
        scope: Scope | None = self
        while scope is not None:
            for name in scope.by_qualified.get(qualified, ()):
                if self.lookup(name) == qualified:
                    return name
            scope = scope.parent
        return None


def _module_of(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


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
