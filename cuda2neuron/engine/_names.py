"""Alias-aware name resolution without libcst's full scope analysis.

``QualifiedNameProvider`` costs ~7x a parse on large files; rules only need to know what a dotted
name *means* (``th.cuda.synchronize`` -> ``torch.cuda.synchronize``). One cheap pre-pass records,
per scope, which names are bound by imports and which are bound by anything else (parameters,
assignments, loop targets...). A name bound locally by a non-import shadows the import: in
``def f(torch): torch.cuda.x()`` the inner ``torch`` is not the module.

Traps handled here, in one guarded place, so no rule spells names itself:
* ``torch.zeros(3).cuda`` must not resolve to ``torch.zeros.cuda``: chains through calls or
  subscripts are rejected.
* A parameter, assignment or loop variable named like an import shadows it in that scope.
* Class bodies do not enclose the functions defined in them (Python's scoping rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

__all__ = ["Scope", "ScopeIndex", "build_scope_index", "dotted_name"]

# Marker for "bound in this scope by something other than an import".
_LOCAL = ""


@dataclass
class Scope:
    parent: Scope | None
    is_class: bool = False
    # name -> qualified name for import bindings, or _LOCAL for other bindings.
    bindings: dict[str, str] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)

    def bind(self, name: str, qualified: str) -> None:
        # An import binding wins over other bindings in the same scope: the pattern
        # ``try: import apex / except ImportError: apex = None`` must still resolve to apex.
        if self.bindings.get(name):
            return
        self.bindings[name] = qualified

    def lookup(self, name: str) -> str | None:
        """Qualified name an unqualified ``name`` refers to here, or None if not an import."""
        scope: Scope | None = self
        first = True
        while scope is not None:
            if name in scope.globals_:
                scope = _module_of(scope)
                continue
            # Class scopes are only visible from their own body, not from nested functions.
            if (first or not scope.is_class) and name in scope.bindings:
                q = scope.bindings[name]
                return q or None
            first = False
            scope = scope.parent
        return None

    def local_name_for(self, qualified: str) -> str | None:
        """A name visible here that is bound to the module ``qualified`` (``th`` for torch)."""
        scope: Scope | None = self
        seen: set[str] = set()
        while scope is not None:
            for name, q in scope.bindings.items():
                if name in seen:
                    continue
                seen.add(name)
                if q == qualified and self.lookup(name) == qualified:
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


class ScopeIndex:
    """Scopes keyed by the node that owns them (Module, function/lambda body, class body)."""

    def __init__(self) -> None:
        self.by_owner: dict[cst.CSTNode, Scope] = {}

    def scope_for(self, owner: cst.CSTNode) -> Scope:
        return self.by_owner[owner]


class _Collector(cst.CSTVisitor):
    def __init__(self, index: ScopeIndex, module: cst.Module) -> None:
        self.index = index
        self.stack: list[Scope] = [Scope(parent=None)]
        index.by_owner[module] = self.stack[0]

    @property
    def scope(self) -> Scope:
        return self.stack[-1]

    # -- scopes -----------------------------------------------------------------------------
    def _push(self, owner: cst.CSTNode, is_class: bool = False) -> None:
        scope = Scope(parent=self.scope, is_class=is_class)
        self.index.by_owner[owner] = scope
        self.stack.append(scope)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.bind(node.name.value, _LOCAL)

    def visit_FunctionDef_params(self, node: cst.FunctionDef) -> None:
        # Parameters belong to the function's scope, but defaults are evaluated outside:
        # bind names into the body scope, which is created here and reused for the body.
        self._push(node.body)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Param(self, node: cst.Param) -> None:
        self.scope.bind(node.name.value, _LOCAL)

    def visit_Lambda_params(self, node: cst.Lambda) -> None:
        self._push(node.body)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.bind(node.name.value, _LOCAL)

    def visit_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._push(node.body, is_class=True)

    def leave_ClassDef_body(self, node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.scope.globals_.add(item.name.value)

    # -- bindings ---------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _module_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.scope.bind(alias.asname.name.value, full)
            else:
                top = full.split(".")[0]
                self.scope.bind(top, top)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    self._bind_alias_local(alias)
            return
        base = _module_name(node.module)
        for alias in node.names:
            target = f"{base}.{_module_name(alias.name)}"
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.scope.bind(alias.asname.name.value, target)
            else:
                self.scope.bind(_module_name(alias.name), target)

    def _bind_alias_local(self, alias: cst.ImportAlias) -> None:
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            self.scope.bind(alias.asname.name.value, _LOCAL)
        else:
            self.scope.bind(_module_name(alias.name).split(".")[0], _LOCAL)

    def _bind_target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.scope.bind(target.value, _LOCAL)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind_target(el.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind_target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_target(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self.scope.bind(node.name.name.value, _LOCAL)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target)


def build_scope_index(module: cst.Module) -> ScopeIndex:
    index = ScopeIndex()
    module.visit(_Collector(index, module))
    return index
