"""Helpers shared by the torch.compile (CN5xx), ecosystem (CN6xx) and numerics (CN8xx) rules.

Kept apart from ``_util.py`` (shared by every family) so this family can change them freely.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from cuda2neuron.core import Rule

from ._util import string_value

__all__ = [
    "add_kwarg",
    "call_qualname",
    "CUDA_ONLY_PACKAGES",
    "PackageImports",
    "compares_to_cuda",
    "cuda_check",
    "cuda_only_module",
    "false_on_neuron",
    "in_package",
    "is_torch_compile",
    "keyword",
    "method_on",
    "module_name",
    "sdpa_bshd",
    "kwarg",
    "remove_arg",
    "reported_at",
    "rename_kwarg",
    "terminal_name",
    "true_on_neuron",
]

_NO_SPACE = cst.SimpleWhitespace("")


def in_package(qualified: str | None, packages: tuple[str, ...]) -> bool:
    """True when ``qualified`` is one of ``packages`` or lives inside one of them."""
    if qualified is None:
        return False
    for p in packages:
        if qualified.startswith(p) and (len(qualified) == len(p) or qualified[len(p)] == "."):
            return True
    return False


class PackageImports:
    """Mix-in for a rule about a CUDA-only package: each import statement of it is handed to
    ``report_import`` once. Set ``packages`` (top-level module names)."""

    packages: tuple[str, ...] = ()

    def visit_Import(self, node: cst.Import) -> None:
        if any(in_package(module_name(alias.name), self.packages) for alias in node.names):
            self.report_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not node.relative and node.module is not None and in_package(module_name(node.module), self.packages):
            self.report_import(node)

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        raise NotImplementedError


def terminal_name(node: cst.BaseExpression) -> str | None:
    """``c`` for ``a.b.c`` or ``c``; the cheap gate rules test before resolving names."""
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    # libcst's default AssignEqual renders `k = v`; keyword arguments are written `k=v`.
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE),
    )


def add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value`` appended, keeping a multi-line call's layout."""
    args = list(call.args)
    new = _kw(name, value)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # A trailing comma (usually a multi-line call): the new argument takes it over and the
        # previous last argument gets the separator its neighbours use.
        new = new.with_changes(comma=last.comma)
        sep = args[-2].comma if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma) else None
        args[-1] = last.with_changes(comma=sep or cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new])


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` without ``arg``; the comma layout of what stays is kept."""
    args = list(call.args)
    index = next(i for i, a in enumerate(args) if a is arg)
    del args[index]
    if args and index == len(args):
        # The removed argument was the last one: its comma (trailing or none) moves up, so
        # `f(a, b=1)` becomes `f(a)` and not `f(a, )`.
        args[-1] = args[-1].with_changes(comma=arg.comma)
    return call.with_changes(args=args)


def rename_kwarg(arg: cst.Arg, name: str) -> cst.Arg:
    return arg.with_changes(keyword=cst.Name(name))


def _is_cuda_literal(node: cst.BaseExpression) -> bool:
    value = string_value(node)
    return value is not None and (value == "cuda" or value.startswith("cuda:"))


def _is_device_type(node: cst.BaseExpression) -> bool:
    # `x.device.type`, `device.type`, `x.type` as an attribute (not the `x.type()` call).
    return isinstance(node, cst.Attribute) and node.attr.value == "type"


def cuda_check(node: cst.BaseExpression) -> bool:
    """True for a test that asks "is this on a CUDA device?" about a tensor or device.

    Recognised: ``x.is_cuda``, ``x.device.type == "cuda"`` (either side, also ``is``),
    ``"cuda" in str(x.device)``, ``str(x.device).startswith("cuda")``. Deliberately NOT
    ``torch.cuda.is_available()``: that asks about the machine, not about the data, and the
    API family rewrites it to the target's own check.
    """
    if isinstance(node, cst.Attribute):
        return node.attr.value == "is_cuda"
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        op = node.comparisons[0].operator
        right = node.comparisons[0].comparator
        if isinstance(op, (cst.Equal, cst.Is)):
            return (_is_device_type(node.left) and _is_cuda_literal(right)) or (
                _is_cuda_literal(node.left) and _is_device_type(right)
            )
        if isinstance(op, cst.In):
            return (
                string_value(node.left) == "cuda"
                and isinstance(right, cst.Call)
                and isinstance(right.func, cst.Name)
                and right.func.value == "str"
            )
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value == "startswith" and node.args:
            return string_value(node.args[0].value) == "cuda" and isinstance(node.func.value, cst.Call)
    return False


def false_on_neuron(node: cst.BaseExpression, rule: Rule) -> bool:
    """True when ``node`` can only be False in a program running on the neuron device.

    A CUDA check is False there (no tensor lives on a CUDA device), so is
    ``torch.cuda.is_available()`` (a Trainium host has no CUDA), and so is an ``and`` with such
    an operand. ``or`` and ``not`` are not followed: their value depends on the rest.
    """
    if cuda_check(node):
        return True
    if isinstance(node, cst.Call) and not node.args and terminal_name(node.func) == "is_available":
        return call_qualname(rule, node) == "torch.cuda.is_available"
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
        return false_on_neuron(node.left, rule) or false_on_neuron(node.right, rule)
    return False


def is_torch_compile(rule: Rule, node: cst.Call) -> bool:
    """``torch.compile(...)`` through any alias (``from torch import compile as tc``)."""
    func = node.func
    # Cheap gate: `x.view(...)`-style method calls are most calls; an alias is a bare name.
    if isinstance(func, cst.Attribute):
        if func.attr.value != "compile":
            return False
    elif not isinstance(func, cst.Name):
        return False
    return call_qualname(rule, node) == "torch.compile"


# Packages whose code only runs on NVIDIA GPUs: a name bound to one of them marks a code path
# that cannot run on Neuron.
CUDA_ONLY_PACKAGES = (
    "triton",
    "flash_attn",
    "flash_attn_2_cuda",
    "xformers",
    "apex",
    "amp_C",
    "bitsandbytes",
    "cupy",
    "pynvml",
    "nvidia_smi",
    "torch.utils.cpp_extension",
    "torch.library.triton_op",
    "torch.library.wrap_triton",
)


def cuda_only_module(module: str) -> bool:
    return in_package(module, CUDA_ONLY_PACKAGES)


_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


def method_on(expr: cst.BaseExpression, method: str, *args: int) -> cst.Call:
    """``expr.method(*args)``, parenthesising ``expr`` when it is not atomic (``(a + b).t()``)."""
    if not isinstance(expr, _ATOMIC) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    call_args = []
    for i, value in enumerate(args):
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT
        call_args.append(cst.Arg(cst.Integer(str(value)), comma=comma))
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name(method)), args=call_args)


def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    return _kw(name, value)


def sdpa_bshd(
    rule: Rule,
    q: cst.BaseExpression,
    k: cst.BaseExpression,
    v: cst.BaseExpression,
    extra: list[tuple[str, cst.BaseExpression]],
) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
    """SDPA on (batch, seq, heads, dim) tensors: transpose in, attend, transpose back."""
    spelled = rule.spell("torch.nn.functional.scaled_dot_product_attention")
    if spelled is None:
        return None
    func, imports = spelled
    args = [cst.Arg(method_on(t, "transpose", 1, 2)) for t in (q, k, v)]
    args += [keyword(name, value) for name, value in extra]
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [a.with_changes(comma=sep) for a in args[:-1]] + [args[-1]]
    return method_on(cst.Call(func=func, args=args), "transpose", 1, 2), imports


def true_on_neuron(node: cst.BaseExpression, rule: Rule) -> bool:
    """True when ``node`` can only be True on the neuron device: ``not <false_on_neuron>``,
    ``x.device.type != "cuda"``, or an ``or`` with such an operand."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return false_on_neuron(node.expression, rule)
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        op = node.comparisons[0].operator
        right = node.comparisons[0].comparator
        if isinstance(op, (cst.NotEqual, cst.IsNot)):
            return (_is_device_type(node.left) and _is_cuda_literal(right)) or (
                _is_cuda_literal(node.left) and _is_device_type(right)
            )
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        return true_on_neuron(node.left, rule) or true_on_neuron(node.right, rule)
    return False



def compares_to_cuda(node: cst.BaseExpression, rule: Rule) -> bool:
    """``<anything> == "cuda"`` (either side; also ``is``) or a CUDA check; also inside ``and``.

    On the neuron target such an expression is False: no tensor, device or device-type string
    of the ported program says "cuda".
    """
    if false_on_neuron(node, rule):
        return True
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        op = node.comparisons[0].operator
        if isinstance(op, (cst.Equal, cst.Is)):
            return _is_cuda_literal(node.left) or _is_cuda_literal(node.comparisons[0].comparator)
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
        return compares_to_cuda(node.left, rule) or compares_to_cuda(node.right, rule)
    return False


def call_qualname(rule: Rule, call: cst.Call) -> str | None:
    """``rule.qualname(call.func)``, computed once per call node for all rules of this family.

    A dozen CN5/6/8 rules look at every call; resolving the callee once and sharing the answer
    keeps the family's cost per call at one resolution. The memo lives on the per-pass context
    (a new context each lint round), keyed by node identity: the tree is alive for the whole
    pass, and a node is only ever visited in one scope, so the answer cannot go stale.
    """
    memo: dict[int, str | None] = rule.context.__dict__.setdefault("_eco_call_qualnames", {})
    key = id(call)
    if key in memo:
        return memo[key]
    # Same answer as ``rule.qualname(call.func)``, but the head name is looked up before any
    # string is built: most callees (``self.fc``, ``x.view``) start with a local and stop there.
    parts: list[str] = []
    node = call.func
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    qualified = None
    if isinstance(node, cst.Name):
        resolved = rule.context.scope.lookup(node.value)
        if resolved is not None:
            qualified = ".".join([resolved, *reversed(parts)])
    memo[key] = qualified
    return qualified


def module_name(node: cst.BaseExpression) -> str:
    """``a.b.c`` of an import's module or alias name, without generating code."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
    return ".".join(reversed(parts))


def reported_at(rule: Rule, ancestors: Sequence[cst.CSTNode]) -> None:
    """Give the report just made the ancestor chain of its node (root first).

    ``Rule.report`` records the ancestors of the node being *visited*; the engine rebuilds the
    tree along that chain and orders overlapping fixes by it. A rule that reports another node
    (a child of the visited node, or a node remembered until ``leave_Module``) must say where
    that node sits, or its fix is applied in the wrong place or not at all.
    """
    rule.reports[-1].ancestors = tuple(ancestors)

