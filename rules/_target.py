"""How each target spells a device, so one rule serves both targets (no copy of the catalog).

* ``neuron``: literal strings, ``"neuron"`` / ``"neuron:1"`` / ``f"neuron:{rank}"``.
* ``accelerator``: code that runs on CUDA and Trainium alike, built on
  ``torch.accelerator.current_accelerator()`` (torch >= 2.6).
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.engine import Rule

__all__ = ["Imports", "device_expr", "device_type_expr", "NEURON"]

NEURON = "neuron"
Imports = tuple[tuple[str, str | None], ...]


def _int_literal(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _accelerator_or_cpu(rule: Rule, parenthesized: bool) -> tuple[cst.BooleanOperation, Imports] | None:
    """``torch.accelerator.current_accelerator() or torch.get_default_device()``.

    ``current_accelerator()`` is None on a machine without an accelerator; the port must still
    run there (a CPU-only CI, a laptop), so the fallback is spelled out. The fallback has no
    string literal so that it can sit inside an f-string of either quote style (Python < 3.12).
    """
    acc = rule.spell("torch.accelerator.current_accelerator")
    dev = rule.spell("torch.get_default_device")
    if acc is None or dev is None:
        return None
    (acc_func, imports), (dev_func, more) = acc, dev
    expr = cst.BooleanOperation(
        left=cst.Call(func=acc_func),
        operator=cst.Or(),
        right=cst.Call(func=dev_func),
        lpar=[cst.LeftParen()] if parenthesized else [],
        rpar=[cst.RightParen()] if parenthesized else [],
    )
    return expr, tuple(dict.fromkeys(imports + more))


def device_type_expr(rule: Rule) -> tuple[cst.BaseExpression, Imports] | None:
    """An expression for the device *type* string ("neuron", or the accelerator's type)."""
    if rule.context.settings.target == NEURON:
        return cst.SimpleString('"neuron"'), ()
    built = _accelerator_or_cpu(rule, parenthesized=True)
    if built is None:
        return None
    expr, imports = built
    return cst.Attribute(value=expr, attr=cst.Name("type")), imports


def device_expr(
    rule: Rule, index: cst.BaseExpression | None = None, quote_like: cst.BaseExpression | None = None
) -> tuple[cst.BaseExpression, Imports] | None:
    """An expression naming the target device, optionally with an index; None if impossible."""
    if rule.context.settings.target == NEURON:
        q = "'" if isinstance(quote_like, cst.SimpleString) and quote_like.value.lstrip("rRuU").startswith("'") else '"'
        if index is None:
            return cst.SimpleString(f"{q}neuron{q}"), ()
        literal = _int_literal(index)
        if literal is not None:
            return cst.SimpleString(f"{q}neuron:{literal}{q}"), ()
        code = rule.context.code(index)
        if "{" in code or "}" in code or q in code or "\\" in code or "\n" in code:
            # Not expressible inside an f-string on Python < 3.12: use torch.device("neuron", i).
            spelled = rule.spell("torch.device")
            if spelled is None:
                return None
            func, imports = spelled
            return (
                cst.Call(func=func, args=[cst.Arg(cst.SimpleString('"neuron"')), cst.Arg(index)]),
                imports,
            )
        return cst.parse_expression(f"f{q}neuron:{{{code}}}{q}"), ()
    # accelerator target
    if index is None:
        return _accelerator_or_cpu(rule, parenthesized=False)
    kind = device_type_expr(rule)
    dev = rule.spell("torch.device")
    if kind is None or dev is None:
        return None
    (kind_expr, imports), (dev_func, more) = kind, dev
    return (
        cst.Call(func=dev_func, args=[cst.Arg(kind_expr), cst.Arg(index)]),
        tuple(dict.fromkeys(imports + more)),
    )
