"""Device facts of both worlds: is a condition true on the original's CUDA host, and on Trainium?

The port's invariant (issue 38) is stated in these two answers: a branch that ran on the GPU
runs on Trainium after the port, and one that did not does not. ``truth(test)`` evaluates a
condition twice, three-valued (True / False / None for unknown), from what each machine is:

* the **CUDA host** the original was written for: ``torch.cuda.is_available()`` is True, a CUDA-only
  package's flag (``HAVE_TRITON``, ``HAS_APEX``) is True, a neuron device does not exist;
* **Trainium**: CUDA is not there (``is_available()`` False, no tensor ``is_cuda``, Triton and
  the other CUDA-only packages missing), ``torch.neuron.is_available()`` is True.

Atoms: ``is_available()`` / ``device_count()`` of ``torch.cuda`` and ``torch.neuron`` (the count
compared with a number: ``device_count() > 0`` is ``is_available()``, ``== 0`` its negation,
``> 1`` a multi-GPU host), ``.is_cuda`` / ``.is_neuron``, ``x.device.type == "cuda"``, a device
string compared with a name bound to a literal device (``bindings``), contained in one
(``"cuda" in str(x.device)``) or starting one (``dev.startswith("cuda")``), a device compared with
``torch.device("cuda")``, CUDA-only package flags, and ``skipif`` / ``skipUnless`` markers
(their answer: does the test skip?); ``not``, ``and``, ``or``, ``is True`` / ``== False`` and a
walrus (``(n := torch.cuda.device_count()) > 1``) in Kleene's logic. Anything else is unknown in
both worlds, unless the caller names the atom it asks about (``about``): a rule that reports a
CUDA test (``args.device.startswith("gpu")`` it cannot evaluate, ``f(x.is_cuda)``) asks which
branch that test picks, so the atom holding it reads as a CUDA fact (False on Trainium, negated
by ``!=`` / ``not in`` / ``is not``). Evaluating the original's test on the CUDA host and the
ported test on Trainium tells whether a fix keeps the branch; ``asks_cuda`` says whether a
condition reads a CUDA fact at all (the program pass links the readers of a value through it).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import libcst as cst

from ._names import dotted_name
from ._walk import visit_syntax

__all__ = ["Truth", "asks_cuda", "truth"]

# Queries by their last two names (`torch.cuda.is_available`, `th.cuda.device_count`).
_CUDA_QUERIES = frozenset({"cuda.is_available", "cuda.device_count", "cuda.is_initialized"})
_NEURON_QUERIES = frozenset({"neuron.is_available", "neuron.device_count"})
# A flag named for a CUDA-only package: present where the original ran, missing on Trainium.
_PACKAGE_FLAG = re.compile(r"^_?(HAS|HAVE|IS|USE|WITH)_?(TRITON|APEX|FLASH_?ATTN\d*|XFORMERS|BITSANDBYTES|BNB|CUPY|DEEP_?GEMM)(_AVAILABLE|_INSTALLED)?$", re.IGNORECASE)
_SKIPS = frozenset({"skipif", "skipIf"})
_SKIPS_UNLESS = frozenset({"skipUnless"})
# How deep a name bound to another name is followed (`use = ok; ok = torch.cuda.is_available()`).
_DEPTH = 4


@dataclass(frozen=True)
class Truth:
    """A condition's value on the CUDA host and on Trainium (None: unknown)."""

    cuda_host: bool | None
    trainium: bool | None

    def __invert__(self) -> Truth:
        return Truth(_not(self.cuda_host), _not(self.trainium))

    def __and__(self, other: Truth) -> Truth:
        return Truth(_and(self.cuda_host, other.cuda_host), _and(self.trainium, other.trainium))

    def __or__(self, other: Truth) -> Truth:
        return Truth(_or(self.cuda_host, other.cuda_host), _or(self.trainium, other.trainium))


UNKNOWN = Truth(None, None)
# A CUDA fact of unknown value on the host: whatever it is, Trainium has no CUDA.
_NOT_ON_TRAINIUM = Truth(None, False)
_NEGATING = (cst.NotEqual, cst.NotIn, cst.IsNot)


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def truth(
    node: cst.BaseExpression,
    bindings: Mapping[str, cst.BaseExpression] | None = None,
    about: Collection[cst.CSTNode] = (),
) -> Truth:
    """``node``'s value in both worlds; ``bindings`` maps names (``device``, ``self.device``,
    ``HAVE_TRITON``) to the expressions bound to them where the caller knows them. ``about`` is the
    chain of nodes from ``node`` down to a CUDA test a rule reports: an atom on it that the model
    cannot evaluate is that CUDA fact (the rules' question "which branch does this test pick?")."""
    return _Evaluator(bindings or {}, frozenset(map(id, about))).truth(node, _DEPTH)


def asks_cuda(node: cst.CSTNode) -> bool:
    """Does ``node`` read a CUDA fact anywhere: ``torch.cuda.is_available()``, ``x.is_cuda``, a
    ``"cuda"`` device string?"""
    finder = _CudaFact()
    visit_syntax(node, finder)
    return finder.found


class _CudaFact(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.found = self.found or node.attr.value == "is_cuda" or _query(node) in _CUDA_QUERIES
        return not self.found

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.found = self.found or _device_kind(node) == "cuda"


def _query(node: cst.BaseExpression) -> str | None:
    name = dotted_name(node)
    return ".".join(name.split(".")[-2:]) if name is not None else None


def _device_kind(node: cst.BaseExpression) -> str | None:
    """``"cuda"`` for ``"cuda"`` / ``"cuda:1"``, ``"neuron"``, ``"cpu"``...; None for anything else."""
    value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    if not isinstance(value, str):
        return None
    kind = value.split(":", 1)[0]
    return kind if kind in ("cuda", "neuron", "cpu", "mps", "xpu") else None


def _literal_kind(node: cst.BaseExpression) -> str | None:
    """The kind a spelled device holds: ``"cuda:1"``, ``torch.device("cuda")``."""
    if isinstance(node, cst.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] == "device" and node.args:
        return _device_kind(node.args[0].value)
    return _device_kind(node)


def _counts(node: cst.BaseExpression) -> bool:
    """``torch.cuda.device_count()`` / ``torch.neuron.device_count()``."""
    return isinstance(node, cst.Call) and _query(node.func) in ("cuda.device_count", "neuron.device_count")


def _alike(answers: Iterable[bool]) -> bool | None:
    """The answer every case gives; None where they differ."""
    found = set(answers)
    return found.pop() if len(found) == 1 else None


def _unwalrus(node: cst.BaseExpression) -> cst.BaseExpression:
    """``(n := torch.cuda.device_count())`` compares the value it binds."""
    return node.value if isinstance(node, cst.NamedExpr) else node


def _boolean(node: cst.BaseExpression) -> bool | None:
    """``True`` / ``False`` spelled; None for anything else."""
    return {"True": True, "False": False}.get(node.value) if isinstance(node, cst.Name) else None


_ORDER = {
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
}
# `0 < n` is `n > 0`.
_FLIPPED = {
    cst.GreaterThan: cst.LessThan,
    cst.LessThan: cst.GreaterThan,
    cst.GreaterThanEqual: cst.LessThanEqual,
    cst.LessThanEqual: cst.GreaterThanEqual,
    cst.Equal: cst.Equal,
    cst.NotEqual: cst.NotEqual,
}


class _Evaluator:
    """A spelled device (``"cuda"``, a name bound to one) is the same string on both machines: the
    program chose it. A tensor's ``.device.type`` is a device the machine has."""

    def __init__(self, bindings: Mapping[str, cst.BaseExpression], about: frozenset[int]) -> None:
        self.bindings = bindings
        self.about = about

    def truth(self, node: cst.BaseExpression, depth: int) -> Truth:
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return ~self.truth(node.expression, depth)
        if isinstance(node, cst.BooleanOperation):
            left, right = self.truth(node.left, depth), self.truth(node.right, depth)
            return left & right if isinstance(node.operator, cst.And) else left | right
        if isinstance(node, cst.NamedExpr):
            return self.truth(node.value, depth)  # `(n := torch.cuda.device_count())`: the value tested
        found = self._atom(node, depth)
        if found == UNKNOWN and id(node) in self.about:
            # The reported CUDA test, in a shape the model cannot evaluate: a CUDA fact, which
            # `!=`, `not in` and `is not` negate (`args.device.startswith("gpu")`, `f(x.is_cuda)`).
            negated = isinstance(node, cst.Comparison) and any(isinstance(c.operator, _NEGATING) for c in node.comparisons)
            return _NOT_ON_TRAINIUM if not negated else ~_NOT_ON_TRAINIUM
        return found

    def _atom(self, node: cst.BaseExpression, depth: int) -> Truth:
        if isinstance(node, cst.Call):
            return self._call(node, depth)
        if isinstance(node, cst.Attribute):
            if node.attr.value == "is_cuda":
                return Truth(None, False)  # a tensor may be on the host's CPU; none is on CUDA on Trainium
            if node.attr.value == "is_neuron":
                return Truth(False, None)
        if isinstance(node, cst.Comparison):
            return self._comparison(node, depth)
        name = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if name is not None:
            if name in self.bindings and depth:
                return self.truth(self.bindings[name], depth - 1)
            if _PACKAGE_FLAG.match(name.rsplit(".", 1)[-1]):
                return Truth(True, False)
        return UNKNOWN

    def _call(self, node: cst.Call, depth: int) -> Truth:
        query = _query(node.func)
        if query in ("cuda.is_available", "cuda.device_count"):
            return Truth(True, False)
        if query in _NEURON_QUERIES:
            return Truth(False, True)
        last = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
        first = node.args[0].value if node.args and node.args[0].keyword is None else None
        if first is not None and last in _SKIPS:
            return self.truth(first, depth)  # does the test skip?
        if first is not None and last in _SKIPS_UNLESS:
            return ~self.truth(first, depth)
        if first is not None and last == "startswith" and isinstance(node.func, cst.Attribute) and len(node.args) == 1:
            return self._equal(node.func.value, first, depth)  # `dev.startswith("cuda")`: its kind is "cuda"
        return UNKNOWN

    def _comparison(self, node: cst.Comparison, depth: int) -> Truth:
        if len(node.comparisons) != 1:
            return UNKNOWN
        target = node.comparisons[0]
        left, right = node.left, target.comparator
        op = target.operator
        if _boolean(right) is None and _boolean(left) is not None:
            left, right = right, left
        if _boolean(right) is not None and isinstance(op, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
            # `x.is_cuda is True`, `torch.cuda.is_available() == False`
            same = self.truth(left, depth) if _boolean(right) else ~self.truth(left, depth)
            return ~same if isinstance(op, (cst.NotEqual, cst.IsNot)) else same
        count = self._count(node)
        if count is not None:
            return count
        if isinstance(op, (cst.In, cst.NotIn)) and not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            # `"cuda" in str(x.device)`, `"cuda" not in device`: the device's kind is that string.
            found = self._equal(right, left, depth) if _literal_kind(left) is not None else UNKNOWN
            return ~found if isinstance(op, cst.NotIn) else found
        if isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            found = UNKNOWN
            for i, element in enumerate(right.elements):
                one = self._equal(left, element.value, depth)
                found = one if i == 0 else found | one
            return ~found if isinstance(target.operator, cst.NotIn) else found
        if isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
            equal = self._equal(left, right, depth)
            return ~equal if isinstance(target.operator, (cst.NotEqual, cst.IsNot)) else equal
        return UNKNOWN

    def _count(self, node: cst.Comparison) -> Truth | None:
        """``torch.cuda.device_count() > 0`` (or ``1 <= torch.neuron.device_count()``): a count of
        devices compared with a number. The host has at least one CUDA device and no neuron one,
        Trainium the other way round; a count of "at least one" answers where every such count
        answers alike (``> 1`` asks for a multi-GPU host: unknown there)."""
        target = node.comparisons[0]
        left, right, op = _unwalrus(node.left), _unwalrus(target.comparator), type(target.operator)
        if not _counts(left) and _counts(right):
            left, right, op = right, left, _FLIPPED.get(op)
        if not (_counts(left) and op in _ORDER):
            return None
        query = _query(left.func)
        test = _ORDER[op]
        # A number spelled is itself; any other (`tp * pp > torch.cuda.device_count()`,
        # `< min_gpus`) is a count of devices a job needs: one or more.
        needed = [int(right.value, 0)] if isinstance(right, cst.Integer) else [1, 2, 3]
        none = _alike(test(0, n) for n in needed)
        some = _alike(test(c, n) for n in needed for c in range(1, max(needed) + 2))
        return Truth(some, none) if query == "cuda.device_count" else Truth(none, some)

    def _equal(self, a: cst.BaseExpression, b: cst.BaseExpression, depth: int) -> Truth:
        if _literal_kind(b) is None and _literal_kind(a) is not None:
            a, b = b, a
        literal = _literal_kind(b)
        if literal is None:
            return UNKNOWN
        kind = self._kind(a, depth)
        if kind == "tensor":
            # `x.device.type == "cuda"`: a tensor's device is one the machine has.
            return Truth(None if literal in ("cuda", "cpu") else False, None if literal in ("neuron", "cpu") else False)
        if kind is not None:
            same = kind == literal
            return Truth(same, same)  # a spelled device is the same string on both machines
        return UNKNOWN

    def _kind(self, node: cst.BaseExpression, depth: int) -> str | None:
        """The device kind ``node`` holds: a literal's, ``torch.device("cuda")``'s, a bound
        name's (and its ``.type``), or "tensor" for a tensor's ``.device.type``."""
        literal = _device_kind(node)
        if literal is not None:
            return literal
        if isinstance(node, cst.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] == "device" and node.args:
            return _device_kind(node.args[0].value)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str" and len(node.args) == 1:
            return self._kind(node.args[0].value, depth)  # `str(device)`: the same kind
        if isinstance(node, cst.Attribute) and node.attr.value == "type":
            inner = self._kind(node.value, depth)
            if inner is not None:
                return inner
        name = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if name is None:
            return None
        if name in self.bindings and depth:
            return self._kind(self.bindings[name], depth - 1)
        if name.endswith(".device.type"):
            return "tensor"
        return None
