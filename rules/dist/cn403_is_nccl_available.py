"""CN403: ``dist.is_nccl_available()`` asks about the CUDA backend."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Invalid, Rule, Safety, Valid

from ._helpers import ACCELERATOR_BACKEND_EMITS, backend_expr

__all__ = ["IsNcclAvailable"]

_QUALNAMES = frozenset(
    {"torch.distributed.is_nccl_available", "torch.distributed.distributed_c10d.is_nccl_available"}
)


class IsNcclAvailable(Rule):
    """
    ## What it does
    Rewrites ``is_nccl_available()`` to ``is_backend_available("neuron")``.

    Both live in ``torch.distributed``; aliases and from-imports are followed.

    ## Why is this bad?
    On Trainium NCCL is never available, so code such as
    ``backend = "nccl" if dist.is_nccl_available() else "gloo"`` silently falls back to gloo
    (CPU collectives) after the backend name itself was ported. The question the code means to
    ask is "is the accelerator's backend available?", which ``is_backend_available`` answers for
    any registered backend, ``"neuron"`` included.

    ## Example
    ```python
    backend = "nccl" if dist.is_nccl_available() else "gloo"
    ```
    becomes (together with CN401)
    ```python
    backend = "neuron" if dist.is_backend_available("neuron") else "gloo"
    ```
    With ``--target accelerator`` the argument is the accelerator's default backend
    (``dist.get_default_backend_for_device(torch.accelerator.current_accelerator() or "cpu")``,
    torch >= 2.6).

    ## Fix safety
    Safe: both functions answer whether a process-group backend can be created; only the backend
    asked about changes, to the one the port uses. ``is_backend_available`` exists in the torch
    versions TorchNeuron supports (>= 2.10).
    """

    code = "CN403"
    name = "is-nccl-available"
    fixes = frozenset({Safety.SAFE})
    triggers = ("is_nccl_available",)
    emits = ("torch.distributed.is_backend_available", *ACCELERATOR_BACKEND_EMITS)
    VALID = (
        'import torch.distributed as dist\ndist.is_backend_available("neuron")\n',
        "def is_nccl_available():\n    return False\nis_nccl_available()\n",  # the project's own helper
        "import torch.distributed as dist\ndist.is_gloo_available()\n",
        Valid("import torch.distributed as dist\ndist.is_backend_available('gloo')\n", target="accelerator"),
    )
    INVALID = (
        Invalid(
            "import torch.distributed as dist\nok = dist.is_nccl_available()\n",
            'import torch.distributed as dist\nok = dist.is_backend_available("neuron")\n',
        ),
        Invalid(
            "import torch\nif torch.distributed.is_nccl_available():\n    pass\n",
            'import torch\nif torch.distributed.is_backend_available("neuron"):\n    pass\n',
        ),
        Invalid(
            "from torch.distributed import is_nccl_available\nok = is_nccl_available()\n",
            'import torch\n\nok = torch.distributed.is_backend_available("neuron")\n',
        ),
        Invalid(
            "import torch.distributed as dist\nok = dist.is_nccl_available()\n",
            "import torch.distributed as dist\nimport torch\n\nok = dist.is_backend_available("
            'dist.get_default_backend_for_device(torch.accelerator.current_accelerator() or "cpu"))\n',
            target="accelerator",
        ),
        # report-only where the target cannot say it (torch < 2.6)
        Invalid(
            "import torch.distributed as dist\nok = dist.is_nccl_available()\n",
            target="accelerator",
            options=(("min_torch", (2, 5)),),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if name != "is_nccl_available" or self.qualname(func) not in _QUALNAMES:
            return
        message = "`is_nccl_available()` is always False on Trainium"
        guidance = 'Ask `torch.distributed.is_backend_available("neuron")` instead.'
        spelled = self.spell("torch.distributed.is_backend_available")
        backend = backend_expr(self)
        if spelled is None or backend is None:
            self.report(node, message, guidance=guidance)
            return
        (new_func, imports), (arg, more) = spelled, backend
        self.report(
            node,
            message,
            replacement=cst.Call(func=new_func, args=[cst.Arg(arg)], lpar=node.lpar, rpar=node.rpar),
            safety=Safety.SAFE,
            imports=tuple(dict.fromkeys(imports + more)),
            # Only a from-import can be left unused; asking for the removal otherwise would cost
            # a full scope analysis of the file for nothing.
            unused_imports=(("torch.distributed", "is_nccl_available"),) if isinstance(func, cst.Name) else (),
            description="ask whether the target's backend is available",
        )
