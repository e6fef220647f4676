"""What the safety-net rules (``Rule.net``: CN109, CN409, CN623) share: their unit of report and
the places a name is only text."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from cuda2neuron.python import NET_UNITS
from cuda2neuron.python import net_unit as unit_of

from .values import is_output_call

__all__ = ["in_output", "is_bare_string", "is_text", "unit_of"]

# The engine keeps a net's first report of a unit (a statement, one item of a `with`, a
# decorator) and drops it in a unit another rule reports; `unit_of(ancestors)` is that unit.


def is_bare_string(unit: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Is ``node`` a string standing alone as its statement (a docstring)?"""
    return isinstance(unit, cst.Expr) and unit.value is node


def in_output(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Is the node an argument of ``print``/a logging call, or inside one (``log.info("%s",
    impl == "nccl")``): text for a person, not a value the program acts on?"""
    for node in reversed(ancestors):
        if isinstance(node, cst.Call):
            return is_output_call(node.func)
        if isinstance(node, NET_UNITS):
            return False
    return False


def is_text(ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> bool:
    """Where a net stays silent on ``node``: outside any unit, a docstring, printed or logged
    text. (Once per unit is the engine's: it keeps each net's first report of a unit.)"""
    unit = unit_of(ancestors)
    return unit is None or is_bare_string(unit, node) or in_output(ancestors)
