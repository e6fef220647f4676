"""CN104: ``.is_cuda`` on tensors and storages."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, ProjectFacts, Rule, Safety

from .._shared.kernel_gates import report_kernel_gate
from .._shared.selected import opened_code, selected_code
from .._shared.target import NEURON, compared_type_expr
from ._helpers import Use, UseKind, comparison_safety

__all__ = ["IsCudaAttribute"]

# No flag is named here: whether --unsafe-fixes can apply the fix depends on its safety, and the
# CLI says so for each finding.
_GUIDANCE = (
    "this test picks a code path written for CUDA; if the branch calls CUDA-only code keep its "
    "fallback for Neuron, otherwise test `.is_neuron`"
)


def _compared_with_is_cuda(node: cst.Attribute, parent: cst.CSTNode | None) -> bool:
    def flag(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Attribute) and expr.attr.value == "is_cuda"

    if isinstance(parent, cst.Comparison) and len(parent.comparisons) == 1:
        return flag(parent.left) and flag(parent.comparisons[0].comparator)
    return False


class IsCudaAttribute(Rule):
    """
    ## What it does
    Rewrites ``x.is_cuda`` to ``x.is_neuron``. With ``--target accelerator`` it becomes
    ``x.device.type == getattr(torch.accelerator.current_accelerator(), "type", "no accelerator")``
    (false on a machine without an accelerator, as ``is_cuda`` is there).

    ## Why is this bad?
    On Trainium ``is_cuda`` is always false, so every check built on it takes the CPU path.
    TorchNeuron generates ``is_neuron`` for tensors, modules and storages.

    ## Example
    ```python
    pin = batch.is_cuda
    ```
    becomes
    ```python
    pin = batch.is_neuron
    ```

    ## Fix safety
    As for device comparisons (CN103): safe where the flag selects data (assigned, passed,
    asserted, or a data move such as ``t.to(rank) if not t.is_cuda else t``); unsafe as the test
    of a branch that calls torch; display-only as the test of a branch that calls anything else
    (a CUDA-only kernel whose pure-PyTorch fallback is what Neuron needs) or of a test that an
    optional library is present (``if flash_attn_func is not None and q.is_cuda``); untouched
    where it feeds
    ``fused=``. ``a.is_cuda != b.is_cuda`` is safe anywhere: both sides change together.
    Attributes resolved to a module (``utils.is_cuda``) and assignments to a project's own
    ``self.is_cuda`` are left alone.
    """

    code = "CN104"
    name = "is-cuda-attribute"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE, Safety.DISPLAY_ONLY})
    triggers = ("is_cuda",)
    emits = ("torch.accelerator.current_accelerator",)
    VALID = (
        "x.is_neuron\n",
        "from utils import is_cuda\nif is_cuda:\n    pass\n",
        "import utils\nflag = utils.is_cuda\n",
        "self.is_cuda = True\n",
        "def is_cuda(x):\n    return False\n",
    )
    INVALID = (
        Invalid("pin = batch.is_cuda\n", "pin = batch.is_neuron\n"),
        Invalid("assert x.is_cuda, 'expected a device tensor'\n", "assert x.is_neuron, 'expected a device tensor'\n"),
        Invalid("loader = make(pin_memory=not x.is_cuda)\n", "loader = make(pin_memory=not x.is_neuron)\n"),
        Invalid(
            "import torch\nif x.is_cuda:\n    torch.cuda.synchronize()\n",
            "import torch\nif x.is_neuron:\n    torch.cuda.synchronize()\n",
            unsafe=True,
        ),
        Invalid("if x.is_cuda:\n    y = ext.fused(x)\n", None, unsafe=True),  # guards a CUDA kernel: advice only
        # an optional CUDA-only library's guard: False on Neuron picks the fallback
        Invalid("if flash_attn_func is not None and q.is_cuda:\n    kind = \"flash_attn\"\n", None, unsafe=True),
        Invalid("if HAS_TRITON and x.is_cuda:\n    y = 1\n", None, unsafe=True),
        Invalid("y = ext.fused(x) if x.is_cuda else ref(x)\n", None),
        # input checks and gates of a CUDA-only kernel keep their meaning (False on Neuron)
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
            "def run(x):\n    assert x.is_cuda, 'All tensors must be on CUDA'\n    _k[(1,)](x)\n"
        ),
        Invalid(
            "import selective_scan_cuda\n\ndef scan(u):\n    if not u.is_cuda:\n        raise ValueError('cuda only')\n"
            "    return selective_scan_cuda.fwd(u)\n"
        ),
        # an early exit inside a `with` keeps the launch after the block off Trainium too
        Invalid(
            "import torch\nimport triton\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
            "def run(x):\n    with torch.no_grad():\n        if not x.is_cuda:\n            return x\n    _k[(1,)](x)\n"
        ),
        Invalid(
            "from causal_conv1d import causal_conv1d_fn\n\ndef f(q, k):\n    use_kernel = q.is_cuda and k.is_cuda\n"
            "    if use_kernel:\n        return causal_conv1d_fn(q, k)\n    return q\n"
        ),
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
            "def _fast(x):\n    return x.is_cuda\n\n"
            "def run(x):\n    if _fast(x):\n        _k[(1,)](x)\n    return x\n"
        ),
        Invalid(
            "from .ops.norm import rms_norm\n\ndef f(x, w):\n    return rms_norm(x, w) if x.is_cuda else x * w\n",
            path="pkg/model.py",
            options=(("project", ProjectFacts(kernel_modules=frozenset({"pkg.ops.norm"}))),),
        ),
        # An early exit taken on the GPU only (the device model: `is_cuda` is False on Trainium)
        # keeps nothing off Trainium: the extension after it is the host tensors' path, and the
        # port must go on rejecting device tensors as the original did.
        Invalid(
            "from .ops import cpu_adam\n\ndef step(p):\n    if p.is_cuda:\n"
            "        raise NotImplementedError('host tensors only')\n    cpu_adam.step(p)\n",
            "from .ops import cpu_adam\n\ndef step(p):\n    if p.is_neuron:\n"
            "        raise NotImplementedError('host tensors only')\n    cpu_adam.step(p)\n",
            path="pkg/optim.py",
            options=(("project", ProjectFacts(extension_modules=frozenset({"pkg.ops.cpu_adam"}))),),
        ),
        Invalid(
            "if a.is_cuda != b.is_cuda:\n    a = a.to(b.device)\n",
            "if a.is_neuron != b.is_neuron:\n    a = a.to(b.device)\n",
        ),
        Invalid(
            "batch = tuple(t.to(rank) if not t.is_cuda else t for t in batch)\n",
            "batch = tuple(t.to(rank) if not t.is_neuron else t for t in batch)\n",
        ),
        Invalid(
            "import torch\npin = batch.is_cuda\n",
            'import torch\npin = (batch.device.type == getattr(torch.accelerator.current_accelerator(), "type", "no accelerator"))\n',
            target="accelerator",
        ),
    )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "is_cuda":
            return
        if self.qualname(node) is not None:
            return  # a module attribute (utils.is_cuda), not the tensor property
        parent = self.context.parent
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            return  # the project's own attribute being defined
        # Retargeting would send neuron tensors into a CUDA-only kernel: False on Neuron is
        # the meaning to keep (a validation fails loudly, a dispatch takes its fallback).
        if report_kernel_gate(self, node, lambda kernel: f"`.is_cuda` guards CUDA-only code: {kernel}"):
            return
        if self.context.settings.target == NEURON:
            replacement: cst.BaseExpression = node.with_changes(attr=cst.Name("is_neuron"))
            imports: tuple = ()
        else:
            built = compared_type_expr(self)
            if built is None:
                self.report(
                    node,
                    "`.is_cuda` tests for a CUDA device",
                    guidance="test `x.device.type` against the accelerator's type",
                    depends=selected_code(self.context.ancestors, node), needs=opened_code(self.context.ancestors, node),
                )
                return
            type_expr, imports = built
            replacement = cst.Comparison(
                left=cst.Attribute(value=cst.Attribute(value=node.value, attr=cst.Name("device")), attr=cst.Name("type")),
                comparisons=[cst.ComparisonTarget(operator=cst.Equal(), comparator=type_expr)],
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            )
        safety = comparison_safety(Use(UseKind.COMPARISON, node, tuple(self.context.ancestors)), self)
        if safety is None:
            return  # feeds fused=: False on Neuron is right
        if _compared_with_is_cuda(node, self.context.parent):
            # a.is_cuda != b.is_cuda: both sides change together, the answer cannot change.
            safety = Safety.SAFE
        self.report(
            node,
            "`.is_cuda` tests for a CUDA device",
            replacement=replacement,
            safety=safety,
            imports=imports,
            guidance="" if safety is Safety.SAFE else _GUIDANCE,
            effort={Safety.SAFE: Effort.NONE, Safety.UNSAFE: Effort.LOW}.get(safety, Effort.MEDIUM),
            description="test for the target device",
            depends=selected_code(self.context.ancestors, node), needs=opened_code(self.context.ancestors, node),
        )
