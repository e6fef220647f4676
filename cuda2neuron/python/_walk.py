"""A fast traversal for rules: one walk, no whitespace, scopes bound as we go.

libcst's generic ``visit`` rebuilds every node (even for a read-only visitor) and walks every
whitespace and punctuation node; on a large file it costs more than the parse itself. Rules only
care about syntax, so this walker follows the dataclass fields that can hold syntax, calls the
rules' ``visit_<Type>`` / ``leave_<Type>`` methods, keeps the ancestor chain, and records name
bindings into scopes while it goes.

Binding while walking is sound for valid programs: a local name used before it is bound raises
``UnboundLocalError`` at run time, so the uses rules care about come after the binding. Imports at
module level are bound before the walk so functions defined above an import still see it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import lru_cache

import libcst as cst

from ._context import RuleContext
from ._names import LOCAL, Scope, bind_import, bind_target

__all__ = ["visit_syntax", "walk_rules"]

_SKIPPED_FIELDS = frozenset(
    {
        "colon", "comma", "comment", "default_indent", "default_newline", "dot", "empty_lines",
        "encoding", "equal", "first_colon", "footer", "has_trailing_newline", "header", "indent",
        "lbrace", "lbracket", "leading_lines", "lines_after_decorators", "lpar", "newline",
        "posonly_ind", "rbrace", "rbracket", "rpar", "second_colon", "semicolon", "separator",
        "trailing_comma", "trailing_whitespace", "operator", "star", "relative", "asynchronous",
        "first_line", "last_line",
    }
)


@lru_cache(maxsize=None)
def _child_fields(cls: type) -> tuple[str, ...]:
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in _SKIPPED_FIELDS and "whitespace" not in f.name
    )


# Concrete node classes, filled lazily: a dict lookup is much cheaper than isinstance() against
# libcst's abstract base classes on every field of every node.
_IS_NODE: dict[type, bool] = {}


def _is_node(t: type) -> bool:
    known = _IS_NODE.get(t)
    if known is None:
        known = _IS_NODE[t] = issubclass(t, cst.CSTNode)
    return known


_SCOPE_OWNER_NAMES = frozenset({"FunctionDef", "Lambda", "ClassDef"})


class _Walker:
    def __init__(self, rules: Sequence[object], context: RuleContext) -> None:
        self.context = context
        self.visit: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
        self.leave: dict[str, list[Callable[[cst.CSTNode], object]]] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_") and "_" not in attr[6:]:
                    self.visit.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_") and "_" not in attr[6:]:
                    self.leave.setdefault(attr[6:], []).append(getattr(rule, attr))
        self._plans: dict[type, tuple] = {}

    def _plan(self, t: type) -> tuple:
        """What walking a node of type ``t`` does: its visits, binder, fields, leaves, and
        whether it owns a scope (looked up once per type, not once per node)."""
        name = t.__name__
        plan = (
            tuple(self.visit.get(name, ())),
            _BINDERS.get(name),
            _child_fields(t),
            tuple(self.leave.get(name, ())),
            name in _SCOPE_OWNER_NAMES,
        )
        self._plans[t] = plan
        return plan

    def walk(self, node: cst.CSTNode) -> None:
        # The hot loop of every lint: one plan lookup per node, the field loop inlined.
        plan = self._plans.get(type(node))
        if plan is None:
            plan = self._plan(type(node))
        visits, binder, fields, leaves, owner = plan
        context = self.context
        for method in visits:
            method(node)
        if binder is not None:
            binder(node, context.scope)
        ancestors = context.ancestors
        ancestors.append(node)
        walk = self.walk
        for field in fields:
            value = getattr(node, field)
            if owner and field == "body":
                context.push_scope(_scope_for(node, context.scope))
                self._walk_value(value)
                context.pop_scope()
                continue
            t = type(value)
            if t is tuple or t is list:
                for item in value:
                    known = _IS_NODE.get(type(item))
                    if known or (known is None and _is_node(type(item))):
                        walk(item)
            else:
                known = _IS_NODE.get(t)
                if known or (known is None and _is_node(t)):
                    walk(value)
        ancestors.pop()
        for method in leaves:
            method(node)

    def _walk_value(self, value: object) -> None:
        t = type(value)
        if t is tuple or t is list:
            for item in value:  # type: ignore[attr-defined]
                if _is_node(type(item)):
                    self.walk(item)
        elif _is_node(t):
            self.walk(value)  # type: ignore[arg-type]


def _scope_for(owner: cst.CSTNode, parent: Scope) -> Scope:
    scope = Scope(parent=parent, is_class=isinstance(owner, cst.ClassDef))
    if isinstance(owner, (cst.FunctionDef, cst.Lambda)):
        params = owner.params
        for group in (params.posonly_params, params.params, params.kwonly_params):
            for p in group:
                scope.bind(p.name.value, LOCAL)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.bind(star.name.value, LOCAL)
    return scope


def _bind_with(node: cst.CSTNode, scope: Scope) -> None:
    if node.asname is not None:  # type: ignore[attr-defined]
        bind_target(node.asname.name, scope)  # type: ignore[attr-defined]


def _bind_except(node: cst.CSTNode, scope: Scope) -> None:
    if node.name is not None:  # type: ignore[attr-defined]
        bind_target(node.name.name, scope)  # type: ignore[attr-defined]


def _bind_global(node: cst.CSTNode, scope: Scope) -> None:
    for item in node.names:  # type: ignore[attr-defined]
        scope.globals_.add(item.name.value)


# Binding events by node type name (see the module docstring for why binding while walking is sound).
_BINDERS: dict[str, Callable[[cst.CSTNode, Scope], None]] = {
    "Import": bind_import,  # type: ignore[dict-item]
    "ImportFrom": bind_import,  # type: ignore[dict-item]
    "AssignTarget": lambda n, s: bind_target(n.target, s),  # type: ignore[attr-defined]
    "AnnAssign": lambda n, s: bind_target(n.target, s),  # type: ignore[attr-defined]
    "AugAssign": lambda n, s: bind_target(n.target, s),  # type: ignore[attr-defined]
    "For": lambda n, s: bind_target(n.target, s),  # type: ignore[attr-defined]
    "NamedExpr": lambda n, s: bind_target(n.target, s),  # type: ignore[attr-defined]
    "WithItem": _bind_with,
    "ExceptHandler": _bind_except,
    "FunctionDef": lambda n, s: s.bind(n.name.value, LOCAL),  # type: ignore[attr-defined]
    "ClassDef": lambda n, s: s.bind(n.name.value, LOCAL),  # type: ignore[attr-defined]
    "Global": _bind_global,
}


def _prebind_module_imports(body: Sequence[cst.CSTNode], scope: Scope) -> None:
    """Module-level imports, also inside top-level if/try/with blocks, before the walk."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    bind_import(small, scope)
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            blocks = [stmt.body]
            if isinstance(stmt, cst.If) and stmt.orelse is not None:
                blocks.append(stmt.orelse.body if isinstance(stmt.orelse, cst.Else) else stmt.orelse)
            if isinstance(stmt, cst.Try):
                blocks += [h.body for h in stmt.handlers]
                if stmt.orelse is not None:
                    blocks.append(stmt.orelse.body)
            for block in blocks:
                if isinstance(block, cst.If):
                    _prebind_module_imports([block], scope)
                elif isinstance(block, cst.BaseSuite) and isinstance(block, cst.IndentedBlock):
                    _prebind_module_imports(block.body, scope)


def walk_rules(module: cst.Module, rules: Sequence[object], context: RuleContext) -> None:
    _prebind_module_imports(module.body, context.scope)
    _Walker(rules, context).walk(module)


# Fields in source order where libcst's dataclass order differs (decorators come before the body,
# an if-expression's body before its test): a visitor that wants the *first* call under a node
# sees the calls in the order libcst's own visit gives them.
_SOURCE_ORDER: dict[str, tuple[str, ...]] = {
    "FunctionDef": ("decorators", "name", "type_parameters", "params", "returns", "body"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "IfExp": ("body", "test", "orelse"),
    "MatchCase": ("pattern", "guard", "body"),
    "Parameters": ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "Arg": ("keyword", "value"),
    "TypeAlias": ("name", "type_parameters", "value"),
}


@lru_cache(maxsize=None)
def _source_fields(cls: type) -> tuple[str, ...]:
    fields = _child_fields(cls)
    order = _SOURCE_ORDER.get(cls.__name__)
    if order is None:
        return fields
    return tuple(f for f in order if f in fields) + tuple(f for f in fields if f not in order)


@lru_cache(maxsize=None)
def _handlers(visitor_type: type, node_type: type) -> tuple[Callable | None, Callable | None]:
    """The visitor class's own ``visit_<Type>`` / ``leave_<Type>`` (libcst's empty defaults: None)."""
    name = node_type.__name__
    found = []
    for prefix in ("visit_", "leave_"):
        method = getattr(visitor_type, prefix + name, None)
        default = getattr(cst.CSTVisitor, prefix + name, None)
        found.append(None if method is None or method is default else method)
    return found[0], found[1]


def visit_syntax(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only visitor, at a fraction of its cost.

    libcst's visit rebuilds every node and walks whitespace and punctuation; this follows the
    syntax fields only, in source order, and calls the visitor's ``visit_<Type>`` (a False
    return skips the children, as in libcst) and ``leave_<Type>``. Visitors that need
    whitespace, comments or ``visit_<Type>_<field>`` hooks must use libcst's visit.
    """
    visit, leave = _handlers(type(visitor), type(node))
    if visit is None or visit(visitor, node) is not False:
        for field in _source_fields(type(node)):
            value = getattr(node, field)
            t = type(value)
            if t is tuple or t is list:
                for item in value:
                    if _is_node(type(item)):
                        visit_syntax(item, visitor)
            elif _is_node(t):
                visit_syntax(value, visitor)
    if leave is not None:
        leave(visitor, node)
