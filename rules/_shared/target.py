"""How each target spells a device, so one rule serves both targets (no copy of the catalog).

* ``neuron``: literal strings, ``"neuron"`` / ``"neuron:1"`` / ``f"neuron:{rank}"``.
* ``accelerator``: code that runs on CUDA and Trainium alike, built on
  ``torch.accelerator.current_accelerator()`` (torch >= 2.6). It must also run where there is
  no accelerator at all (a CPU-only CI): there the default device (the CPU) stands in for the
  accelerator in device expressions, and calls that need a real accelerator (``synchronize``,
  memory statistics) are guarded by ``torch.accelerator.is_available()`` (``guarded_call``).
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

__all__ = [
    "ACCELERATOR_SINCE",
    "NEURON",
    "Imports",
    "introduced_in",
    "needs_newer_torch",
    "spell_for_target",
    "checked_for_accelerator",
    "checkpoint_device",
    "compared_type_expr",
    "device_expr",
    "device_type_expr",
    "guarded_call",
]

NEURON = "neuron"
Imports = tuple[tuple[str, str | None], ...]


# The first torch release with each name the accelerator target writes (PyTorch docs of each
# release; neuron-target-api.md). Longest prefix wins. Every name a rule builds for
# ``--target accelerator`` goes through ``spell_for_target``, which refuses names newer than the
# run's ``--min-torch``: the port must run on every torch the project supports.
ACCELERATOR_SINCE: dict[str, tuple[int, int]] = {
    "torch.accelerator": (2, 6),
    "torch.accelerator.current_device_index": (2, 7),
    "torch.accelerator.set_device_index": (2, 7),
    "torch.accelerator.device_index": (2, 8),
    "torch.accelerator.memory": (2, 9),
    "torch.get_default_device": (2, 3),
    "torch.set_default_device": (2, 0),
    "torch.Stream": (2, 6),
    "torch.Event": (2, 6),
    "torch.distributed.get_default_backend_for_device": (2, 5),
}


def introduced_in(qualified: str) -> tuple[int, int] | None:
    """The torch release that introduced ``qualified`` (None: not version-gated here)."""
    best: tuple[str, tuple[int, int]] | None = None
    for prefix, version in ACCELERATOR_SINCE.items():
        if (qualified == prefix or qualified.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, version)
    return best[1] if best else None


def spell_for_target(rule: Rule, qualified: str) -> tuple[cst.BaseExpression, Imports] | None:
    """``rule.spell(qualified)``, or None when the name is newer than the run's min-torch."""
    version = introduced_in(qualified)
    if version is not None and version > rule.context.settings.min_torch:
        return None
    return rule.spell(qualified)


def needs_newer_torch(rule: Rule) -> str | None:
    """Why the accelerator target cannot write device-agnostic code under this min-torch, or
    None when it can (and always on the neuron target): the guidance of a report-only finding."""
    settings = rule.context.settings
    if settings.target == NEURON or settings.min_torch >= ACCELERATOR_SINCE["torch.accelerator"]:
        return None
    have = ".".join(map(str, settings.min_torch))
    return (
        f"torch.accelerator needs torch >= 2.6 (min-torch is {have}): raise min-torch to 2.6 to get "
        "device-agnostic code, or keep a device-specific branch here (e.g. choose the device "
        "string from a setting)."
    )


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
    acc = spell_for_target(rule, "torch.accelerator.current_accelerator")
    dev = spell_for_target(rule, "torch.get_default_device")
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


def compared_type_expr(rule: Rule, quote: str = '"') -> tuple[cst.BaseExpression, Imports] | None:
    """The device type a comparison tests for (``x.device.type == <this>``).

    On the accelerator target the CPU must not pass for the accelerator: code under
    ``if x.device.type == "cuda":`` (``pin_memory()``, ``torch.cuda.*`` calls) fails on a machine
    without one. So where there is none this is a string no device type equals, nor is part of
    a device string (``in`` tests); ``quote`` is the quote its literals take (the other one
    inside an f-string, for Python < 3.12).
    """
    if rule.context.settings.target == NEURON:
        return cst.SimpleString(f"{quote}neuron{quote}"), ()
    spelled = spell_for_target(rule, "torch.accelerator.current_accelerator")
    if spelled is None:
        return None
    func, imports = spelled
    expr = cst.Call(
        func=cst.Name("getattr"),
        args=[
            cst.Arg(cst.Call(func=func)),
            cst.Arg(cst.SimpleString(f"{quote}type{quote}")),
            cst.Arg(cst.SimpleString(f"{quote}no accelerator{quote}")),
        ],
    )
    return expr, imports


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


def checkpoint_device(rule: Rule, built: tuple[cst.BaseExpression, Imports]) -> tuple[cst.BaseExpression, Imports]:
    """A ``map_location`` device with an index (``"cuda:0"`` ported by ``device_expr``).

    torch.load restores storages only to devices it knows by name: "cpu:0" is refused. On the
    accelerator target, where there is no accelerator the port maps to "cpu" instead.
    """
    if rule.context.settings.target == NEURON:
        return built
    expr, imports = built
    spelled = spell_for_target(rule, "torch.accelerator.is_available")
    if spelled is None:
        return built
    check, more = spelled
    guarded = cst.IfExp(test=cst.Call(func=check), body=expr, orelse=cst.SimpleString('"cpu"'))
    return guarded, tuple(dict.fromkeys(imports + more))


# -- calls that need an accelerator -----------------------------------------------------------

_AVAILABILITY_CHECKS = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
# Where a conditional expression reads as the whole value: no parentheses needed around it.
_BARE_VALUE_PARENTS = (cst.Expr, cst.Assign, cst.AnnAssign, cst.Arg, cst.Return, cst.FormattedStringExpression)


def _tests_availability(rule: Rule, test: cst.CSTNode) -> bool:
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and rule.qualname(node.func) in _AVAILABILITY_CHECKS:
            return True
        stack.extend(node.children)
    return False


def checked_for_accelerator(rule: Rule, node: cst.CSTNode) -> bool:
    """True if ``node`` only runs once ``is_available()`` said yes: it sits in the true branch of
    an ``if`` / conditional expression, or right of an ``and``, whose test asks."""
    chain = [*rule.context.ancestors, node]
    for outer, inner in zip(chain, chain[1:]):
        if isinstance(outer, (cst.If, cst.IfExp, cst.While)) and inner is outer.body:
            if _tests_availability(rule, outer.test):
                return True
        elif isinstance(outer, cst.BooleanOperation) and isinstance(outer.operator, cst.And) and inner is outer.right:
            if _tests_availability(rule, outer.left):
                return True
    return False


def guarded_call(
    rule: Rule, call: cst.Call, moved: cst.Call, no_device: str
) -> tuple[cst.CSTNode, cst.CSTNode, tuple[cst.CSTNode, ...], Imports] | None:
    """``--target accelerator``: make ``moved`` (the port of ``call``) safe where no accelerator
    exists, since torch.accelerator.* raises there and the port must run on a CPU-only machine.

    ``no_device`` is what the call stands for without an accelerator: "skip" guards a call
    statement with ``if torch.accelerator.is_available():``; otherwise the call becomes
    ``(moved if torch.accelerator.is_available() else <no_device>)`` ("skip" -> None).
    Returns (node to replace, replacement, that node's ancestors, imports); None when the call
    is already behind an availability check or ``torch`` is shadowed.
    """
    if checked_for_accelerator(rule, call):
        return None
    spelled = spell_for_target(rule, "torch.accelerator.is_available")
    if spelled is None:
        return None
    check, imports = spelled
    test = cst.Call(func=check)
    ancestors = rule.context.chain_above(call)
    parent = ancestors[-1] if ancestors else None
    if no_device == "skip" and isinstance(parent, cst.Expr) and len(ancestors) >= 3:
        line, block = ancestors[-2], ancestors[-3]
        own_line = isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
        if own_line and isinstance(block, (cst.IndentedBlock, cst.Module)):
            inner = line.with_changes(leading_lines=[], body=[parent.with_changes(value=moved)])
            guard = cst.If(test=test, body=cst.IndentedBlock(body=[inner]), leading_lines=line.leading_lines)
            return line, guard, ancestors[:-2], imports
    bare = isinstance(parent, _BARE_VALUE_PARENTS)
    fallback = cst.parse_expression("None" if no_device == "skip" else no_device)
    expr = cst.IfExp(
        test=test,
        body=moved,
        orelse=fallback,
        lpar=[] if bare else [cst.LeftParen()],
        rpar=[] if bare else [cst.RightParen()],
    )
    return call, expr, ancestors, imports
