"""A device test of a property that may still answer "cuda" on Trainium.

``@property def device_type(self): ... return self.buffer.device.type ... return
current_backend().name``, where a backend class gave its base ``super().__init__(name="cuda")``
(a name the port leaves). ``block.device_type == "cuda"`` was true of both answers on the GPU;
after the port the first answers "neuron" and the second "cuda", so the test moved or kept takes
another path than the original on one of them. The project sweep records such properties
(``ProjectFacts.left_cuda_properties``, ``workspace/_value_properties.py``); CN103 asks here
before it moves a test and leaves it to a person, naming the return and the literal.
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

__all__ = ["left_property"]


def left_property(rule: Rule, test: cst.CSTNode) -> str | None:
    """Why the comparison ``test`` (``x.<property> == "cuda"``, ``x.<property> in (...)``) may not
    move, as a phrase; None for most tests."""
    rows = rule.context.settings.project.left_cuda_properties
    if not rows or not isinstance(test, cst.Comparison):
        return None
    operands = [test.left, *(c.comparator for c in test.comparisons)]
    attributes = {o.attr.value for o in operands if isinstance(o, cst.Attribute)}
    for name, returned, literal in sorted(rows):
        if name in attributes:
            return (
                f"`{name}` may return a name the port leaves as \"cuda\" (returned at {returned}; "
                f"`\"cuda\"` given at {literal}) beside answers that become \"neuron\""
            )
    return None
