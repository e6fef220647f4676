"""``foreign.foreign_test`` on CPython's ``ast``: does a test hold only on another accelerator?

The same verdicts, read from the same leaves, for CN112's detector. Where ``ast`` and libcst
shape a test differently the reading follows libcst's: a chain ``a and b and c`` is one
``BoolOp`` in ``ast`` and nested pairs in libcst (folded from the left here); a call's arguments
are libcst's ``Arg`` list (``AstWalk.args``: keywords and stars included); a device word is
read only from one string literal (``"m" "ps"`` is a concatenation to libcst: no word).
"""

from __future__ import annotations

import ast

from .ast_names import ast_dotted, one_literal
from .foreign import _DEVICES, _PROBE_NAME, _STRING_METHODS, calls_foreign_probe

__all__ = ["foreign_test_ast"]


def _device_word(ctx, node: object) -> str | None:  # noqa: ANN001 - python.AstWalk
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    word = node.value.split(":", 1)[0].strip().lower()
    if word in _DEVICES and not one_literal(ctx.file, node):
        return None
    return word


def _all_foreign(ctx, node: object) -> bool:  # noqa: ANN001
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        words = [_device_word(ctx, e) for e in node.elts]
        return bool(words) and all(w in _DEVICES for w in words)
    if isinstance(node, ast.Call) and ast_dotted(node.func) in ("torch.device", "device"):
        args = ctx.args(node)
        return bool(args) and _device_word(ctx, args[0].value) in _DEVICES
    return _device_word(ctx, node) in _DEVICES


def _qualified(ctx, node: object) -> str | None:  # noqa: ANN001
    return ctx.qualname(node) or ast_dotted(node)


_NEGATING = (ast.NotEq, ast.NotIn, ast.IsNot)


def foreign_test_ast(ctx, node: object) -> bool | None:  # noqa: ANN001 - python.AstWalk
    """``foreign.foreign_test`` of ``node`` (``_foreign_atom``, case by case)."""
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1:
            return None
        op = node.ops[0]
        right = node.comparators[0]
        negating = isinstance(op, _NEGATING)
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
            inner = foreign_test_ast(ctx, node.left)
            return None if inner is None else (inner if negating else not inner)
        if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) and (
            _all_foreign(ctx, right) or (isinstance(op, (ast.Eq, ast.NotEq)) and _all_foreign(ctx, node.left))
        ):
            return not negating
        if isinstance(op, (ast.In, ast.NotIn)) and _device_word(ctx, node.left) in _DEVICES:
            if not isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                return not negating
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = foreign_test_ast(ctx, node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.Call):
        func = node.func
        args = ctx.args(node)
        if isinstance(func, ast.Name) and func.id == "hasattr" and len(args) == 2:
            owner = _qualified(ctx, args[0].value)
            attr = _device_word(ctx, args[1].value)
            return True if owner in ("torch", "torch.backends") and attr in _DEVICES else None
        if isinstance(func, ast.Attribute) and func.attr in _STRING_METHODS and args:
            return True if _device_word(ctx, args[0].value) in _DEVICES else None
        name = _qualified(ctx, func)
        return True if name is not None and calls_foreign_probe(name) else None
    if isinstance(node, (ast.Attribute, ast.Name)):
        name = _qualified(ctx, node)
        if name == "torch.version.hip":
            return True
        if name is not None and _PROBE_NAME.fullmatch(name.rsplit(".", 1)[-1]):
            return True
        return None
    if isinstance(node, ast.BoolOp):
        # libcst nests ``a and b and c`` as ``(a and b) and c``: the verdicts fold from the left.
        verdict = foreign_test_ast(ctx, node.values[0])
        for value in node.values[1:]:
            right = foreign_test_ast(ctx, value)
            if isinstance(node.op, ast.And):
                verdict = True if True in (verdict, right) else None
            elif verdict is True and right is True:
                verdict = True
            elif verdict is False and right is False:
                verdict = False
            else:
                verdict = None
        return verdict
    return None
