"""Scopes of names bound by imports and by anything else, shared by both walks.

The libcst walk (``_walk``) and the CPython ``ast`` walk (``_ast_walk``) bind names into these
scopes in the same order, so a name resolves the same way whichever tree a rule reads. Nothing
here imports libcst: a file whose rules all read CPython's ``ast`` never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LOCAL", "Scope"]

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

    def qualify(self, dotted: str | None) -> str | None:
        """Fully qualified name of a dotted name (``nn.Linear``) whose head is an import bound
        here, or None (no dotted name, or a head bound otherwise: a local, a parameter, a builtin).
        Both walks' ``qualname`` ask this of the dotted name their own tree spells."""
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        resolved = self.lookup(head)
        if resolved is None:
            return None
        return f"{resolved}.{rest}" if rest else resolved

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
