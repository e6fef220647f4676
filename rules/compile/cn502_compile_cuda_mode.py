"""CN502: ``torch.compile(mode=...)`` values that only mean something on CUDA, passed or kept for later."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import arg_by_name, remove_arg
from .._shared.names import terminal_name
from .._shared.strings import string_value
from ._helpers import CUDA_MODES as _CUDA_MODES
from ._helpers import compile_callee, compile_gate, is_compile_call, wakes_on_compile

__all__ = ["CompileCudaMode"]

# "reduce-overhead" means CUDA graphs; the autotune modes benchmark Triton kernels. Sorted: the
# modes are trigger words, and a rule's triggers are a tuple in a stable order.


class CompileCudaMode(Rule):
    """
    ## What it does
    Removes ``mode="reduce-overhead"``, ``mode="max-autotune"`` and
    ``mode="max-autotune-no-cudagraphs"`` from ``torch.compile(...)``, and reports such a mode
    kept for a later ``torch.compile(**kwargs)``: ``{"mode": "max-autotune"}``,
    ``dict(mode="reduce-overhead")``.

    ## Why is this bad?
    These modes configure inductor for CUDA: ``"reduce-overhead"`` records CUDA graphs and the
    autotune modes benchmark Triton kernels. The neuron backend ignores them: only
    ``mode="default"`` has an effect on Neuron, so leaving them suggests a behaviour the port
    does not have.

    ## Example
    ```python
    model = torch.compile(model, mode="reduce-overhead")
    ```
    becomes
    ```python
    model = torch.compile(model)
    ```
    (and CN501 adds ``backend="neuron"``).

    ## Fix safety
    Safe for ``--target neuron``: the neuron backend gives these modes no meaning, so removing
    them changes nothing at run time. A mode held in a variable is reported, and so is one kept
    in a dictionary of compile arguments (which call receives it is not known here). With
    ``--target accelerator`` the mode still matters on CUDA, so it is only reported.
    """

    code = "CN502"
    name = "compile-cuda-mode"
    advisory = True  # a compile option: never holds back a group of linked fixes
    fixes = frozenset({Safety.SAFE})
    # A torch.compile call carries the mode, and no spelling of it avoids this word; a mode kept
    # for later is spelled out (peft's `compile_kwargs={"mode": "max-autotune-no-cudagraphs"}`).
    triggers = ("compile", *_CUDA_MODES)
    VALID = (
        'import torch\nm = torch.compile(m, backend="neuron")\n',
        'import torch\nm = torch.compile(m, backend="neuron", mode="default")\n',
        'parser.add_argument("--mode", default="max-autotune")\n',  # a string, not a compile call
        'opts = {"mode": "default"}\n',
        'opts = {"kind": "max-autotune"}\n',  # another key
    )
    INVALID = (
        Invalid(
            'import torch\nm = torch.compile(m, backend="neuron", mode="reduce-overhead")\n',
            'import torch\nm = torch.compile(m, backend="neuron")\n',
        ),
        Invalid(
            "import torch\nm = torch.compile(m, mode='max-autotune', backend='neuron')\n",
            "import torch\nm = torch.compile(m, backend='neuron')\n",
        ),
        Invalid(
            'import torch\n\n@torch.compile(mode="max-autotune-no-cudagraphs", backend="neuron")\ndef f(x):\n    return x\n',
            'import torch\n\n@torch.compile(backend="neuron")\ndef f(x):\n    return x\n',
        ),
        Invalid('import torch\nm = torch.compile(m, backend="neuron", mode=args.compile_mode)\n'),
        Invalid('import torch\nm = torch.compile(m, mode="reduce-overhead")\n', target="accelerator"),
        # Kept for a later torch.compile(**kwargs) (peft's LoRA conversion test).
        Invalid('out = convert(m, compile_kwargs={"mode": "max-autotune-no-cudagraphs"})\n'),
        Invalid('COMPILE = dict(mode="reduce-overhead", fullgraph=True)\n'),
        Invalid('kw = {"mode": "max-autotune"}\n', target="accelerator"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        return b"max-autotune" in code or b"reduce-overhead" in code or wakes_on_compile(cls, code)

    detect = classmethod(compile_gate)  # a gate: no finding without a compile call or a CUDA mode

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if string_value(node.key) == "mode":
            self._kept_mode(node, node.value)

    def _kept_mode(self, node: cst.CSTNode, value: cst.BaseExpression) -> None:
        mode = string_value(value)
        if mode not in _CUDA_MODES:
            return
        keeps = "keeps its meaning on CUDA" if self.context.settings.target != "neuron" else "does nothing there"
        self.report(
            node,
            f'compile mode "{mode}" kept for a later `torch.compile`: it only has an effect with CUDA',
            guidance=f'On Trainium only mode="default" has an effect; "{mode}" {keeps}. Drop the key on the '
            "Trainium path (or keep it for the CUDA build).",
            effort=Effort.LOW,
        )

    def visit_Call(self, node: cst.Call) -> None:
        if terminal_name(node.func) == "dict" and isinstance(node.func, cst.Name):
            mode = arg_by_name(node, "mode")
            if mode is not None and mode.keyword is not None:
                self._kept_mode(mode, mode.value)
            return
        if not node.args or not is_compile_call(self, node):
            return
        mode = arg_by_name(node, "mode")
        if mode is None:
            return
        value = string_value(mode.value)
        if value is None:
            if self.context.settings.target == "neuron":
                self.report(
                    node,
                    "`torch.compile` mode is chosen at run time",
                    guidance='Only mode="default" has an effect on Neuron; drop the argument.',
                    effort=Effort.LOW,
                )
            return
        if value not in _CUDA_MODES:
            return
        message = f'`{compile_callee(self, node)}(mode="{value}")` only has an effect with CUDA'
        if self.context.settings.target != "neuron":
            self.report(
                node,
                message,
                guidance=f'On Trainium the mode is ignored (only "default" has an effect); "{value}" '
                "keeps its meaning on CUDA. Nothing to do unless you want the same behaviour on both.",
                effort=Effort.LOW,
            )
            return
        self.report(
            node,
            message,
            replacement=remove_arg(node, mode),
            safety=Safety.SAFE,
            description="drop the CUDA-only compile mode",
        )
