"""CN732: ``backend: nccl`` in training configs (YAML, JSON, TOML, INI)."""

from __future__ import annotations


from cuda2neuron.core import Invalid, Safety, Valid

from .._helpers import TextRule
from ._helpers import CONFIG_EXAMPLE, CONFIG_KINDS, report_value

__all__ = ["NcclBackendInConfig"]


class NcclBackendInConfig(TextRule):
    """
    ## What it does
    Rewrites a process-group backend of ``nccl`` in configs (``backend: nccl``,
    ``dist_backend: nccl``, ``"distributed-backend": "nccl"``) to ``neuron``: YAML in block or
    flow style (configs written as JSON inside ``.yml`` files), JSON (DeepSpeed-style and
    autotuning configs), TOML and INI files.

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
    file_kinds = CONFIG_KINDS
    triggers = ("nccl",)
    VALID = (
        Valid("backend: neuron\n", path=CONFIG_EXAMPLE),
        Valid("log_backend: tensorboard\n", path=CONFIG_EXAMPLE),
        Valid("comment: use nccl for speed\n", path=CONFIG_EXAMPLE),
    )
    INVALID = (
        Invalid("backend: nccl\n", "backend: neuron\n", path=CONFIG_EXAMPLE),
        Invalid(
            '{\n  "pipe_parallel_size": 1,\n  "distributed_backend": "nccl",\n}\n',
            '{\n  "pipe_parallel_size": 1,\n  "distributed_backend": "neuron",\n}\n',
            path="configs/125M.yml",
        ),
        Invalid('{"distributed-backend": "nccl"}\n', '{"distributed-backend": "neuron"}\n', path="configs/tune.json"),
        Invalid("[dist]\nbackend = 'nccl'\n", "[dist]\nbackend = 'neuron'\n", path="config/run.toml"),
        Invalid("distributed:\n  dist_backend: \"nccl\"  # GPUs\n", "distributed:\n  dist_backend: \"neuron\"  # GPUs\n", path=CONFIG_EXAMPLE),
        Invalid("backend: nccl\n", None, path=CONFIG_EXAMPLE, target="accelerator"),
    )

    @classmethod
    def check_text(cls, doc, settings):
        return [
            report_value(
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


