"""CN505: inductor-only ``torch.compile(options=...)`` keys and ``torch._inductor.config`` (set or patched)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.args import arg_by_name
from .._shared.names import terminal_name
from .._shared.packages import in_package
from .._shared.strings import string_value
from ._helpers import compile_gate, is_compile_call, wakes_on_compile

__all__ = ["CompileInductorOptions"]

# Inductor's own configuration: sections and top-level switches (torch/_inductor/config.py).
_SECTIONS = ("triton.", "cuda.", "cpp.", "trace.", "aot_inductor.", "rocm.", "halide.")
_KEYS = frozenset(
    {
        "max_autotune",
        "max_autotune_pointwise",
        "max_autotune_gemm",
        "max_autotune_gemm_backends",
        "epilogue_fusion",
        "shape_padding",
        "coordinate_descent_tuning",
        "freezing",
        "aggressive_fusion",
        "layout_optimization",
        "cpp_wrapper",
        "benchmark_kernel",
        "fallback_random",
        "force_fuse_int_mm_with_mul",
        "use_mixed_mm",
        "unroll_reductions_threshold",
        "split_reductions",
        "benchmark_fusion",
        "search_autotune_cache",
        "graph_partition",
    }
)

# AWS's torch.compile reference (torch/compile/reference-torch-compile, 2026-10-14) rates `options`
# "Partial": a dict or None is accepted and only a few keys are read. The readable one is Neuron's
# own `fallback_execution` (env-vars page); inductor's keys are not among them (the backend does not
# use TorchInductor, about-torch-compile).
_GUIDANCE = (
    "These options configure inductor's CUDA/CPU code generation; the neuron backend accepts an "
    "options dict but reads only a few Neuron keys (AWS rates `options` \"Partial\"), and inductor's are "
    "not among them. Remove them (keep them only for the CUDA build of the code)."
)


def _inductor_key(key: str) -> bool:
    return key in _KEYS or key.startswith(_SECTIONS)


class CompileInductorOptions(Rule):
    """
    ## What it does
    Reports ``torch.compile(options={...})`` dictionaries with inductor-only keys
    (``"triton.cudagraphs"``, ``"max_autotune"``, ``"epilogue_fusion"``, ...), assignments to
    ``torch._inductor.config`` and its ``patch(...)`` (a context manager or decorator that sets
    the same settings for a block: ``config.patch("triton.cudagraph_support_input_mutation",
    False)``).

    ## Why is this bad?
    Those settings belong to inductor, the compiler the port no longer uses: they tune Triton
    and C++ code generation, CUDA graphs and autotuning. On Neuron they are dead configuration.

    ## Example
    ```python
    model = torch.compile(model, options={"triton.cudagraphs": True})
    torch._inductor.config.coordinate_descent_tuning = True
    ```

    ## Fix safety
    No fix: AWS's ``torch.compile`` reference rates ``options`` "Partial" (the dict is accepted
    and only a few Neuron keys such as ``fallback_execution`` are read; inductor keys are not
    among them), and configuration next to it may still serve a CUDA build, so the user decides.
    """

    code = "CN505"
    name = "compile-inductor-options"
    advisory = True  # a compile option: never holds back a group of linked fixes
    # options= only counts on a torch.compile call; the config assignments name torch._inductor.
    triggers = ("compile", "_inductor")
    wakes = classmethod(wakes_on_compile)
    detect = classmethod(compile_gate)  # a gate: no finding without a compile call (issue 42)
    targets = frozenset({"neuron"})
    VALID = (
        'import torch\nm = torch.compile(m, backend="neuron")\n',
        'import torch\nm = torch.compile(m, backend="neuron", options={"my_neuron_flag": 1})\n',
        "cfg.options = {'max_autotune': True}\n",
        "from unittest import mock\nwith mock.patch('x.y', 1):\n    pass\n",
        "import torch\nwith torch._dynamo.config.patch(error_on_recompile=True):\n    pass\n",  # dynamo still runs
    )
    INVALID = (
        Invalid('import torch\nm = torch.compile(m, options={"triton.cudagraphs": True})\n'),
        Invalid("import torch\nm = torch.compile(m, options={'max_autotune': True, 'x': 1})\n"),
        Invalid("import torch\nm = torch.compile(m, options=inductor_opts)\n"),
        Invalid("import torch\ntorch._inductor.config.coordinate_descent_tuning = True\n"),
        Invalid("import torch._inductor.config as ic\nic.freezing = True\n"),
        # peft's hotswap test: inductor's CUDA-graph setting for one block.
        Invalid('import torch\nwith torch._inductor.config.patch("triton.cudagraph_support_input_mutation", False):\n    f()\n'),
        Invalid("from torch._inductor import config\n\n@config.patch(coordinate_descent_tuning=True)\ndef test():\n    pass\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if terminal_name(node.func) == "patch":
            if self.qualname(node.func) == "torch._inductor.config.patch":
                self.report(
                    node,
                    "`torch._inductor.config.patch` sets inductor settings that have no effect with the neuron backend",
                    guidance=_GUIDANCE,
                    effort=Effort.LOW,
                )
            return
        if not node.args or not is_compile_call(self, node):
            return
        options = arg_by_name(node, "options")
        if options is None:
            return
        value = options.value
        if isinstance(value, cst.Dict):
            keys = [string_value(el.key) for el in value.elements if isinstance(el, cst.DictElement)]
            flagged = [k for k in keys if k is not None and _inductor_key(k)]
            if not flagged:
                return
            message = f"`torch.compile` options for inductor have no effect on Neuron: {', '.join(flagged)}"
        else:
            message = "`torch.compile(options=...)` passes inductor settings"
        self.report(options, message, guidance=_GUIDANCE, effort=Effort.LOW)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and in_package(self.qualname(t), ("torch._inductor.config",)):
                self.report(
                    node,
                    "`torch._inductor.config` settings have no effect with the neuron backend",
                    guidance=_GUIDANCE,
                    effort=Effort.LOW,
                )
                return
