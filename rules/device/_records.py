"""A device string written into a record: provenance, not placement.

``props.rand_device = "cuda"`` in InvokeAI's legacy-image importer records which device made a
picture's noise (every image made before 3.0 used CUDA noise): ``props`` is an instance of the
file's own metadata class, which only writes its fields out (an f-string, a dict). Retargeted
to ``"neuron"``, the port records a fact that is false, and nothing is placed anywhere. The
value is a device only where something reads it as one.
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule
from cuda2neuron.python import visit_syntax

__all__ = ["recorded_only"]


def recorded_only(rule: Rule, assign: cst.Assign) -> bool:
    """Is ``assign`` (``obj.attr = <device string>``) a field of a record? ``obj`` is a local name
    bound, in the same function, to an instance of a class the module defines with ``attr`` as a
    class-level field, and the module reads ``.attr`` only to write it out: inside an f-string,
    as a dict value, or as the value of a subscript store (``d["attr"] = self.attr``)."""
    if len(assign.targets) != 1:
        return False
    target = assign.targets[0].target
    if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)) or target.value.value in ("self", "cls"):
        return False
    attr, instance = target.attr.value, target.value.value
    function = next((a for a in reversed(rule.context.ancestors) if isinstance(a, cst.FunctionDef)), None)
    if function is None:
        return False
    classes = _record_classes(rule.context.module)
    made = _instances(function, instance)
    if not made or not all(c in classes and attr in classes[c] for c in made):
        return False
    return _reads_only_write_out(rule.context.module, attr)


def _record_classes(module: cst.Module) -> dict[str, set[str]]:
    """The module's top-level classes by name, each with its class-level field names."""
    found: dict[str, set[str]] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
            fields: set[str] = set()
            for line in stmt.body.body:
                if isinstance(line, cst.SimpleStatementLine):
                    for small in line.body:
                        if isinstance(small, cst.Assign):
                            fields.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
                        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            fields.add(small.target.value)
            found[stmt.name.value] = fields
    return found


class _Bindings(cst.CSTVisitor):
    """The class names ``name = ClassName(...)`` binds ``name`` to in a function; None once it is
    bound to anything else."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.classes: set[str] | None = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.classes is None or not any(isinstance(t.target, cst.Name) and t.target.value == self.name for t in node.targets):
            return
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            self.classes.add(value.func.value)
        else:
            self.classes = None


def _instances(function: cst.FunctionDef, name: str) -> set[str]:
    bindings = _Bindings(name)
    visit_syntax(function.body, bindings)
    return bindings.classes or set()


class _Reads(cst.CSTVisitor):
    """Whether every read of ``.attr`` in the module only writes the value out."""

    def __init__(self, attr: str) -> None:
        self.attr = attr
        self.stack: list[cst.CSTNode] = []
        self.other = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value == self.attr and not self._written_out(node):
            self.other = True
        self.stack.append(node)
        return not self.other

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def _written_out(self, node: cst.Attribute) -> bool:
        parent = self.stack[-1] if self.stack else None
        if isinstance(parent, cst.AssignTarget):
            return True  # a store, not a read
        if isinstance(parent, cst.Assign) and parent.value is node:
            return all(isinstance(t.target, cst.Subscript) for t in parent.targets)
        if isinstance(parent, cst.DictElement) and parent.value is node:
            return True
        return any(isinstance(a, cst.FormattedStringExpression) for a in self.stack)


def _reads_only_write_out(module: cst.Module, attr: str) -> bool:
    # libcst's own walk (it calls on_visit / on_leave, which the parent stack needs): asked only
    # for a device string stored in a field of the file's own class, seldom.
    reads = _Reads(attr)
    module.visit(reads)
    return not reads.other
