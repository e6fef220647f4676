"""CN618: compiled kernels downloaded from the Hugging Face hub (the ``kernels`` package)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, ProjectFacts, Rule, Valid

from .._shared.kernels import HUB_LOADERS, kernel_index
from .._shared.names import call_qualname
from .._shared.packages import in_package

__all__ = ["KernelHub"]

_GUIDANCE = (
    "Hub kernels are prebuilt CUDA (or ROCm/Metal) binaries chosen for the GPU found at run time; "
    "none is built for Trainium. Call the plain PyTorch code the kernel replaces for neuron "
    "tensors (most hub kernels mirror a torch layer: an activation, RMSNorm, attention), or an NKI "
    "kernel registered with torch_neuronx.nki_op."
)


class KernelHub(Rule):
    """
    ## What it does
    Reports kernels fetched from the Hugging Face hub with the ``kernels`` package:
    ``get_kernel("kernels-community/activation")`` (the handle it returns is named), every call
    made through that handle (``ops.gelu_fast(out, x)``, ``self._na3d(q, k, v)``), and
    ``kernels.use_kernel_forward_from_hub`` / ``kernelize`` that swap a layer's ``forward`` for
    a hub kernel.

    ## Why is this bad?
    ``get_kernel`` downloads a compiled binary for the CUDA device and torch build it finds; on a
    Trainium host there is none to download, and a handle's functions expect CUDA tensors.

    ## Example
    ```python
    from kernels import get_kernel
    activation = get_kernel("kernels-community/activation")
    activation.gelu_fast(y, x)
    ```

    ## Fix safety
    No fix: each call is replaced by the torch code it stands for (effort high at the download,
    medium per call). A project's own package named ``kernels`` is left alone.
    """

    code = "CN618"
    name = "kernel-hub"
    triggers = ("get_kernel", "get_local_kernel", "load_kernel", "kernelize", "use_kernel_forward_from_hub")
    VALID = (
        "kernel = conv.get_kernel()\n",  # a method of the user's own class
        Valid(
            "from kernels import get_kernel\nk = get_kernel('x')\n",
            options=(("project", ProjectFacts(own_packages=frozenset({"kernels"}))),),
        ),
    )
    INVALID = (
        Invalid("from kernels import get_kernel\nactivation = get_kernel('kernels-community/activation')\nactivation.gelu_fast(y, x)\n"),
        Invalid(
            "import kernels\n\nclass Up:\n    def __init__(self):\n        self._op = kernels.get_kernel('org/natten').na3d\n\n"
            "    def forward(self, q):\n        return self._op(q)\n"
        ),
        Invalid("from kernels import use_kernel_forward_from_hub\n\n@use_kernel_forward_from_hub('RMSNorm')\nclass RMSNorm:\n    pass\n"),
    )

    def _hub_api(self, qualified: str | None) -> bool:
        return in_package(qualified, ("kernels",)) and not self.context.settings.project.own_module("kernels")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if self._hub_api(qualified):
            if qualified in HUB_LOADERS:
                repo = node.args[0].value if node.args else None
                label = repo.value if isinstance(repo, cst.SimpleString) else "a hub repository"
                message = f"`{qualified}({label})` downloads a compiled CUDA kernel from the hub"
            else:
                message = f"`{qualified}` swaps in compiled CUDA kernels from the hub"
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.HIGH)
            return
        if self.context.settings.project.own_module("kernels"):
            return
        handle = kernel_index(self).hub_handle(node.func)
        if handle is not None:
            self.report(
                node,
                f"`{handle}` holds a hub kernel (kernels.get_kernel): this call runs CUDA code",
                guidance=_GUIDANCE,
                effort=Effort.MEDIUM,
            )

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if isinstance(node.decorator, cst.Call):
            return  # `@use_kernel_forward_from_hub("RMSNorm")` is a call: visit_Call reports it
        qualified = self.qualname(node.decorator)
        if self._hub_api(qualified) and qualified not in HUB_LOADERS:
            self.report(node, f"`@{qualified}` replaces the layer's forward with a hub CUDA kernel", guidance=_GUIDANCE, effort=Effort.HIGH)
