"""Helpers of the ecosystem family (CN6xx): CUDA checks, CUDA-only packages, attention rewrites."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

from .._shared.args import keyword_arg
from .._shared.names import call_qualname, terminal_name
from .._shared.packages import in_package
from .._shared.strings import string_value

__all__ = [
    "CUDA_ONLY_PACKAGES",
    "compares_to_cuda",
    "cuda_check",
    "cuda_only_module",
    "false_on_neuron",
    "method_on",
    "sdpa_bshd",
    "true_on_neuron",
]


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
    args += [keyword_arg(name, value) for name, value in extra]
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [a.with_changes(comma=sep) for a in args[:-1]] + [args[-1]]
    return method_on(cst.Call(func=func, args=args), "transpose", 1, 2), imports
