"""``dtypes`` on CPython's ``ast``: does a dtype reach the device? The same answers, line for line.

CN801's detector (``Rule.detect``) reads files that no edit can touch without building a libcst
tree; it must say what the libcst rule says, so each function here is ``dtypes``' function of
the same name on ``ast`` nodes, and the tables are ``dtypes``' own (imported, never copied).
What differs is only how the trees spell things: ``ast`` has no ``Arg`` (the walk's ``ArgNode``
stands in, in source order), a string literal is a ``Constant`` (an f-string never is, as
libcst's ``SimpleString`` never is one), ``a or b or c`` is one ``BoolOp`` where libcst nests
two (both are transparent, so the climb ends at the same parent).
"""

from __future__ import annotations

import ast

from cuda2neuron.python import AstWalk, ArgNode, KeywordName

from .dtypes import _CPU_DEVICES, _DTYPE_KEYWORDS, _FACTORIES, _TO_HOST, Use

__all__ = ["DtypeBindings", "dtype_use", "on_host"]


def _transparent(parent: object, child: object) -> bool:
    if isinstance(parent, ast.IfExp):
        return child is parent.body or child is parent.orelse
    return isinstance(parent, ast.BoolOp)


def dtype_use(ctx: AstWalk, node: object, ancestors: list[object] | tuple[object, ...] | None = None) -> tuple[str, str] | None:
    """``dtypes.dtype_use``: (Use.DEVICE, "") when the dtype value ``node`` reaches the device,
    (Use.BINDING, name) when it is bound to a plain name, None otherwise."""
    chain = list(ctx.ancestors if ancestors is None else ancestors)
    child = node
    while chain and _transparent(chain[-1], child):
        child = chain.pop()
    if not chain:
        return None
    parent = chain[-1]
    if isinstance(parent, ast.Assign):
        if child is parent.value and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            return Use.BINDING, parent.targets[0].id
        return None
    if isinstance(parent, ast.AnnAssign):
        if child is parent.value and isinstance(parent.target, ast.Name):
            return Use.BINDING, parent.target.id
        return None
    if not isinstance(parent, ArgNode) or len(chain) < 2 or not isinstance(chain[-2], ast.Call):
        return None
    return (Use.DEVICE, "") if _reaches_device(ctx, chain[-2], parent, chain[:-2]) else None


def _reaches_device(ctx: AstWalk, call: ast.Call, arg: ArgNode, above: list[object]) -> bool:
    keyword = arg.keyword
    func = call.func
    qualified = ctx.call_qualname(call)
    if qualified == "torch.set_default_dtype":
        return True
    if isinstance(func, ast.Attribute) and qualified is None:
        method = func.attr
        if method in ("to", "type"):
            if keyword not in (None, "dtype"):
                return False
        elif keyword not in _DTYPE_KEYWORDS:
            return False
        if _names_cpu(ctx, call) or on_host(ctx, func.value):
            return False
        return True
    if qualified is None or not (qualified == "torch" or qualified.startswith("torch.")):
        if keyword is not None:
            return "dtype" in keyword and not _names_cpu(ctx, call)
        return any(_is_device_value(a.value) for a in ctx.args(call) if a is not arg) and not _names_cpu(ctx, call)
    if keyword not in _DTYPE_KEYWORDS:
        return False
    if qualified in _FACTORIES:
        device = next((a.value for a in ctx.args(call) if a.keyword == "device"), None)
        if device is not None:
            return not _is_cpu(ctx, device)
        return _moved_at_once(ctx, call, above)
    if qualified.startswith("torch.") and qualified.endswith("_like"):
        return not any(on_host(ctx, a.value) for a in ctx.args(call) if a.keyword is None)
    inputs = [a.value for a in ctx.args(call) if a.keyword is None]
    return not inputs or not all(on_host(ctx, v) for v in inputs)


def _is_device_value(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "device" or node.attr.endswith("_device")
    return isinstance(node, ast.Name) and (node.id == "device" or node.id.endswith("_device"))


def string_value(node: ast.expr | None) -> str | None:
    """``strings.string_value``: a plain string literal's value (concatenations included; an
    f-string is a ``JoinedStr``, a bytes literal a bytes ``Constant``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_cpu(ctx: AstWalk, node: ast.expr) -> bool:
    value = string_value(node)
    if value is not None:
        return value.split(":")[0] in _CPU_DEVICES
    if isinstance(node, ast.Call):
        args = ctx.args(node)
        if args:
            inner = string_value(args[0].value)
            return inner is not None and inner.split(":")[0] in _CPU_DEVICES and isinstance(node.func, (ast.Attribute, ast.Name))
    return False


def _names_cpu(ctx: AstWalk, call: ast.Call) -> bool:
    for a in ctx.args(call):
        if a.keyword == "device":
            return _is_cpu(ctx, a.value)
        if a.keyword is None and string_value(a.value) is not None:
            return _is_cpu(ctx, a.value)
    return False


def _moved_at_once(ctx: AstWalk, call: ast.Call, above: list[object]) -> bool:
    if len(above) < 2:
        return False
    attr, outer = above[-1], above[-2]
    if not (isinstance(attr, ast.Attribute) and attr.value is call and isinstance(outer, ast.Call) and outer.func is attr):
        return False
    if attr.attr == "cuda":
        return True
    if attr.attr != "to":
        return False
    args = ctx.args(outer)
    first = args[0].value if args and args[0].keyword is None else None
    device = next((a.value for a in args if a.keyword == "device"), first)
    return device is not None and not _is_cpu(ctx, device)


def on_host(ctx: AstWalk, node: ast.expr) -> bool:
    """``dtypes.on_host``: is the tensor ``node`` provably in host memory?"""
    while True:
        if isinstance(node, ast.Call):
            func = node.func
            qualified = ctx.call_qualname(node)
            if qualified in _FACTORIES:
                device = next((a.value for a in ctx.args(node) if a.keyword == "device"), None)
                return device is None or _is_cpu(ctx, device)
            if isinstance(func, ast.Attribute) and qualified is None:
                if func.attr in _TO_HOST:
                    return True
                if func.attr == "to" and _names_cpu(ctx, node):
                    return True
                node = func.value
                continue
            return False
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "real", "imag", "data"):
            node = node.value
            continue
        if isinstance(node, ast.Subscript):
            node = node.value
            continue
        return False


class DtypeBindings:
    """``dtypes.DtypeBindings``: names bound to a dtype literal in one scope, reported when the
    name reaches the device in that scope."""

    def __init__(self) -> None:
        self._pending: dict[tuple[int, str], list[tuple[object, tuple[object, ...]]]] = {}
        self._used: set[tuple[int, str]] = set()
        self._scopes: list[object] = []  # kept alive: their ids key the table

    def bind(self, ctx: AstWalk, name: str, node: object) -> None:
        scope = ctx.scope
        self._scopes.append(scope)
        self._pending.setdefault((id(scope), name), []).append((node, tuple(ctx.ancestors)))

    def use(self, ctx: AstWalk, node: ast.Name | KeywordName) -> None:
        if not self._pending:
            return
        key = (id(ctx.scope), node.id)
        if key not in self._pending or key in self._used:
            return
        found = dtype_use(ctx, node)
        if found is not None and found[0] == Use.DEVICE:
            self._used.add(key)

    def reached(self) -> list[tuple[object, tuple[object, ...]]]:
        return [entry for key in self._used for entry in self._pending[key]]
