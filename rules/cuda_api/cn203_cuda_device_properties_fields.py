"""CN203: fields of ``get_device_properties(...)`` that Neuron devices do not have."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

__all__ = ["DevicePropertiesFields"]

_PROPERTY_CALLS = frozenset({"torch.cuda.get_device_properties", "torch.neuron.get_device_properties"})
# The only fields torch.neuron.get_device_properties(i) returns (neuron-target-api.md).
_NEURON_FIELDS = frozenset({"name", "total_memory"})
_GUIDANCE = {
    "major": "Hardware sniffing (`.major >= 8` for Ampere) has no meaning on Trainium: take the "
    "branch meant for modern hardware (bfloat16 is supported) and drop the check.",
    "minor": "Hardware sniffing has no meaning on Trainium: drop the version check.",
}
_DEFAULT_GUIDANCE = (
    "Only `.name` and `.total_memory` exist on Neuron device properties: drop the use, or "
    "replace it with a constant suited to Trainium."
)


def _properties_call(node: ast.expr) -> bool:
    """A call whose callee is written ``...get_device_properties`` (``_is_properties_call``
    before it resolves the name)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "get_device_properties"


class DevicePropertiesFields(Rule):
    """
    ## What it does
    Reports device-property fields that Neuron devices lack (all but ``.name`` and
    ``.total_memory``). That is ``.major``, ``.minor``, ``.multi_processor_count``, ``.uuid``
    and the rest, read on the result of ``torch.cuda.get_device_properties(i)`` (or the already moved ``torch.neuron`` call), read
    directly or through a variable assigned from it in the same scope.

    ## Why is this bad?
    ``torch.neuron.get_device_properties(i)`` only has ``.name`` and ``.total_memory``; the other
    fields raise ``AttributeError`` on Trainium. Code reads them to sniff the GPU generation.

    ## Example
    ```python
    props = torch.cuda.get_device_properties(0)
    if props.major >= 8:
        use_bf16 = True
    ```
    ``props.major`` is reported: take the modern-hardware branch and drop the check.

    ## Fix safety
    Display only: which branch is right on Trainium is a decision for the user.
    """

    code = "CN203"
    name = "cuda-device-properties-fields"
    triggers = ("get_device_properties",)
    VALID = (
        "import torch\nmem = torch.cuda.get_device_properties(0).total_memory\n",
        "import torch\np = torch.neuron.get_device_properties(0)\nprint(p.name, p.total_memory)\n",
        # Another object's `.major`.
        "import torch\np = torch.cuda.get_device_properties(0)\nv = version.major\n",
        # Rebound before the read: no longer the properties object.
        "import torch\np = torch.cuda.get_device_properties(0)\np = parse(s)\nv = p.major\n",
    )
    INVALID = (
        Invalid("import torch\nif torch.cuda.get_device_properties(0).major >= 8:\n    pass\n"),
        Invalid("import torch\np = torch.cuda.get_device_properties(0)\nsm = p.multi_processor_count\n"),
        Invalid("import torch\ndef f():\n    p = torch.neuron.get_device_properties(0)\n    return p.minor\n"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        # (id of scope, variable name) for variables holding a properties object. Tracked in
        # visit order, which is source order within a scope; O(1) per node.
        self._holders: set[tuple[int, str]] = set()

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where no field other than ``.name`` / ``.total_memory`` is read
        from a ``get_device_properties(...)`` call or from a name some assignment of the file
        binds to one (any scope: a superset of the visitor's holders), unsure elsewhere."""
        nodes = list(ast.walk(file.tree))
        holders = {
            t.id
            for n in nodes
            if isinstance(n, ast.Assign) and _properties_call(n.value)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in nodes:
            if not isinstance(node, ast.Attribute) or node.attr in _NEURON_FIELDS or node.attr.startswith("__"):
                continue
            value = node.value
            if _properties_call(value) or (isinstance(value, ast.Name) and value.id in holders):
                return None
        return []

    def _is_properties_call(self, node: cst.BaseExpression) -> bool:
        if not isinstance(node, cst.Call):
            return False
        func = node.func
        # Cheap text check first; `from torch.cuda import get_device_properties as gdp` is the
        # rare alias this misses.
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        return member == "get_device_properties" and self.qualname(func) in _PROPERTY_CALLS

    def visit_Assign(self, node: cst.Assign) -> None:
        holds = self._is_properties_call(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                key = (id(self.context.scope), target.target.value)
                if holds:
                    self._holders.add(key)
                else:
                    self._holders.discard(key)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        field = node.attr.value
        if field in _NEURON_FIELDS or field.startswith("__"):
            return
        value = node.value
        if isinstance(value, cst.Name):
            if (id(self.context.scope), value.value) not in self._holders:
                return
        elif not self._is_properties_call(value):
            return
        self.report(
            node,
            f"device properties have no `.{field}` on Neuron (only .name and .total_memory)",
            guidance=_GUIDANCE.get(field, _DEFAULT_GUIDANCE),
            effort=Effort.LOW,
        )
