"""CN609: forcing CUDA attention kernels (``sdp_kernel`` / ``sdpa_kernel`` / ``enable_*_sdp``)."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.names import call_qualname, terminal_name
from .._shared.strings import string_value

__all__ = ["SdpaKernelSelection"]

_CONTEXTS = frozenset({"torch.backends.cuda.sdp_kernel", "torch.nn.attention.sdpa_kernel"})
_SWITCHES = frozenset(
    {
        "torch.backends.cuda.enable_flash_sdp",
        "torch.backends.cuda.enable_mem_efficient_sdp",
        "torch.backends.cuda.enable_math_sdp",
        "torch.backends.cuda.enable_cudnn_sdp",
    }
)
# Whether one of CUDA's kernels could run these inputs (tests asserting the kernel picked).
_CHECKS = frozenset(
    {
        "torch.backends.cuda.can_use_flash_attention",
        "torch.backends.cuda.can_use_efficient_attention",
        "torch.backends.cuda.can_use_cudnn_attention",
        "torch.backends.cuda.SDPAParams",
    }
)
_NAMES = frozenset({q.rsplit(".", 1)[1] for q in _CONTEXTS | _SWITCHES | _CHECKS})
# CUDA's kernels named outside a selection call (torchtitan keeps a list of backends for later
# `sdpa_kernel(backends)`), and the private ops of the cuDNN and memory-efficient kernels named
# in op lists (activation-checkpoint policies).
_CUDA_BACKENDS = frozenset(
    f"torch.nn.attention.SDPBackend.{m}" for m in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
)
_CUDA_OPS = frozenset(
    f"torch.ops.aten._scaled_dot_product_{kernel}_attention{part}"
    for kernel in ("cudnn", "efficient")
    for part in ("", "_backward")
)
# The same ops named by a string (`(torch.ops.aten, "_scaled_dot_product_cudnn_attention_backward")`
# in xformers' FLOP counter, `getattr(torch.ops.aten, name)`): the op's last name.
_CUDA_OP_NAMES = frozenset(q.rpartition(".")[2] for q in _CUDA_OPS)
# What every report of the visitor needs written in the file (identifiers are kept as written, and
# a qualified name is spelled by the import it resolves through): a selection, switch or check
# called by its name, `SDPBackend` (its kernels' qualified names), a private op's attribute. A
# string naming an op may spell it with escapes, so strings are read from the ast (`detect`).
_MAY_REPORT = re.compile("|".join(sorted({"SDPBackend", "_scaled_dot_product_", *_NAMES})))
_NAMED_GUIDANCE = (
    "On Neuron scaled_dot_product_attention runs its own kernel, none of CUDA's: a selection built "
    "from this list leaves it no kernel, and an op list (activation-checkpoint policies) naming "
    "CUDA's op never matches there. Drop the CUDA kernels from the list on the Trainium path."
)
_CHECK_GUIDANCE = (
    "These ask whether one of CUDA's SDPA kernels accepts the inputs; on Neuron none does, so an "
    "assertion on them fails and a branch on them takes its fallback. Test the attention's "
    "output instead, or keep the check on the CUDA path."
)
_GUIDANCE = (
    "These switches pick among CUDA's SDPA kernels (flash, memory-efficient, cuDNN, math); on "
    "Neuron scaled_dot_product_attention dispatches to its own NKI kernel and a restriction to "
    "CUDA kernels leaves it none. Remove the selection (keep the with-body)."
)


class SdpaKernelSelection(Rule):
    """
    ## What it does
    Replaces ``torch.backends.cuda.sdp_kernel(...)`` / ``torch.nn.attention.sdpa_kernel(...)``
    context managers by ``contextlib.nullcontext()`` and removes
    ``torch.backends.cuda.enable_flash_sdp(...)``-style switch statements. CUDA's kernels named
    elsewhere (``[SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]`` kept for a later
    selection, ``torch.ops.aten._scaled_dot_product_cudnn_attention`` in an op list, or the op's
    name as a string looked up on ``torch.ops.aten``) are reported,
    and so are the checks whether a CUDA kernel accepts given inputs
    (``can_use_flash_attention(SDPAParams(q, k, v, ...), debug)``, litgpt's tests).

    ## Why is this bad?
    They restrict ``scaled_dot_product_attention`` to CUDA kernels. The neuron device has its
    own attention kernel, which such a restriction excludes ("no available kernel").

    ## Example
    ```python
    with torch.backends.cuda.sdp_kernel(enable_math=False):
        y = F.scaled_dot_product_attention(q, k, v)
    ```
    becomes
    ```python
    with contextlib.nullcontext():
        y = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Fix safety
    Unsafe: the attention kernel that runs changes, and kernels differ in rounding (and the user
    may have chosen the math kernel for reproducibility). ``nullcontext`` keeps the block's
    shape; delete the ``with`` by hand if you prefer. With ``--target accelerator`` the selection
    still matters on CUDA: reported only.
    """

    code = "CN609"
    name = "sdpa-kernel-selection"
    fixes = frozenset({Safety.UNSAFE})
    triggers = ("sdp", "SDPBackend", "_scaled_dot_product_", "backends.cuda")
    emits = ("contextlib.nullcontext",)
    VALID = (
        "import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n",
        "import torch\nok = torch.backends.cuda.flash_sdp_enabled()\n",
        "from torch.nn.attention import SDPBackend\nbackends = [SDPBackend.MATH]\n",
        "import torch\nops = [(torch.ops.aten, '_scaled_dot_product_flash_attention_for_cpu', True)]\n",
    )
    INVALID = (
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_math=False):\n    y = f(q)\n",
            "import torch\nimport contextlib\n\nwith contextlib.nullcontext():\n    y = f(q)\n",
            unsafe=True,
        ),
        Invalid(
            "from torch.nn.attention import SDPBackend, sdpa_kernel\n"
            "with sdpa_kernel(SDPBackend.FLASH_ATTENTION):\n    y = f(q)\n",
            "import contextlib\n\nwith contextlib.nullcontext():\n    y = f(q)\n",
            unsafe=True,
        ),
        Invalid(
            "from torch.nn.attention import SDPBackend, sdpa_kernel\n\n"
            "@sdpa_kernel(SDPBackend.MATH)\ndef attend(q):\n    return q\n"
        ),
        Invalid(
            "import torch\ntorch.backends.cuda.enable_flash_sdp(False)\ny = 1\n",
            "import torch\ny = 1\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_math=False):\n    y = f(q)\n",
            target="accelerator",
        ),
        # torchtitan: the backends kept for a later sdpa_kernel(...), and an op-list entry.
        Invalid("from torch.nn.attention import SDPBackend\nbackends = [SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]\n"),
        Invalid("import torch\nsave = {torch.ops.aten._scaled_dot_product_cudnn_attention.default}\n"),
        # xformers' FLOP counter: the op by name, looked up on torch.ops.aten.
        Invalid("import torch\nops = [(torch.ops.aten, '_scaled_dot_product_cudnn_attention_backward', True)]\n"),
        Invalid(
            "from torch.backends.cuda import SDPAParams, can_use_flash_attention\n"
            "params = SDPAParams(q, k, v, None, 0.0, True)\nassert can_use_flash_attention(params, True)\n"
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """No finding where the file writes none of ``_MAY_REPORT`` and no string holds an op's
        name (``visit_SimpleString`` needs "_attention" in the literal as written); unsure
        elsewhere (libcst runs)."""
        if _MAY_REPORT.search(file.text):
            return None
        if "_attention" in file.text and any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and any(op in n.value for op in _CUDA_OP_NAMES)
            for n in ast.walk(file.tree)
        ):
            return None
        return []

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        name = string_value(node) if "_attention" in node.value else None
        if name in _CUDA_OP_NAMES:
            self.report(node, f'`"{name}"` names a CUDA-only attention op', guidance=_NAMED_GUIDANCE, effort=Effort.LOW)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        if attr.endswith("_ATTENTION"):
            if self.qualname(node) in _CUDA_BACKENDS and not self._inside_selection():
                self.report(node, f"`SDPBackend.{attr}` names a CUDA attention kernel", guidance=_NAMED_GUIDANCE, effort=Effort.LOW)
        elif attr.startswith("_scaled_dot_product_"):
            if self.qualname(node) in _CUDA_OPS:
                self.report(node, f"`{attr}` is a CUDA-only attention op", guidance=_NAMED_GUIDANCE, effort=Effort.LOW)

    def _inside_selection(self) -> bool:
        """Inside the arguments of sdpa_kernel(...), which visit_Call reports as a whole."""
        for anc in reversed(self.context.ancestors):
            if isinstance(anc, cst.Call) and terminal_name(anc.func) in _NAMES and call_qualname(self, anc) in _CONTEXTS:
                return True
            if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def visit_Call(self, node: cst.Call) -> None:
        if terminal_name(node.func) not in _NAMES:
            return
        qualified = call_qualname(self, node)
        if qualified in _CONTEXTS:
            self._context(node, qualified)
        elif qualified in _SWITCHES:
            self._switch(node, qualified)
        elif qualified in _CHECKS:
            name = qualified.rsplit(".", 1)[1]
            what = "builds the inputs of CUDA's kernel checks" if name == "SDPAParams" else "asks whether a CUDA attention kernel can run"
            self.report(node, f"`{name}` {what}", guidance=_CHECK_GUIDANCE, effort=Effort.LOW)

    def _context(self, node: cst.Call, qualified: str) -> None:
        message = f"`{qualified.rsplit('.', 1)[1]}` restricts attention to CUDA kernels"
        spelled = self.spell("contextlib.nullcontext")
        # `@sdpa_kernel(...)` as a decorator: nullcontext is no decorator, so only report.
        decorator = isinstance(self.context.parent, cst.Decorator)
        if self.context.settings.target != "neuron" or spelled is None or decorator:
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
            return
        func, imports = spelled
        module, _, name = qualified.rpartition(".")
        self.report(
            node,
            message,
            replacement=cst.Call(func=func),
            safety=Safety.UNSAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            imports=imports,
            unused_imports=((module, name), ("torch.nn.attention", "SDPBackend")),
            description="no CUDA kernel selection",
        )

    def _switch(self, node: cst.Call, qualified: str) -> None:
        message = f"`{qualified.rsplit('.', 1)[1]}` toggles a CUDA attention kernel"
        line = self.context.ancestors[-2] if len(self.context.ancestors) >= 2 else None
        statement_alone = (
            isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and isinstance(line.body[0], cst.Expr)
            and line.body[0].value is node
        )
        if self.context.settings.target != "neuron" or not statement_alone:
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
            return
        assert line is not None
        self.report(
            line,
            message,
            replacement=cst.RemovalSentinel.REMOVE,
            safety=Safety.UNSAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            description="remove the CUDA kernel switch",
            # The statement line is two levels up (line > Expr > Call): its own ancestors.
            ancestors=self.context.ancestors[:-2],
        )
