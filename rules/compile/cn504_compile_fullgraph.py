"""CN504: advice to compile whole graphs on Neuron (display only)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import add_kwarg, arg_by_name
from ._helpers import compile_callee, compile_gate, is_compile_call, wakes_on_compile

__all__ = ["CompileFullgraph"]


class CompileFullgraph(Rule):
    """
    ## What it does
    Suggests ``fullgraph=True`` for ``torch.compile(..., backend="neuron")`` calls that do not
    set it (or set it to ``False``).

    ## Why is this bad?
    AWS recommends ``fullgraph=True`` on Neuron: a graph break splits the model into several
    compiled graphs with eager code between them, and on Trainium each break means a device
    round trip. ``fullgraph=True`` turns a silent break into an error that names its cause.

    ## Example
    ```python
    model = torch.compile(model, backend="neuron")
    ```
    could be
    ```python
    model = torch.compile(model, backend="neuron", fullgraph=True)
    ```

    ## Fix safety
    Display only: with ``fullgraph=True`` code that has a graph break stops compiling, so the
    change is shown, never written.
    """

    code = "CN504"
    name = "compile-fullgraph"
    advisory = True  # a compile option: never holds back a group of linked fixes
    fixes = frozenset({Safety.DISPLAY_ONLY})
    triggers = ("compile",)
    wakes = classmethod(wakes_on_compile)
    detect = classmethod(compile_gate)  # a gate: no finding without a compile call (issue 42)
    targets = frozenset({"neuron"})
    VALID = (
        'import torch\nm = torch.compile(m, backend="neuron", fullgraph=True)\n',
        # Only the neuron backend gets the advice (CN501 adds it first).
        "import torch\nm = torch.compile(m)\n",
        'import torch\nm = torch.compile(m, backend="aot_eager")\n',
    )
    INVALID = (
        Invalid('import torch\nm = torch.compile(m, backend="neuron")\n'),
        Invalid('import torch\nm = torch.compile(m, backend="neuron", fullgraph=False)\n'),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or not is_compile_call(self, node):
            return
        backend = arg_by_name(node, "backend")
        if backend is None or not (
            isinstance(backend.value, cst.SimpleString) and backend.value.evaluated_value == "neuron"
        ):
            return
        fullgraph = arg_by_name(node, "fullgraph")
        if fullgraph is None:
            new = add_kwarg(node, "fullgraph", cst.Name("True"))
        elif isinstance(fullgraph.value, cst.Name) and fullgraph.value.value == "False":
            new = node.with_changes(
                args=[a.with_changes(value=cst.Name("True")) if a is fullgraph else a for a in node.args]
            )
        else:
            return
        self.report(
            node,
            f"`{compile_callee(self, node)}` on Neuron works best with fullgraph=True",
            replacement=new,
            safety=Safety.DISPLAY_ONLY,
            guidance="Pass fullgraph=True to make graph breaks errors, then remove them; each break "
            "runs eager code between compiled graphs.",
            effort=Effort.LOW,
            description="compile the whole graph",
        )
