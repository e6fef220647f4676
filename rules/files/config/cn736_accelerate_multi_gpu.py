"""CN736: Hugging Face accelerate configs set up for CUDA GPUs (``distributed_type: MULTI_GPU``, ``gpu_ids``)."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import TextRule
from ._helpers import CONFIG_KINDS

__all__ = ["AccelerateMultiGpu"]


_CONFIG = "configs/accelerate/multi_gpu.yaml"
# What makes a file an accelerate config: `accelerate config` writes these top-level keys.
_ACCELERATE_KEYS = frozenset({"compute_environment", "num_processes", "mixed_precision", "machine_rank", "main_training_function"})


class AccelerateMultiGpu(TextRule):
    """
    ## What it does
    Reports the CUDA settings of a Hugging Face ``accelerate`` config (the YAML or JSON file
    ``accelerate config`` writes and ``accelerate launch --config_file`` reads):
    ``distributed_type: MULTI_GPU`` and ``gpu_ids``.

    ## Why is this bad?
    ``MULTI_GPU`` makes ``accelerate launch`` start one process per CUDA device and set up NCCL;
    ``gpu_ids`` selects CUDA devices by index. Neither is one of accelerate's documented settings
    for TorchNeuron's ``neuron`` device, so the launch stops before the ported code runs.

    ## Example
    ```yaml
    compute_environment: LOCAL_MACHINE
    distributed_type: MULTI_GPU
    gpu_ids: all
    num_processes: 8
    ```
    is reported twice: launch with ``torchrun --nproc_per_node=<NeuronCores>`` (the ported
    code calls ``init_process_group(backend="neuron")``), and select cores with
    ``NEURON_RT_VISIBLE_CORES`` instead of ``gpu_ids``.

    ## Fix safety
    Report only: how the job is launched on Trainium is the project's decision.
    """

    code = "CN736"
    name = "accelerate-multi-gpu"
    file_kinds = CONFIG_KINDS
    triggers = ("MULTI_GPU", "gpu_ids")
    VALID = (
        Valid("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 8\n", path=_CONFIG),
        # Not an accelerate config: a project setting of the same name.
        Valid("model:\n  distributed_type: MULTI_GPU\n", path="config/train.yaml"),
        Valid("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n", path=_CONFIG),
    )
    INVALID = (
        Invalid("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\ngpu_ids: all\nnum_processes: 8\n", path=_CONFIG),
        Invalid('{"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_processes": 2}\n', path="accelerate.json"),
        Invalid("compute_environment: LOCAL_MACHINE\ngpu_ids: 0,1\nnum_processes: 2\n", path=_CONFIG),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for document in range(doc.documents):
            top = doc.top_keys(document)
            if not (top & _ACCELERATE_KEYS):
                continue
            dist = doc.at(document, ("distributed_type",))
            if dist is not None and dist.value.upper() == "MULTI_GPU":
                out.append(TextReport(
                    dist.key_start if dist.key_start >= 0 else dist.start, dist.end,
                    "`distributed_type: MULTI_GPU` makes accelerate launch one process per CUDA device with NCCL",
                    guidance="launch with `torchrun --nproc_per_node=<NeuronCores>` (64 on trn2.48xlarge); the ported code "
                    'initialises `init_process_group(backend="neuron")` and places tensors on "neuron"',
                    effort=Effort.LOW,
                ))
            ids = doc.at(document, ("gpu_ids",))
            if ids is not None and ids.value.strip().lower() not in ("", "null", "none"):
                out.append(TextReport(
                    ids.key_start if ids.key_start >= 0 else ids.start, ids.end,
                    f"`gpu_ids: {ids.value}` selects CUDA devices",
                    guidance="select NeuronCores with NEURON_RT_VISIBLE_CORES (one index or a range `a-b`) in the "
                    "launch environment",
                    effort=Effort.LOW,
                ))
        return out
