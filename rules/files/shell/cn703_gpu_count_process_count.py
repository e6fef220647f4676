"""CN703: launcher process counts taken from the number of GPUs."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.shell import ShellScript, is_gpu_count, unquote, word_end

from .._helpers import TextRule

__all__ = ["GpuCountProcessCount"]


_NPROC_RE = re.compile(r"--(nproc[_-]per[_-]node|num[_-]gpus)(=|[ \t]+)")
_VAR_RE = re.compile(r"\$\{?([A-Za-z_]\w*)")
_DEVICE_COUNT_RE = re.compile(r"cuda\.device_count")
# Slurm's GPU counts of the job (sbatch / srun output environment: SLURM_GPUS_PER_NODE is the
# --gpus-per-node request, SLURM_GPUS_ON_NODE the GPUs of the step on this node); not
# SLURM_JOB_GPUS / SLURM_STEP_GPUS, which list GPU indices.
_SLURM_GPU_COUNTS = frozenset({"SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_GPUS", "SLURM_GPUS_PER_TASK"})


class GpuCountProcessCount(TextRule):
    """
    ## What it does
    Reports launcher process counts taken from the number of GPUs. Covered:
    ``torchrun --nproc_per_node=$(nvidia-smi -L | wc -l)``, ``--nproc_per_node=gpu`` / ``auto``,
    a variable assigned such a count, Slurm's GPU counts (``--nproc_per_node=$SLURM_GPUS_PER_NODE``,
    ``$SLURM_GPUS_ON_NODE``), deepspeed's ``--num_gpus``, and shell variables set from
    ``torch.cuda.device_count()``. A plain number, or a variable's default
    (``GPUS=${GPUS:-8}`` then ``--nproc_per_node=${GPUS}``, InternVL's 126 launchers), is not
    reported: it asks for no GPU, and on Trainium it starts that many processes, one per
    NeuronCore, which runs (on fewer cores than the host has); the user sets the variable.

    ## Why is this bad?
    On Trainium one process drives one NeuronCore, and a host has many more cores than GPUs
    (64 on trn2.48xlarge). A count derived from GPUs is zero or wrong there; ``auto`` falls back
    to the number of CPUs.

    ## Example
    ```bash
    torchrun --nproc_per_node=$(nvidia-smi -L | wc -l) train.py
    ```
    Pass the number of NeuronCores to use, e.g. ``--nproc_per_node=64`` on trn2.48xlarge.

    ## Fix safety
    Report only: how many cores a job should use is the user's decision.
    """

    code = "CN703"
    name = "gpu-count-process-count"
    file_kinds = frozenset({"shell"})
    triggers = ("nproc", "num_gpus", "num-gpus", "device_count")
    VALID = (
        Valid("torchrun --nproc_per_node=2 train.py\n", path="launch.sh"),
        Valid("torchrun --nproc_per_node=$NCORES train.py\n", path="launch.sh"),
        Valid("torchrun --nproc_per_node=$SLURM_NTASKS_PER_NODE train.py\n", path="launch.sh"),
        Valid("# torchrun --nproc_per_node=$(nvidia-smi -L | wc -l)\n", path="launch.sh"),
        # a count with a default the user overrides: one process per NeuronCore runs (InternVL)
        Valid("GPUS=${GPUS:-8}\ntorchrun --nproc_per_node=${GPUS} train.py\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("torchrun --nproc_per_node=$(nvidia-smi -L | wc -l) train.py\n", path="launch.sh"),
        Invalid("torchrun --nproc-per-node gpu train.py\n", path="launch.sh"),
        Invalid("torchrun --nproc_per_node=auto train.py\n", path="launch.sh"),
        # nanoVLM's train.sh, run under `#SBATCH --gpus-per-node=8`
        Invalid("srun torchrun --nproc_per_node=$SLURM_GPUS_PER_NODE \\\n    --nnodes=$SLURM_NNODES train.py\n", path="train.sh"),
        Invalid("torchrun --nproc_per_node=${SLURM_GPUS_ON_NODE} train.py\n", path="launch.sh"),
        Invalid("NGPUS=$(nvidia-smi -L | wc -l)\ntorchrun --nproc_per_node=${NGPUS} t.py\n", path="launch.sh"),
        Invalid(
            'N=$(python -c "import torch; print(torch.cuda.device_count())")\n'
            "deepspeed --num_gpus $N train.py\n",
            path="launch.sh",
        ),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        out: list[TextReport] = []
        guidance = (
            "start one process per NeuronCore: pass the core count explicitly (64 on "
            "trn2.48xlarge; `neuron-ls` shows the cores of a host)"
        )
        if "device_count" in text:
            for ns, ne, vs, ve in doc.assignments(re.compile(r"[A-Za-z_]\w*")):
                value = text[vs:ve]
                if is_gpu_count(value) and _DEVICE_COUNT_RE.search(value) and "nvidia-smi" not in value:
                    out.append(TextReport(
                        ns, ve,
                        f"`{text[ns:ne]}` counts GPUs with torch.cuda.device_count()",
                        guidance="use `torch.neuron.device_count()` or the NeuronCore count",
                        effort=Effort.LOW,
                    ))
        for m in doc.code_matches(_NPROC_RE):
            vs = m.end()
            ve = word_end(text, vs)
            value = text[vs:ve]
            literal = unquote(value)
            flag = f"--{m.group(1)}"
            if literal in ("gpu", "auto"):
                why = f"`{flag}={literal}` starts one process per GPU" + (
                    " (per CPU when there is none)" if literal == "auto" else ""
                )
            elif is_gpu_count(value):
                why = f"`{flag}` takes its process count from the number of GPUs"
            elif slurm := [v for v in _VAR_RE.findall(value) if v in _SLURM_GPU_COUNTS]:
                why = f"`{flag}` takes its process count from Slurm's GPU count (`${slurm[0]}`)"
            elif any(v in doc.gpu_count_vars for v in _VAR_RE.findall(value)):
                why = f"`{flag}` takes its process count from a GPU count"
            elif m.group(1).startswith("num") and value:
                why = f"`{flag}` counts GPUs"
                if literal is not None and literal.isdigit():
                    continue
            else:
                continue
            out.append(TextReport(m.start(), ve, why, guidance=guidance, effort=Effort.LOW))
        return out


