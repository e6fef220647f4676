"""CN108: a Lightning Trainer or Fabric told to run on CUDA (``accelerator="cuda"`` / ``"gpu"``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.args import arg_by_name
from .._shared.names import is_reference
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
# Lightning 1.x's distributed modes, passed as ``accelerator=`` (before 1.5) or
# ``distributed_backend=`` (before 1.0): each runs one process per CUDA device given by ``gpus=``.
_GPU_STRATEGIES = frozenset({"dp", "ddp", "ddp2", "ddp_spawn", "ddp_sharded", "ddp_sharded_spawn", "horovod"})
# The Trainer's settings that ask for CUDA devices by count (Lightning 1.x): gpus=N / "0,1" / -1,
# auto_select_gpus=True.
_GPU_COUNTS = frozenset({"gpus", "auto_select_gpus"})
_CONFIG_GUIDANCE = (
    "Lightning 1.x asks for CUDA devices through gpus= (and runs accelerator=\"ddp\" on them); "
    "no Lightning setting selects the neuron device: run this loop on torch.device(\"neuron\") "
    "in plain PyTorch (torchrun + init_process_group(\"neuron\") for several cores), or give "
    "Lightning an Accelerator of your own for it"
)
# Lightning's CUDA accelerator class and device helpers, under every package and module that
# exports them: on a Neuron host the class counts no device and the helpers find none.
_CUDA_MEMBERS = ("CUDAAccelerator", "find_usable_cuda_devices", "num_cuda_devices", "is_cuda_available")
_CUDA_OBJECTS = frozenset(
    f"{package}.accelerators{module}.{member}"
    for package in ("lightning.fabric", "lightning.pytorch", "lightning_fabric", "pytorch_lightning")
    for module in ("", ".cuda")
    for member in _CUDA_MEMBERS
) | frozenset({"pytorch_lightning.accelerators.GPUAccelerator", "pytorch_lightning.accelerators.gpu.GPUAccelerator"})
_MEMBER_NAMES = frozenset(q.rsplit(".", 1)[1] for q in _CUDA_OBJECTS)
_OBJECT_GUIDANCE = (
    "count and pick the devices of the target instead (torch.neuron.device_count(), "
    '"neuron:N"), or give Lightning an Accelerator of your own for the neuron device'
)
_GUIDANCE = (
    "Lightning's built-in accelerators do not include the neuron device: run this loop on "
    'torch.device("neuron") in plain PyTorch, or give Lightning an Accelerator of your own for it'
)


def _takes_kwargs(call: cst.Call) -> bool:
    """``Trainer(**cfg)``: the accelerator may be in the mapping."""
    return any(a.star == "**" for a in call.args)


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

    Also reports each use of Lightning's CUDA accelerator class and its device helpers
    (``CUDAAccelerator.auto_device_count()``, ``isinstance(acc, CUDAAccelerator)``,
    ``find_usable_cuda_devices(2)``, ``num_cuda_devices()``): on a Neuron host they count no
    device, so device-count logic built on them (litgpt's ``devices="auto"``) picks none.

    Lightning 1.x selected CUDA devices by count and mode: ``gpus=`` (``2``, ``"0,1"``, ``-1``),
    ``auto_select_gpus=True``, and the distributed mode passed as ``accelerator="ddp"`` (or
    ``"dp"``, ``"ddp_spawn"``, ...; ``distributed_backend=`` before 1.0). These are reported in a
    Trainer call and where they are written into the config a Trainer is built from
    (``trainer_config["accelerator"] = "ddp"``, ``{"gpus": 1}``) in a file that imports Lightning.

    ## Example
    ```python
    trainer = L.Trainer(accelerator="cuda", devices=4)
    ```
    is reported: the loop runs on ``torch.device("neuron")`` in plain PyTorch, or Lightning gets
    an ``Accelerator`` written for that device.

    A ``Trainer`` or ``Fabric`` that leaves the choice to Lightning (no ``accelerator=``, or
    ``"auto"``, as litgpt's finetune and generate scripts do) is reported too: "auto" picks CUDA
    where it finds it and the CPU otherwise, so on Trainium the whole run silently stays on the
    host. A module written for another accelerator (it imports ``torch_xla`` or Lightning's XLA
    accelerator and strategies) is left alone.

    ## Fix safety
    Report only: no accelerator name in Lightning means the neuron device, and the target API has
    none to write. ``"cpu"``, a computed value and a project's own ``Trainer`` are left alone.
    """

    code = "CN108"
    name = "lightning-cuda-accelerator"
    # "lightning": a Trainer or Fabric that names no accelerator (Lightning chooses) says no other word.
    triggers = ("accelerator", "Accelerator", "cuda_devices", "is_cuda_available", "gpus", "distributed_backend", "lightning")
    VALID = (
        'import lightning as L\ntrainer = L.Trainer(accelerator="cpu")\n',
        # an accelerator chosen by the caller, and XLA code (another accelerator)
        'import lightning as L\n\ndef make(acc):\n    return L.Fabric(accelerator=acc, devices=1)\n',
        "import torch_xla.core.xla_model as xm\nimport lightning as L\nfabric = L.Fabric(devices=8, strategy=strategy)\n",
        # A project's own Trainer with an accelerator option is not Lightning's.
        'from mylib import Trainer\nt = Trainer(accelerator="cuda")\n',
        # The word in a string that is not the accelerator argument.
        'import lightning as L\nL.Trainer(accelerator="cpu", logger="cuda")\n',
        # No GPU asked for, and a CPU mode.
        "import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=0)\n",
        "import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=None, accelerator='ddp_cpu')\n",
        "import pytorch_lightning as pl\ncfg = {'gpus': 0}\n",
        # A project's own class of that name, and Lightning's other accelerators.
        "from mylib import CUDAAccelerator\nn = CUDAAccelerator.auto_device_count()\n",
        "from lightning.fabric.accelerators import CPUAccelerator\nn = CPUAccelerator.auto_device_count()\n",
    )
    INVALID = (
        Invalid('import lightning as L\ntrainer = L.Trainer(accelerator="cuda", devices=4)\n'),
        # litgpt's finetune scripts: Lightning chooses, and finds no CUDA on Trainium: the CPU.
        Invalid("import lightning as L\nfabric = L.Fabric(devices=devices, strategy=strategy, precision=precision)\n"),
        Invalid('import lightning as L\nfabric = L.Fabric(accelerator="auto", devices=1)\n'),
        Invalid('from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator="gpu")\n'),
        Invalid('from lightning.fabric import Fabric\nf = Fabric(accelerator="cuda" if gpu else "cpu")\n'),
        Invalid('import lightning_fabric\nf = lightning_fabric.Fabric(accelerator="gpu", strategy="ddp")\n'),
        # litgpt: the device count of "auto" comes from Lightning's CUDA accelerator.
        Invalid("from lightning.fabric.accelerators import CUDAAccelerator\nn = CUDAAccelerator.auto_device_count()\n"),
        Invalid("import lightning as L\nok = isinstance(acc, L.pytorch.accelerators.CUDAAccelerator)\n"),
        Invalid("import lightning as L\nn = L.fabric.accelerators.CUDAAccelerator.auto_device_count()\n"),
        Invalid("from lightning.fabric.accelerators.cuda import find_usable_cuda_devices\nd = find_usable_cuda_devices(2)\n"),
        Invalid("from pytorch_lightning.accelerators import GPUAccelerator\nacc = GPUAccelerator()\n"),
        # Lightning 1.x: a GPU count and the distributed mode passed as accelerator=.
        Invalid('import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=2, accelerator="ddp", max_epochs=3)\n'),
        Invalid("import pytorch_lightning as pl\ntrainer = pl.Trainer(gpus=args.gpus, auto_select_gpus=True)\n"),
        Invalid("from pytorch_lightning import Trainer\ntrainer = Trainer(distributed_backend='dp')\n"),
        # ... and written into the config the Trainer is built from.
        Invalid(
            "from pytorch_lightning.trainer import Trainer\ntrainer_config['accelerator'] = 'ddp'\n"
            "trainer = Trainer.from_argparse_args(argparse.Namespace(**trainer_config))\n"
        ),
        Invalid("import pytorch_lightning as pl\nkwargs = {'gpus': 1, 'max_steps': 10}\ntrainer = pl.Trainer(**kwargs)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Every entry point is reached through an import of a Lightning package, so the code
        # holds "lightning"; without it the word is Accelerate's `accelerator` object, a
        # `require_torch_accelerator` decorator or `torch.accelerator` (diffusers: 126 files).
        return b"lightning" in code

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _MEMBER_NAMES or isinstance(self.context.parent, (cst.ImportFrom, cst.ImportAlias)):
            return
        self._check_object(node, self.qualname(node))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in _MEMBER_NAMES:
            return
        if not is_reference(self, node):  # the head of `CUDAAccelerator.auto_device_count` is one
            return
        self._check_object(node, self.context.scope.lookup(node.value))

    def _check_object(self, node: cst.Name | cst.Attribute, qualified: str | None) -> None:
        if qualified not in _CUDA_OBJECTS:
            return
        member = qualified.rsplit(".", 1)[-1]
        self.report(
            node,
            f"`{member}` is Lightning's CUDA accelerator{'' if 'Accelerator' in member else ' helper'}: "
            "on a Neuron host it finds no device",
            guidance=_OBJECT_GUIDANCE,
            effort=Effort.LOW,
        )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if self.context.code(alias.name).split(".")[0] == "torch_xla":
                self._other_accelerator = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = self.context.code(node.module) if node.module is not None else ""
        names = () if isinstance(node.names, cst.ImportStar) else tuple(a.evaluated_name for a in node.names)
        if module.split(".")[0] == "torch_xla" or any(n.startswith("XLA") for n in names):
            self._other_accelerator = True

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualname(node.func) not in _ENTRY_POINTS:
            return
        self._check_gpu_settings(node)
        arg = arg_by_name(node, "accelerator")
        chosen = arg is None or (string_value(arg.value) or "").lower() == "auto"
        # Lightning 1.x chose nothing: without gpus= (read above) it ran on the CPU by default.
        chosen = chosen and arg_by_name(node, "gpus") is None and not self.qualname(node.func).startswith("pytorch_lightning")
        if chosen and not getattr(self, "_other_accelerator", False) and not _takes_kwargs(node):
            callee = self.context.code(node.func)
            self.report(
                node,
                f"`{callee}(...)` lets Lightning choose the accelerator (\"auto\"): it has none for the neuron "
                "device, so on Trainium the run stays on the CPU",
                guidance=_GUIDANCE,
                effort=Effort.MEDIUM,
            )
            return
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


    def _check_gpu_settings(self, node: cst.Call) -> None:
        """``Trainer(gpus=2, accelerator="ddp")`` and the other Lightning 1.x GPU settings."""
        for arg in node.args:
            if arg.keyword is None:
                continue
            setting = arg.keyword.value
            if _asks_for_gpus(setting, arg.value):
                callee = self.context.code(node.func)
                self.report(
                    arg,
                    f"`{callee}({setting}={self.context.code(arg.value)})` asks Lightning for CUDA devices",
                    guidance=_CONFIG_GUIDANCE,
                    effort=Effort.MEDIUM,
                    ancestors=(*self.context.ancestors, node),
                )

    # Settings written into a config that a Trainer is built from (latent-diffusion:
    # `trainer_config["accelerator"] = "ddp"`, then `Trainer.from_argparse_args(...)`).
    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript) or len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
                continue
            setting = string_value(sub.slice[0].slice.value)
            if setting is not None and _asks_for_gpus(setting, node.value):
                self.report(
                    node,
                    f"`{self.context.code(sub)} = {self.context.code(node.value)}` asks Lightning for CUDA devices",
                    guidance=_CONFIG_GUIDANCE,
                    effort=Effort.MEDIUM,
                )

    def visit_DictElement(self, node: cst.DictElement) -> None:
        setting = string_value(node.key)
        if setting is not None and _asks_for_gpus(setting, node.value):
            self.report(
                node,
                f"`{self.context.code(node.key)}: {self.context.code(node.value)}` asks Lightning for CUDA devices",
                guidance=_CONFIG_GUIDANCE,
                effort=Effort.MEDIUM,
            )


def _asks_for_gpus(setting: str, value: cst.BaseExpression) -> bool:
    """Whether ``setting=value`` selects CUDA devices in Lightning 1.x."""
    if setting in _GPU_COUNTS:
        off = (isinstance(value, cst.Name) and value.value in ("None", "False")) or (
            isinstance(value, cst.Integer) and value.value == "0"
        )
        return not off and string_value(value) not in ("", "0")
    if setting in ("accelerator", "distributed_backend"):
        names = {(string_value(v) or "").lower() for v in _literals(value)}
        return bool(names & _GPU_STRATEGIES)
    return False


def _literals(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The strings ``value`` may evaluate to: itself, or the branches of ``a if c else b``."""
    if isinstance(value, cst.IfExp):
        return _literals(value.body) + _literals(value.orelse)
    if isinstance(value, cst.SimpleString):
        return [value]
    return []
