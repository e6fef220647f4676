"""CN609: forcing CUDA attention kernels (``sdp_kernel`` / ``sdpa_kernel`` / ``enable_*_sdp``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.names import call_qualname, terminal_name

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
_NAMES = frozenset({q.rsplit(".", 1)[1] for q in _CONTEXTS | _SWITCHES})
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
    ``torch.backends.cuda.enable_flash_sdp(...)``-style switch statements.

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
    triggers = ("sdp",)
    emits = ("contextlib.nullcontext",)
    VALID = (
        "import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n",
        "import torch\nok = torch.backends.cuda.flash_sdp_enabled()\n",
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
    )

    def visit_Call(self, node: cst.Call) -> None:
        if terminal_name(node.func) not in _NAMES:
            return
        qualified = call_qualname(self, node)
        if qualified in _CONTEXTS:
            self._context(node, qualified)
        elif qualified in _SWITCHES:
            self._switch(node, qualified)

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
