"""Following a literal up the tree, through nodes that only pass its value on, to its user."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

__all__ = ["argument_of", "is_output_call", "value_user"]


def _is_string_template(node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.SimpleString, cst.FormattedString))


def _is_collection(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.IfExp):
        return _is_collection(node.body) or _is_collection(node.orelse)
    return isinstance(node, (cst.List, cst.Tuple, cst.BinaryOperation)) and (
        not isinstance(node, cst.BinaryOperation) or isinstance(node.operator, cst.Add) and _is_collection(node.left)
    )


def value_user(
    ancestors: Sequence[cst.CSTNode], node: cst.CSTNode, *, templates: bool = False
) -> tuple[int, cst.CSTNode] | None:
    """``(i, child)``: ``ancestors[i]`` is the first node above ``node`` that *uses* its value,
    and ``child`` is the node below it on the way up (``node`` or what carried its value).

    Passed through: ``a if c else b`` (not its test), ``a or b`` / ``a and b``, the elements
    of tuples, lists and sets, and concatenations of lists or tuples (``["cpu"] + ["cuda"]``);
    with ``templates``, also string formatting that keeps the literal's shape (``"cuda:%d" % i``,
    ``"cuda:{}".format(i)``, ``"cuda:" + str(i)``). None when the value is a
    conditional's test (it selects, it is not passed on) or nothing above uses it. Every step is
    O(1), so rules can afford the walk on every literal that already looks right.
    """
    child: cst.CSTNode = node
    i = len(ancestors) - 1
    while i >= 0:
        anc = ancestors[i]
        if isinstance(anc, cst.IfExp):
            if child is anc.test:
                return None
            child, i = anc, i - 1
            continue
        if isinstance(anc, cst.BooleanOperation):
            child, i = anc, i - 1
            continue
        if isinstance(anc, cst.Element) and i >= 1 and isinstance(ancestors[i - 1], (cst.Tuple, cst.List, cst.Set)):
            child, i = ancestors[i - 1], i - 2
            continue
        # ["cpu"] + (["cuda"] if ok else []): a concatenation of collections holds their elements
        # (joining a string is the templates case below).
        if isinstance(anc, cst.BinaryOperation) and isinstance(anc.operator, cst.Add) and _is_collection(child):
            child, i = anc, i - 1
            continue
        if templates and (
            isinstance(anc, cst.BinaryOperation)
            and child is anc.left
            and isinstance(anc.operator, cst.Modulo)
            and _is_string_template(child)
        ):
            child, i = anc, i - 1
            continue
        # "cuda:" + str(i): a prefix joined to the index at run time keeps the prefix's meaning.
        if templates and (
            isinstance(anc, cst.BinaryOperation)
            and child is anc.left
            and isinstance(anc.operator, cst.Add)
            and isinstance(child, cst.SimpleString)
        ):
            child, i = anc, i - 1
            continue
        if templates and (
            isinstance(anc, cst.Attribute)
            and anc.attr.value == "format"
            and child is anc.value
            and i >= 1
            and isinstance(ancestors[i - 1], cst.Call)
            and _is_string_template(child)
        ):
            child, i = ancestors[i - 1], i - 2
            continue
        return i, child
    return None


def argument_of(
    ancestors: Sequence[cst.CSTNode], node: cst.CSTNode
) -> tuple[int, cst.Arg, cst.Call] | None:
    """``(i, arg, call)`` when ``node``'s value is passed as an argument (``value_user``'s
    shapes carried): ``ancestors[i]`` is the ``arg`` of ``call``; None when its value goes
    anywhere else."""
    found = value_user(ancestors, node)
    if found is None:
        return None
    i, _ = found
    arg, call = ancestors[i], ancestors[i - 1] if i >= 1 else None
    if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call)):
        return None
    return i, arg, call


# Calls that print or log their arguments (`print(x)`, `logger.info("%s", x)`, `sys.stdout.write`):
# a value passed to one is text for a person, not something the program acts on.
_OUTPUT_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "write"})


def is_output_call(func: cst.BaseExpression) -> bool:
    """Is ``func`` (a call's callee) ``print`` or a logging/writing method?"""
    if isinstance(func, cst.Name):
        return func.value == "print"
    return isinstance(func, cst.Attribute) and func.attr.value in _OUTPUT_METHODS
