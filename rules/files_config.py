"""CN731–CN732: YAML training configs (``device: cuda``, ``backend: nccl``)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Safety, Valid
from cuda2neuron.core import TextReport

from ._device_util import is_device_word
from ._files_util import TextRule

__all__ = ["CudaDeviceInConfig", "NcclBackendInConfig"]

_CONFIG = frozenset({"config"})
_CFG = "config/train.yaml"
_DEVICE_VALUE_RE = re.compile(r"cuda(:\d+)?")


def _report(entry, message: str, settings, neuron_value: str, description: str, accelerator_guidance: str) -> TextReport:
    """The value rewritten on the neuron target; reported with guidance on the accelerator target."""
    if settings.target == "neuron":
        return TextReport(
            entry.start, entry.end, message,
            replacement=f"{entry.quote}{neuron_value}{entry.quote}",
            description=description,
        )
    return TextReport(entry.start, entry.end, message, guidance=accelerator_guidance, effort=Effort.LOW)


class CudaDeviceInConfig(TextRule):
    """
    ## What it does
    Rewrites ``device: cuda`` / ``device: cuda:1`` in YAML configs to ``neuron`` / ``neuron:1``.
    Keys that name a device (``device``, ``train_device``, ``eval_device``, ``dev``) are read in
    mappings and list items, quoted or not; comments and layout are kept byte for byte.

    ## Why is this bad?
    Training code reads the device from its config (``torch.device(cfg.device)``, Hydra,
    OmegaConf): the Python port is complete only when the config names the Neuron device too,
    or the run still asks for CUDA.

    ## Example
    ```yaml
    trainer:
      device: cuda:0   # first GPU
    ```
    becomes
    ```yaml
    trainer:
      device: neuron:0   # first GPU
    ```

    ## Fix safety
    Safe on the ``neuron`` target: the key says the value is a device. On the ``accelerator``
    target it is reported: a config value cannot say "the current accelerator"; pick the device
    in code with ``torch.accelerator.current_accelerator()``, or keep one config per target.
    """

    code = "CN731"
    name = "config-cuda-device"
    fixes = frozenset({Safety.SAFE})
    file_kinds = _CONFIG
    triggers = ("cuda",)
    VALID = (
        Valid("device: neuron\n", path=_CFG),
        Valid("impl: cuda  # kernel flavour, not a device\n", path=_CFG),
        Valid("# device: cuda\n", path=_CFG),
        Valid("device: cudagraph\n", path=_CFG),
    )
    INVALID = (
        Invalid("device: cuda\n", "device: neuron\n", path=_CFG),
        Invalid("trainer:\n  device: 'cuda:1'  # pinned\n", "trainer:\n  device: 'neuron:1'  # pinned\n", path=_CFG),
        Invalid("runs:\n  - eval_device: \"cuda\"\n", "runs:\n  - eval_device: \"neuron\"\n", path=_CFG),
        Invalid("device: cuda\n", None, path=_CFG, target="accelerator"),
    )

    @classmethod
    def check_text(cls, doc, settings):
        return [
            _report(
                entry,
                f"`{entry.key}: {entry.value}` names a CUDA device",
                settings,
                "neuron" + entry.value[len("cuda"):],
                "name the neuron device",
                "a config value cannot name the current accelerator: choose the device in code with "
                "torch.accelerator.current_accelerator(), or keep one config per target",
            )
            for entry in doc.entries
            if is_device_word(entry.key) and _DEVICE_VALUE_RE.fullmatch(entry.value)
        ]


class NcclBackendInConfig(TextRule):
    """
    ## What it does
    Rewrites a process-group backend of ``nccl`` in YAML configs (``backend: nccl``,
    ``dist_backend: nccl``) to ``neuron``.

    ## Why is this bad?
    ``init_process_group(backend=cfg.dist_backend)`` with ``nccl`` fails on Trainium; the
    collective backend there is ``neuron``.

    ## Example
    ```yaml
    distributed:
      dist_backend: nccl
    ```
    becomes
    ```yaml
    distributed:
      dist_backend: neuron
    ```

    ## Fix safety
    Safe on the ``neuron`` target: the key says backend and the value names NCCL. On the
    ``accelerator`` target it is reported: leave the backend out and let PyTorch choose the one
    for the device (``torch.distributed.get_default_backend_for_device``).
    """

    code = "CN732"
    name = "config-nccl-backend"
    fixes = frozenset({Safety.SAFE})
    file_kinds = _CONFIG
    triggers = ("nccl",)
    VALID = (
        Valid("backend: neuron\n", path=_CFG),
        Valid("log_backend: tensorboard\n", path=_CFG),
        Valid("comment: use nccl for speed\n", path=_CFG),
    )
    INVALID = (
        Invalid("backend: nccl\n", "backend: neuron\n", path=_CFG),
        Invalid("distributed:\n  dist_backend: \"nccl\"  # GPUs\n", "distributed:\n  dist_backend: \"neuron\"  # GPUs\n", path=_CFG),
        Invalid("backend: nccl\n", None, path=_CFG, target="accelerator"),
    )

    @classmethod
    def check_text(cls, doc, settings):
        return [
            _report(
                entry,
                f"`{entry.key}: {entry.value}` selects the NCCL process-group backend",
                settings,
                "neuron",
                'use the "neuron" process-group backend',
                "leave the backend out and let torch.distributed choose the one for the device "
                "(torch.distributed.get_default_backend_for_device)",
            )
            for entry in doc.entries
            if "backend" in entry.key.lower() and entry.value.lower() == "nccl"
        ]
