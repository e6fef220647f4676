"""CN503: ``torch.compile(dynamic=True)``, which the neuron backend rejects."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import arg_by_name
from ._helpers import compile_gate, is_compile_call, wakes_on_compile

__all__ = ["CompileDynamic"]


class CompileDynamic(Rule):
    """
    ## What it does
    Rewrites ``torch.compile(..., dynamic=True)`` to ``dynamic=False``.

    ## Why is this bad?
    The neuron backend compiles static shapes: ``dynamic=True`` is rejected. With
    ``dynamic=False`` every new input shape triggers a recompilation, so pad or bucket
    variable-length inputs (sequence lengths, last partial batch: ``drop_last=True``).

    ## Example
    ```python
    model = torch.compile(model, backend="neuron", dynamic=True)
    ```
    becomes
    ```python
    model = torch.compile(model, backend="neuron", dynamic=False)
    ```

    ## Fix safety
    Unsafe: results are the same, but a model fed many shapes now compiles once per shape,
    which can cost far more time than it saves. Whether to pad or bucket is the user's call.
    A value held in a variable is reported; ``--target accelerator`` only reports.
    """

    code = "CN503"
    name = "compile-dynamic-shapes"
    advisory = True  # a compile option: never holds back a group of linked fixes
    fixes = frozenset({Safety.UNSAFE})
    # Only a torch.compile call can carry dynamic=, and no spelling of it avoids this word.
    triggers = ("compile",)
    wakes = classmethod(wakes_on_compile)
    detect = classmethod(compile_gate)  # a gate: no finding without a compile call (issue 42)
    VALID = (
        'import torch\nm = torch.compile(m, backend="neuron")\n',
        'import torch\nm = torch.compile(m, backend="neuron", dynamic=False)\n',
        "x = f(dynamic=True)\n",
    )
    INVALID = (
        Invalid(
            'import torch\nm = torch.compile(m, backend="neuron", dynamic=True)\n',
            'import torch\nm = torch.compile(m, backend="neuron", dynamic=False)\n',
            unsafe=True,
        ),
        Invalid('import torch\nm = torch.compile(m, backend="neuron", dynamic=True)\n'),
        Invalid('import torch\nm = torch.compile(m, backend="neuron", dynamic=args.dynamic)\n'),
        Invalid('import torch\nm = torch.compile(m, dynamic=True)\n', target="accelerator"),
        # nn.Module.compile with torch 2.13's `name=` keyword: still torch.compile's keywords.
        Invalid(
            'import torch\nmodel.compile(dynamic=True, name="encoder")\n',
            'import torch\nmodel.compile(dynamic=False, name="encoder")\n',
            unsafe=True,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or not is_compile_call(self, node):
            return
        dynamic = arg_by_name(node, "dynamic")
        if dynamic is None:
            return
        value = dynamic.value
        guidance = (
            "Neuron compiles static shapes: pass dynamic=False and pad or bucket inputs whose "
            "shape varies (each new shape recompiles)."
        )
        if isinstance(value, cst.Name) and value.value in ("False", "None"):
            return
        if not (isinstance(value, cst.Name) and value.value == "True"):
            if self.context.settings.target == "neuron":
                self.report(node, "`torch.compile` dynamic= is chosen at run time", guidance=guidance, effort=Effort.LOW)
            return
        message = "`torch.compile(dynamic=True)` is rejected by the neuron backend"
        if self.context.settings.target != "neuron":
            self.report(node, message, guidance=guidance, effort=Effort.LOW)
            return
        new = node.with_changes(
            args=[a.with_changes(value=cst.Name("False")) if a is dynamic else a for a in node.args]
        )
        self.report(
            node,
            message,
            replacement=new,
            safety=Safety.UNSAFE,
            guidance=guidance,
            effort=Effort.LOW,
            description="compile with static shapes",
        )
