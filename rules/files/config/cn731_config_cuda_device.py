"""CN731: ``device: cuda`` in training configs (YAML, JSON, TOML, INI)."""

from __future__ import annotations

import re

from cuda2neuron.core import Invalid, Safety, Valid

from ..._shared.names import is_device_word
from .._helpers import TextRule
from ._helpers import CONFIG_EXAMPLE, CONFIG_KINDS, report_value

__all__ = ["CudaDeviceInConfig"]


_DEVICE_VALUE_RE = re.compile(r"cuda(:\d+)?")


class CudaDeviceInConfig(TextRule):
    """
    ## What it does
    Rewrites ``device: cuda`` / ``device: cuda:1`` in configs to ``neuron`` / ``neuron:1``.
    Keys that name a device (``device``, ``train_device``, ``eval_device``, ``dev``) are read at
    any depth of a YAML file (block or flow style, every document of the file), a JSON file, a
    TOML file or an INI / cfg file; only the value's characters change, so comments, layout and
    quoting are kept byte for byte.

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
    file_kinds = CONFIG_KINDS
    triggers = ("cuda",)
    VALID = (
        Valid("device: neuron\n", path=CONFIG_EXAMPLE),
        Valid("impl: cuda  # kernel flavour, not a device\n", path=CONFIG_EXAMPLE),
        Valid("# device: cuda\n", path=CONFIG_EXAMPLE),
        Valid("device: cudagraph\n", path=CONFIG_EXAMPLE),
        Valid('{"note": "device cuda", "device": "neuron"}\n', path="config/train.json"),
    )
    INVALID = (
        Invalid("device: cuda\n", "device: neuron\n", path=CONFIG_EXAMPLE),
        Invalid('{"trainer": {"device": "cuda:0", "steps": 10}}\n', '{"trainer": {"device": "neuron:0", "steps": 10}}\n', path=CONFIG_EXAMPLE),
        Invalid('{\n  "device": "cuda"\n}\n', '{\n  "device": "neuron"\n}\n', path="config/train.json"),
        Invalid('[train]\ndevice = "cuda"  # GPU\n', '[train]\ndevice = "neuron"  # GPU\n', path="config/train.toml"),
        Invalid("[train]\ndevice = cuda:1\n", "[train]\ndevice = neuron:1\n", path="setup.cfg"),
        Invalid("base: &b\n  device: cuda\nrun:\n  <<: *b\n", "base: &b\n  device: neuron\nrun:\n  <<: *b\n", path=CONFIG_EXAMPLE),
        Invalid("trainer:\n  device: 'cuda:1'  # pinned\n", "trainer:\n  device: 'neuron:1'  # pinned\n", path=CONFIG_EXAMPLE),
        Invalid("runs:\n  - eval_device: \"cuda\"\n", "runs:\n  - eval_device: \"neuron\"\n", path=CONFIG_EXAMPLE),
        Invalid("device: cuda\n", None, path=CONFIG_EXAMPLE, target="accelerator"),
    )

    @classmethod
    def check_text(cls, doc, settings):
        return [
            report_value(
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


