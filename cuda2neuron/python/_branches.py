"""The code a device test selects: what must stay CUDA while the test stays CUDA.

Asked by the rules (through ``rules/_shared/selected.py``) for the branch a test they report
decides, and by the engine's program pass (``_flows.py``) for the branch a value's reader decides.

``if device_type == "cuda": is_avail = torch.cuda.is_available()``: when the test is reported
without an applied fix (its fix is unsafe, or it guards a kernel), moving the call in its branch
would leave a CUDA test in front of Neuron code, and moving a call in the rest of the test
(``x.device.type == "cuda" and torch.is_autocast_enabled()``) a test no device passes. A rule
hands ``selected_code`` to ``Rule.report(depends=...)``; the engine then applies fixes under those
nodes only together with the test's own (python/_lint.py).
"""

from __future__ import annotations

import libcst as cst

from ._device_truth import truth

__all__ = ["after_exit", "opened_code", "selected_code"]

def _deciding(
    ancestors: tuple[cst.CSTNode, ...] | list[cst.CSTNode], node: cst.CSTNode
) -> tuple[int, bool, bool] | None:
    """The ``if``/``while``/conditional expression whose test ``node`` is part of: (its index in
    ``ancestors``, whether the test is true on Trainium — its CUDA side is the other branch —,
    whether the device model cannot say, so that the test may be true without CUDA — ``cuda or
    cpu_ok``, ``not cuda and x``); None where a statement ends the walk first, or ``node`` sits in
    a branch rather than the test. The polarity is the device model's (``truth``), asked about
    ``node``: ``!=``, ``not in``, ``is False``, ``device_count() == 0`` and ``not`` negate, and an
    ``or`` with a CUDA-only package flag (``HAVE_TRITON or x.is_cuda``) still says CUDA."""
    child: cst.CSTNode = node
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, (cst.If, cst.While, cst.IfExp)):
            if child is not anc.test:
                return None
            on_trainium = truth(anc.test, about=(*ancestors[i + 1 :], node)).trainium
            return i, on_trainium is True, on_trainium is None
        if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda, cst.FunctionDef)):
            return None
        child = anc
    return None


def selected_code(ancestors: tuple[cst.CSTNode, ...] | list[cst.CSTNode], node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The test expression of the ``if``/``while``/conditional expression that ``node`` (a device
    test, or a part of one) decides, and the branch taken when the device is CUDA; () when the
    node decides no branch. ``not``, ``!=`` and ``not in`` pick the ``else`` branch, and where
    there is none and the branch leaves (``if not torch.cuda.is_available(): return``), the
    statements after the ``if``; through an ``or`` (``cuda or cpu_ok``) no branch implies CUDA,
    and only the test is returned."""
    found = _deciding(ancestors, node)
    if found is None:
        return _short_circuited(ancestors, node)
    i, negated, through_or = found
    anc = ancestors[i]
    if through_or:
        return (anc.test,)
    if not negated:
        return (anc.test, anc.body)
    orelse = anc.orelse
    if orelse is None and isinstance(anc, cst.If) and i > 0 and _leaves(anc.body):
        # `if not torch.cuda.is_available(): return` — what follows runs on CUDA only.
        return (anc.test, *after_exit(ancestors, i))
    return (anc.test, orelse) if orelse is not None else (anc.test,)


def _short_circuited(ancestors: tuple[cst.CSTNode, ...] | list[cst.CSTNode], node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The operands a device test lets run when it says CUDA, outside any branch's test:
    ``return device.type == "cuda" and torch.cuda.get_device_properties(device).major >= 9``
    evaluates the right side on a GPU only; asked about Neuron, the test would run it on the
    target, where ``.major`` does not exist (Megatron-LM's NVLS check). ``not cuda or x``
    likewise. () where the test is not the left operand of such an ``and`` / ``or``."""
    child: cst.CSTNode = node
    rest: list[cst.CSTNode] = []
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, cst.BooleanOperation) and child is anc.left:
            # `cuda and b` runs b where the left side is true, `not cuda or b` where it is false:
            # on the CUDA side only when the device model says the left side is not on Trainium.
            on_trainium = truth(child, about=(*ancestors[i + 1 :], node)).trainium
            if on_trainium is not isinstance(anc.operator, cst.Or):
                break
            rest.append(anc.right)  # `(cuda and a) and b`: both run only on CUDA
        elif isinstance(anc, cst.UnaryOperation) and isinstance(anc.operator, cst.Not):
            pass  # `not (cuda and a) or b`: the model reads the negation
        elif isinstance(anc, (cst.Comparison, cst.ComparisonTarget)) and not rest:
            pass  # `device.type == "cuda"` reported at its string
        elif isinstance(anc, cst.Call) and child is anc.func and not rest:
            pass  # `torch.cuda.is_available()` reported at the function it calls
        else:
            break
        child = anc
    return tuple(rest)


def _leaves(block: cst.BaseSuite) -> bool:
    """Does the branch end by leaving (``return``, ``raise``, ``continue``, ``break``)?"""
    if isinstance(block, cst.SimpleStatementSuite):
        small = block.body
    else:
        last = block.body[-1] if block.body else None
        small = last.body if isinstance(last, cst.SimpleStatementLine) else ()
    return bool(small) and isinstance(small[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))


def after_exit(ancestors: tuple[cst.CSTNode, ...] | list[cst.CSTNode], i: int) -> tuple[cst.CSTNode, ...]:
    """What runs only once the early exit at ``ancestors[i]`` was not taken: the statements after
    it in its block and, where that block is the body of a ``try`` or a ``with``, those after that
    statement in turn (``try: if torch.cuda.device_count() == 0: return`` ... ``except``, then the
    CUDA code below the ``try``)."""
    found: list[cst.CSTNode] = []
    while i >= 2:
        block, statement = ancestors[i - 1], ancestors[i]
        found += _after(block, statement)
        owner = ancestors[i - 2]
        if not (isinstance(owner, (cst.Try, cst.With)) and owner.body is block):
            break
        i -= 2
    if i == 1:
        found += _after(ancestors[0], ancestors[1])
    return tuple(found)


def _after(block: cst.CSTNode, statement: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The statements that follow ``statement`` in ``block``."""
    body = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else ()
    for k, stmt in enumerate(body):
        if stmt is statement:
            return tuple(body[k + 1 :])
    return ()


def opened_code(ancestors: tuple[cst.CSTNode, ...] | list[cst.CSTNode], node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The branch a device test lets run when it says CUDA where ``selected_code`` cannot claim
    it: the test is one of several conditions (``torch.cuda.is_available() or has_xpu``). Asked
    about Neuron, the test opens that branch on the target, so the branch's CUDA-only code holds
    the test back (``Report.needs``); the branch runs either way, so its own fixes do not wait.
    () where ``selected_code`` already returns the branch, or no branch is decided."""
    found = _deciding(ancestors, node)
    if found is None or not found[2]:
        return ()
    anc = ancestors[found[0]]
    if not found[1]:
        return (anc.body,)
    orelse = anc.orelse
    return (orelse,) if orelse is not None else ()
