"""The fallback a file runs where an optional fast library is missing, and its numerics.

``if HAVE_APEX: return FusedRMSNorm(dim)`` / ``return RMSNorm(dim)``: on Trainium apex never
imports, so the original ran the file's own ``RMSNorm`` there — with its ``eps`` (often 1e-6,
where apex's default is 1e-5), its dtype handling and its weight. A replacement of the fast
class must keep what that fallback computes, or be unsafe. The fallback is the call on the other
side of a test that reads a name the ``try: import <library>`` block binds (``HAVE_APEX``,
``FusedRMSNorm is not None``): the other branch, or the statements after a branch that returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2neuron.python import visit_syntax

from .._shared.args import arg_by_name, positional_args

__all__ = ["Fallback", "Norm", "fallback_norm"]


@dataclass(frozen=True)
class Norm:
    """What a normalization layer computes with: ``eps`` as code (None: unknown), whether it
    has a learned weight (None: unknown), whether it computes in float32 (None: unknown)."""

    eps: str | None
    affine: bool | None
    upcasts: bool | None


@dataclass(frozen=True)
class Fallback:
    name: str  # as the file calls it
    norm: Norm


class _Bound(cst.CSTVisitor):
    """Names a ``try`` block binds (assignments and imports), in its body and its handlers."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.imports_package: set[str] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Name):
            self.names.add(node.target.value)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        bound = node.asname.name if node.asname is not None else node.name
        while isinstance(bound, cst.Attribute):
            bound = bound.value
        if isinstance(bound, cst.Name):
            self.names.add(bound.value)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = node.module
        while isinstance(module, cst.Attribute):
            module = module.value
        if isinstance(module, cst.Name) and not node.relative:
            self.imports_package.add(module.value)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            head = alias.name
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name):
                self.imports_package.add(head.value)


def _guard_names(module: cst.Module, package: str) -> frozenset[str]:
    """Names bound by the module-level ``try`` blocks that import ``package``."""
    found: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.Try):
            bound = _Bound()
            visit_syntax(stmt, bound)
            if package in bound.imports_package:
                found |= bound.names
    return frozenset(found)


def _rebound_in_handler(module: cst.Module, package: str, name: str) -> cst.ClassDef | str | bool | None:
    """What an ``except`` of a module-level ``try`` importing ``package`` binds ``name`` to: a
    class defined there, the name of the class assigned (``RMSNorm = LlamaRMSNorm``), True for
    anything else that is not None (an import from elsewhere), None where it is not rebound."""
    for stmt in module.body:
        if not isinstance(stmt, cst.Try):
            continue
        bound = _Bound()
        visit_syntax(stmt.body, bound)
        if package not in bound.imports_package or name not in bound.names:
            continue
        for handler in stmt.handlers:
            for inner in handler.body.body:
                if isinstance(inner, cst.ClassDef) and inner.name.value == name:
                    return inner
                if isinstance(inner, cst.SimpleStatementLine):
                    for small in inner.body:
                        if isinstance(small, cst.Assign) and any(
                            isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
                        ):
                            value = small.value
                            if isinstance(value, cst.Name):
                                return None if value.value == "None" else value.value
                            return True
                        if isinstance(small, (cst.Import, cst.ImportFrom)):
                            rebinding = _Bound()
                            visit_syntax(small, rebinding)
                            if name in rebinding.names:
                                return True
    return None


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names_in(node: cst.CSTNode) -> set[str]:
    collector = _Names()
    visit_syntax(node, collector)
    return collector.names


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)


def _calls_in(nodes: list[cst.CSTNode]) -> list[cst.Call]:
    collector = _Calls()
    for node in nodes:
        visit_syntax(node, collector)
    return collector.calls


def _leaves(block: cst.BaseSuite) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False


def _other_side(ancestors: list[cst.CSTNode], guards: frozenset[str]) -> list[cst.CSTNode] | None:
    """The code a guard on ``guards`` runs instead of the branch the call is in."""
    for i in range(len(ancestors) - 1, 0, -1):
        node, child = ancestors[i - 1], ancestors[i]
        if isinstance(node, cst.IfExp) and node.test is not child:
            if _names_in(node.test) & guards:
                return [node.orelse if child is node.body else node.body]
        elif isinstance(node, cst.If) and node.test is not child:
            if not _names_in(node.test) & guards:
                continue
            if child is node.orelse:
                return [node.body]
            if node.orelse is not None:
                return [node.orelse]
            if _leaves(node.body) and i >= 2:
                block = ancestors[i - 2]
                stmts = list(getattr(block, "body", ()))
                if node in stmts:
                    return stmts[stmts.index(node) + 1 :]
            return None
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return None
    return None


def _class_norm(cls: cst.ClassDef, call: cst.Call) -> Norm:
    init = next(
        (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None
    )
    eps: str | None = None
    code = cst.Module([]).code_for_node
    given = arg_by_name(call, "eps")
    if init is not None:
        params = [p for p in (*init.params.posonly_params, *init.params.params)][1:]  # without self
        names = [p.name.value for p in params]
        if "eps" in names and given is None:
            index = names.index("eps")
            positional = positional_args(call)
            if index < len(positional):
                given = positional[index]
            elif params[index].default is not None:
                eps = code(params[index].default)
        kw = next((p for p in init.params.kwonly_params if p.name.value == "eps"), None)
        if kw is not None and given is None and kw.default is not None:
            eps = code(kw.default)
    if given is not None:
        eps = code(given.value)
    text = code(cls)
    affine = "Parameter(" in text if init is not None else None
    upcasts = any(word in text for word in (".float()", "float32", "torch.float)", "dtype=torch.float"))
    return Norm(eps, affine, upcasts)


# torch's own norms as a fallback, and the eps they default to (RMSNorm's: the dtype's machine
# epsilon, which no literal spells: None, unknown here).
_TORCH_NORMS = {"torch.nn.LayerNorm": "1e-5", "torch.nn.RMSNorm": None}


def fallback_norm(
    module: cst.Module, package: str, call: cst.Call, ancestors: list[cst.CSTNode], qualname
) -> Fallback | None | bool:
    """The fallback of ``call`` (a fast library's norm under a guard on ``package``'s import):
    a ``Fallback`` where it is a class of this file; True where a fallback is visible but its
    numerics are not (a class imported from elsewhere); None where no fallback is visible."""
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    if isinstance(call.func, cst.Name):
        # ``try: from apex... import FusedRMSNorm as RMSNorm`` / ``except ImportError:
        # class RMSNorm(...)``: the call itself names the fallback where apex is missing.
        rebound = _rebound_in_handler(module, package, call.func.value)
        if isinstance(rebound, cst.ClassDef):
            return Fallback(call.func.value, _class_norm(rebound, call))
        if isinstance(rebound, str) and rebound in classes:
            return Fallback(rebound, _class_norm(classes[rebound], call))
        if rebound is True:
            return True
    guards = _guard_names(module, package)
    if not guards:
        return None
    other = _other_side([*ancestors, call], guards)
    if not other:
        return None
    for candidate in _calls_in(other):
        func = candidate.func
        name = func.value if isinstance(func, cst.Name) else None
        if name in classes:
            return Fallback(name, _class_norm(classes[name], candidate))
        torch_class = qualname(func)
        if torch_class in _TORCH_NORMS:
            torch_default = _TORCH_NORMS[torch_class]
            given = arg_by_name(candidate, "eps", position=1)
            affine = arg_by_name(candidate, "elementwise_affine", position=2)
            eps = cst.Module([]).code_for_node(given.value) if given is not None else torch_default
            flag = affine.value if affine is not None else cst.Name("True")
            literal = flag.value == "True" if isinstance(flag, cst.Name) and flag.value in ("True", "False") else None
            # torch's norms compute half inputs in float32 (checked against a float32 reference).
            return Fallback(name or torch_class, Norm(eps, literal, True))
        last = func.attr.value if isinstance(func, cst.Attribute) else name
        if last is not None and last[:1].isupper() and "Norm" in last:
            return True  # a norm class of another module: its numerics are not read here
    return None
