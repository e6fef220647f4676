"""CN614: private ``torch.cuda._*`` and ``torch._C._cuda*`` APIs."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.kernels import cuda_operator
from .._shared.args import positional_args
from .._shared.strings import string_value

__all__ = ["PrivateCudaApi"]

_GUIDANCE = (
    "Private CUDA internals have no Neuron counterpart (torch.neuron exposes only the public "
    "names). Use the public API (torch.neuron.* / torch.accelerator.*) or remove the call; "
    "_lazy_call/_lazy_init hooks are unnecessary for the neuron device."
)


# Private members of torch's own classes, reached through an object the rule cannot type.
# Storages' CUDA IPC (gpt-neox's weight server shares weights with `storage._share_cuda_()`).
_IPC_MEMBERS = frozenset({"_share_cuda_", "_new_shared_cuda", "_release_ipc_counter_cuda"})
_IPC_GUIDANCE = (
    "CUDA IPC hands a CUDA allocation to another process; neuron tensors have no IPC handle. Share "
    "the weights another way (torch.multiprocessing with CPU tensors, a checkpoint file, or "
    "collectives between the processes)."
)
# torch.optim.Optimizer's check that a CUDA graph capture is safe (timm's optimizers call it when
# the newer `_accelerator_graph_capture_health_check` is missing).
_CAPTURE_CHECK = "_cuda_graph_capture_health_check"
_CAPTURE_GUIDANCE = (
    "Nothing to do on Trainium: with no CUDA graph being captured the check returns at once. "
    "torch >= 2.9 names it `_accelerator_graph_capture_health_check`; calling that one where it "
    "exists keeps the port free of CUDA names."
)


class PrivateCudaApi(Rule):
    """
    ## What it does
    Reports uses of private CUDA internals: ``torch.cuda._lazy_call``, ``torch.cuda._sleep``,
    ``torch.cuda._utils._get_device_index``, ``torch._C._cuda_getDevice``,
    ``torch._C._cudart`` and the rest, also when named by a string:
    ``hasattr(torch._C, "_cuda_clearCublasWorkspaces")`` / ``getattr(torch._C, "_cuda_getDevice")``;
    and the private CUDA members of torch's classes, on whatever object holds them: a storage's
    CUDA IPC (``storage._share_cuda_()``, ``_new_shared_cuda``, ``_release_ipc_counter_cuda``) and
    the optimizer's ``self._cuda_graph_capture_health_check()``.

    ## Why is this bad?
    They reach into the CUDA runtime binding; the neuron device module implements the public
    surface only, so these names do not exist after a rename and there is nothing to rename to.

    ## Example
    ```python
    torch.cuda._lazy_call(lambda: torch.cuda.manual_seed_all(seed))
    ```
    could become ``torch.neuron.manual_seed_all(seed)``.

    ## Fix safety
    No fix: each private call needs a decision about what it was for.
    """

    code = "CN614"
    name = "private-cuda-api"
    # `cuda, "_` is the string probe of torch.cuda itself (Lightning's
    # `getattr(torch.cuda, "_is_in_bad_fork", None)`): its private name need not start with _cuda.
    triggers = (
        "cuda._", "_C._cuda", "_C._nccl", "torch.cuda import", '"_cuda', "'_cuda", '"_nccl', "'_nccl",
        'cuda, "_', "cuda, '_", "_share_cuda_", "_shared_cuda", "_counter_cuda", "_cuda_graph_capture",
        "cudnn_",  # an operator looked up by name: "aten::cudnn_convolution_backward_weight"
    )  # fmt: skip
    VALID = (
        "import torch\ntorch.cuda.synchronize()\n",
        "import torch\nn = torch._C._get_tracing_state()\n",
        "import mylib\nmylib.cuda._helper()\n",
        # A public name probed by string, and a private name of another object.
        "import torch\nok = hasattr(torch.cuda, 'is_available')\n",
        "ok = hasattr(cfg, '_cuda_graphs')\n",
    )
    INVALID = (
        Invalid("import torch\ntorch.cuda._lazy_call(cb)\n"),
        Invalid("import torch\nd = torch._C._cuda_getDevice()\n"),
        Invalid("from torch.cuda import _sleep\n_sleep(100)\n"),
        Invalid("import torch\ni = torch.cuda._utils._get_device_index(dev)\n"),
        # A guard by name: the probe is false on a CPU/Neuron build only by accident of the build.
        Invalid("import torch\nif hasattr(torch._C, '_cuda_clearCublasWorkspaces'):\n    pass\n"),
        Invalid("import torch\nf = getattr(torch._C, '_cuda_getDevice', None)\n"),
        Invalid("import torch\nop = torch._C._jit_get_operation('aten::cudnn_convolution_backward_weight')\n"),
        # A private name of torch.cuda itself that no other trigger word spells.
        Invalid('import torch\nbad = getattr(torch.cuda, "_is_in_bad_fork", None)\n'),
        Invalid("import torch.cuda\nok = hasattr(torch.cuda, '_is_in_bad_fork')\n"),
        Invalid("(device, handle, size, *rest) = storage._share_cuda_()\n"),
        Invalid("s = torch.UntypedStorage._new_shared_cuda(*handle)\n"),
        Invalid(
            "class AdamW(Optimizer):\n    def step(self):\n"
            "        if hasattr(self, '_cuda_graph_capture_health_check'):\n"
            "            self._cuda_graph_capture_health_check()\n",
            target="accelerator",
        ),
    )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        if not attr.startswith("_"):
            return
        if attr in _IPC_MEMBERS or attr == _CAPTURE_CHECK:
            self._member(node, attr)
            return
        qualified = self.qualname(node)
        if qualified is None or not _private_cuda(qualified):
            return
        if _private_cuda(qualified.rsplit(".", 1)[0]):
            # Report the first private segment only: `torch.cuda._utils._get_device_index` once.
            return
        self._report(node, qualified)

    def visit_Call(self, node: cst.Call) -> None:
        # hasattr(torch._C, "_cuda_x") / getattr(torch.cuda, "_x", None): the private name is a
        # string, so no attribute resolves; the object it is looked up on does.
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "_jit_get_operation":
            # `torch._C._jit_get_operation("aten::cudnn_convolution_backward_weight")`
            # (StyleGAN2-ADA's conv2d_gradfix): a cuDNN operator looked up by its name.
            operator = cuda_operator(node, self.qualname(func) or "")
            if operator is not None:
                self.report(node, f"`{operator}` is a CUDA operator looked up by name (torch._C._jit_get_operation)", guidance=_GUIDANCE, effort=Effort.MEDIUM)
            return
        if not (isinstance(func, cst.Name) and func.value in ("hasattr", "getattr")):
            return
        args = positional_args(node)
        if len(args) < 2:
            return
        member = string_value(args[1].value)
        if member is None or not member.startswith("_"):
            return
        if member == _CAPTURE_CHECK:
            self._member(node, member)
            return
        owner = self.qualname(args[0].value)
        if owner not in ("torch._C", "torch.cuda") or self.context.scope.lookup(func.value) is not None:
            return
        qualified = f"{owner}.{member}"
        if _private_cuda(qualified):
            self._report(node, qualified)

    def visit_Name(self, node: cst.Name) -> None:
        if not node.value.startswith("_"):
            return
        # Only a name used on its own (`_sleep(1)` after `from torch.cuda import _sleep`): not
        # the attribute part of `torch.cuda._sleep` and not the name inside the import.
        parent = self.context.parent
        if isinstance(parent, cst.ImportAlias) or (isinstance(parent, cst.Attribute) and parent.attr is node):
            return
        # A bare name is its own qualified-name head: one scope lookup, no string building.
        qualified = self.context.scope.lookup(node.value)
        if qualified is not None and _private_cuda(qualified):
            self._report(node, qualified)

    def _member(self, node: cst.CSTNode, member: str) -> None:
        if member == _CAPTURE_CHECK:
            self.report(node, f"`{member}` is the optimizer's CUDA-graph capture check", guidance=_CAPTURE_GUIDANCE, effort=Effort.NONE)
        else:
            self.report(node, f"`{member}` is a storage's CUDA IPC", guidance=_IPC_GUIDANCE, effort=Effort.HIGH)

    def _report(self, node: cst.CSTNode, qualified: str) -> None:
        self.report(node, f"`{qualified}` is a private CUDA internal", guidance=_GUIDANCE, effort=Effort.MEDIUM)


def _private_cuda(qualified: str) -> bool:
    if qualified.startswith("torch.cuda._"):
        return True
    if qualified.startswith("torch._C._"):
        segment = qualified.split(".")[2]
        return segment.startswith(("_cuda", "_nccl", "_cudart"))
    return False
