"""A value stored on an instance from outside its class: ``runner = Runner(); runner.device = "cuda"``.

The program pass links ``self.device = "cuda"`` in a method to the class's reads of
``self.device`` (``_flows._binding``). A store through another name reaches the same reads
once that name holds an instance of the module's own class: ``Runner.step``'s ``if self.device
== "cuda": torch.cuda.set_sync_debug_mode(1)`` (a manual finding, so the test stays) reads the
``"cuda"`` that ``main`` stored, and moved alone that literal sends Trainium down the other
path while the original took the CUDA one (issue 38, a value stored after construction).
"""

from __future__ import annotations

import libcst as cst

from ._walk import visit_syntax

__all__ = ["stored_on_instance"]


def stored_on_instance(
    module: cst.CSTNode, scope: cst.CSTNode, targets: list[cst.BaseExpression]
) -> tuple[cst.ClassDef, frozenset[str]] | None:
    """(the class, ``self.<attribute>``) where a target is ``obj.<attribute>`` and ``obj`` is
    bound in ``scope`` (a function, or the module) to a call of a class the module defines at its
    top level; None otherwise (``args.device``, ``self.device``, an instance of an imported class:
    the project sweep's readers answer for those)."""
    stored = [(t.value.value, t.attr.value) for t in targets if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name)]
    stored = [(owner, attr) for owner, attr in stored if owner != "self"]
    if not stored or not isinstance(module, cst.Module):
        return None
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    if not classes:
        return None
    made = _Instances({owner for owner, _ in stored}, frozenset(classes))
    visit_syntax(scope, made)
    for owner, attr in stored:
        name = made.found.get(owner)
        if name is not None:
            return classes[name], frozenset({f"self.{attr}"})
    return None


class _Instances(cst.CSTVisitor):
    """``obj = Cls(...)`` for the wanted names, ``Cls`` one of ``classes`` (the first binding wins:
    the pass is flow-insensitive, as ``_flows`` is)."""

    def __init__(self, names: set[str], classes: frozenset[str]) -> None:
        self.names = names
        self.classes = classes
        self.found: dict[str, str] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in self.classes:
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value in self.names:
                    self.found.setdefault(target.target.value, value.func.value)
