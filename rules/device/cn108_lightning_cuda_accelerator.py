"""CN108: a Lightning Trainer or Fabric told to run on CUDA (``accelerator="cuda"`` / ``"gpu"``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.args import arg_by_name
from .._shared.strings import string_value

__all__ = ["LightningCudaAccelerator"]

# Lightning's entry points that take an ``accelerator=``, under every package name Lightning
# ships as (the unified ``lightning`` package and the standalone ones) and their defining modules.
_ENTRY_POINTS = frozenset(
    {
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
        "lightning.pytorch.trainer.Trainer",
        "lightning.pytorch.trainer.trainer.Trainer",
        "pytorch_lightning.Trainer",
        "pytorch_lightning.trainer.Trainer",
        "pytorch_lightning.trainer.trainer.Trainer",
        "lightning.Fabric",
        "lightning.fabric.Fabric",
        "lightning.fabric.fabric.Fabric",
        "lightning_fabric.Fabric",
        "lightning_fabric.fabric.Fabric",
    }
)
# Lightning's names for its CUDA accelerator.
_CUDA_NAMES = frozenset({"cuda", "gpu"})
_GUIDANCE = (
    "Lightning's built-in accelerators do not include the neuron device: run this loop on "
    'torch.device("neuron") in plain PyTorch, or give Lightning an Accelerator of your own for it'
)


class LightningCudaAccelerator(Rule):
    """
    ## What it does
    Reports ``accelerator="cuda"`` and ``accelerator="gpu"`` passed to a Lightning ``Trainer``
    or ``Fabric`` (``lightning``, ``lightning.pytorch``, ``pytorch_lightning``,
    ``lightning_fabric``), also as a branch of ``"cuda" if ok else "cpu"``. The name is resolved
    through imports and aliases (``import lightning as L``, then ``L.Fabric(...)``).

    ## Why is this bad?
    Lightning picks the device itself from that string: with ``"cuda"`` or ``"gpu"`` it needs CUDA,
    and no built-in Lightning accelerator drives TorchNeuron's ``"neuron"`` device. The rest of
    the port (device strings, AMP, NCCL) can be right while the Trainer still stops at start on
    Trainium, so the line needs a decision of its own.

    ## Example
    ```python
    trainer = L.Trainer(accelerator="cuda", devices=4)
    ```
    is reported: the loop runs on ``torch.device("neuron")`` in plain PyTorch, or Lightning gets
    an ``Accelerator`` written for that device.

    ## Fix safety
    Report only: no accelerator name in Lightning means the neuron device, and the target API has
    none to write. ``"auto"``, ``"cpu"`` and a project's own ``Trainer`` are left alone.
    """

    code = "CN108"
    name = "lightning-cuda-accelerator"
    triggers = ("accelerator",)
    VALID = (
        'import lightning as L\ntrainer = L.Trainer(accelerator="cpu")\n',
        'import lightning as L\nfabric = L.Fabric(accelerator="auto", devices=1)\n',
        # A project's own Trainer with an accelerator option is not Lightning's.
        'from mylib import Trainer\nt = Trainer(accelerator="cuda")\n',
        # The word in a string that is not the accelerator argument.
        'import lightning as L\nL.Trainer(logger="cuda")\n',
    )
    INVALID = (
        Invalid('import lightning as L\ntrainer = L.Trainer(accelerator="cuda", devices=4)\n'),
        Invalid('from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator="gpu")\n'),
        Invalid('from lightning.fabric import Fabric\nf = Fabric(accelerator="cuda" if gpu else "cpu")\n'),
        Invalid('import lightning_fabric\nf = lightning_fabric.Fabric(accelerator="gpu", strategy="ddp")\n'),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Every entry point is reached through an import of a Lightning package, so the code
        # holds "lightning"; without it the word is Accelerate's `accelerator` object, a
        # `require_torch_accelerator` decorator or `torch.accelerator` (diffusers: 126 files).
        return b"lightning" in code

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualname(node.func) not in _ENTRY_POINTS:
            return
        arg = arg_by_name(node, "accelerator")
        if arg is None:
            return
        for literal in _literals(arg.value):
            if (string_value(literal) or "").lower() in _CUDA_NAMES:
                callee = self.context.code(node.func)
                # Reported at the call (no fix, so no rebuild needs the literal's own chain).
                self.report(
                    node,
                    f"`{callee}(accelerator={self.context.code(literal)})` runs on CUDA only",
                    guidance=_GUIDANCE,
                    effort=Effort.MEDIUM,
                )
                return


def _literals(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The strings ``value`` may evaluate to: itself, or the branches of ``a if c else b``."""
    if isinstance(value, cst.IfExp):
        return _literals(value.body) + _literals(value.orelse)
    if isinstance(value, cst.SimpleString):
        return [value]
    return []
