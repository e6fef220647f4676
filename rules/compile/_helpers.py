"""Helpers of the torch.compile family (CN5xx)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

from .._shared.names import call_qualname

__all__ = ["is_torch_compile"]


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
