"""CN735: GPU counts and GPU accelerators requested through a config."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import GPU_COUNT_GUIDANCE, TextRule
from ._helpers import CONFIG_EXAMPLE, CONFIG_KINDS

__all__ = ["GpuRequestInConfig"]


# Keys that count GPUs (submitit / Hydra launchers, Lightning, mosaicml, trainer configs),
# compared with `-` read as `_` and case ignored.
_COUNT_KEYS = frozenset({
    "gpus", "gpus_per_node", "gpus_per_task", "gpus_per_worker", "num_gpus", "num_gpus_per_node",
    "n_gpus", "n_gpu", "ngpus", "ngpu", "num_gpu", "gpu_num", "gpu_count", "nr_gpus",
})
# Keys a program reads as "how many devices do I use" (`device = "cuda" if cfg.n_gpu > 0 else "cpu"`),
# not as a scheduler's request. A count of one there selects the device, which the code's port
# already makes the neuron device: nothing to resize. Under a launcher's or a cluster's section
# (`hydra.launcher`, `resources`, `compute`) the same key asks a scheduler for GPUs.
_DEVICE_COUNT_KEYS = frozenset({"num_gpu", "num_gpus", "n_gpu", "n_gpus", "ngpu", "ngpus", "gpu_num", "gpu_count", "nr_gpus"})
_SCHEDULER_SECTIONS = frozenset({"launcher", "resources", "compute", "slurm", "cluster", "scheduler", "job", "submitit"})
# Lightning's accelerator names for CUDA (CN108 in code).
_ACCELERATOR_KEYS = frozenset({"accelerator"})
_CUDA_ACCELERATORS = frozenset({"gpu", "cuda"})
_NO_GPU = re.compile(r"(?:0|null|none|~|false|)", re.IGNORECASE)


class GpuRequestInConfig(TextRule):
    """
    ## What it does
    Reports GPUs requested through a config: GPU counts (``gpus_per_node: 8`` for Hydra's
    submitit launcher, ``gpus: 4`` / ``num_gpus`` / ``n_gpu`` / ``gpu_num`` in trainer and
    cluster configs, ``gpus: -1`` / ``all``; a count of one under a program's own device-count key,
    ``num_gpu: 1``, is the device selection its ported code makes) and Lightning's ``accelerator: gpu`` /
    ``accelerator: cuda`` (in code, CN108), in YAML, JSON, TOML and INI files. A count of 0 asks
    for no GPU and is left alone.

    ## Why is this bad?
    A Trainium instance has no GPUs: a launcher asked for 8 GPUs per node waits for resources
    that never come, a trainer told to use ``gpu`` stops at start, and a process count sized in
    GPUs is not the NeuronCore count the port runs with.

    ## Example
    ```yaml
    hydra:
      launcher:
        gpus_per_node: 8
    ```
    is reported: size the job in NeuronCores and request Trainium nodes.

    ## Fix safety
    Report only: the number of NeuronCores a job should use, and how the cluster hands them out,
    are the project's decision.
    """

    code = "CN735"
    name = "config-gpu-request"
    file_kinds = CONFIG_KINDS
    triggers = ("gpu", "GPU")
    VALID = (
        Valid("trainer:\n  gpus: 0\n", path=CONFIG_EXAMPLE),
        Valid("trainer:\n  accelerator: cpu\n", path=CONFIG_EXAMPLE),
        Valid("description: uses 8 gpus\n", path=CONFIG_EXAMPLE),
        Valid("gpu_memory_utilization: 0.9\n", path=CONFIG_EXAMPLE),
        # one device, read by the program as "use the accelerator" (its device code is ported)
        Valid("num_gpu: 1\nbatch_size: 32\n", path=CONFIG_EXAMPLE),
    )
    INVALID = (
        Invalid("hydra:\n  launcher:\n    gpus_per_node: 8\n    tasks_per_node: 8\n", path=CONFIG_EXAMPLE),
        Invalid("trainer:\n  accelerator: gpu\n  devices: 4\n", path=CONFIG_EXAMPLE),
        Invalid('{"n_gpu": 2}\n', path="configs/run.json"),
        Invalid("resources:\n  num_gpus: 1\n", path=CONFIG_EXAMPLE),
        Invalid("[cluster]\nnum-gpus = 4\n", path="config/cluster.toml"),
        Invalid("compute:\n  gpu_num: 8\n  gpu_type: a100_80gb\n", path="mcli/run.yaml"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.entries:
            key = s.key.lower().replace("-", "_")
            value = s.value.strip()
            if key in _COUNT_KEYS:
                if _NO_GPU.fullmatch(value) or not re.fullmatch(r"-?\d+|all|auto|\[.*\]|[\d, ]+", value, re.IGNORECASE):
                    continue
                sections = {str(p).lower() for p in s.path[:-1]}
                if value == "1" and key in _DEVICE_COUNT_KEYS and not sections & _SCHEDULER_SECTIONS:
                    continue  # one device: a device selection, which the code's port makes
                message = f"`{s.key}: {value}` requests GPUs, which Trainium does not have"
            elif key in _ACCELERATOR_KEYS and value.lower() in _CUDA_ACCELERATORS:
                message = f"`{s.key}: {value}` selects Lightning's CUDA accelerator"
            else:
                continue
            out.append(TextReport(
                s.key_start if s.key_start >= 0 else s.start, s.end, message,
                guidance=GPU_COUNT_GUIDANCE + "; Lightning's built-in accelerators do not include the neuron "
                "device (run the loop on torch.device(\"neuron\") or give Lightning an Accelerator of your own)"
                if key in _ACCELERATOR_KEYS else GPU_COUNT_GUIDANCE,
                effort=Effort.LOW,
            ))
        return out
