"""CN706: GPU requests to a batch scheduler (Slurm, PBS, LSF, submitit) in job scripts."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.shell import ShellScript, command_end, word_end

from .._helpers import GPU_COUNT_GUIDANCE, TextRule

__all__ = ["SchedulerGpuRequest"]


# A directive comment the scheduler reads (`#SBATCH --gpus=8`), up to the end of its line.
_DIRECTIVE_RE = re.compile(r"^[ \t]*#(SBATCH|PBS|BSUB)\b([^\n]*)", re.MULTILINE)
# A command that takes the same options on its command line.
_COMMAND_RE = re.compile(r"(?<![\w./-])(srun|sbatch|salloc|qsub|bsub)(?![\w-])")
_SCHEDULERS = {"SBATCH": "Slurm", "PBS": "PBS", "BSUB": "LSF", "srun": "Slurm", "sbatch": "Slurm",
               "salloc": "Slurm", "qsub": "PBS", "bsub": "LSF"}
# `alias NAME=...`: its value is a command the script runs later under NAME, quoted or not.
_ALIAS_RE = re.compile(r"(?<![\w-])alias[ \t]+[\w.:+-]+=")
# Slurm's GPU options; `--gres` only with a `gpu` resource, `-G` only with a count.
_SLURM_RE = re.compile(
    r"(?<![\w-])(--gpus(?:-per-(?:node|task|socket))?|--gpu-bind|--gpu-freq|--mem-per-gpu|--cpus-per-gpu"
    r"|--ntasks-per-gpu|--gres|-G)(?:[ \t]*=[ \t]*|[ \t]+)(\S+)"
)
# Slurm node features (`--constraint=volta32gb`, `-C "a100&ib"`): a feature naming an NVIDIA GPU
# model or architecture selects GPU nodes, which a Trainium cluster does not define.
_CONSTRAINT_RE = re.compile(r"(?<![\w-])(--constraint|-C)(?:[ \t]*=[ \t]*|[ \t]+)(\S+)")
_GPU_FEATURE_RE = re.compile(
    r"(?:volta|ampere|hopper|blackwell|turing|pascal|tesla|[vp]100|a100|a10g?|a30|a40|a6000|h100|h200|h800|gh200|b200"
    r"|l40s?|l4|t4|k80|rtx|gpu|nvidia)", re.IGNORECASE,
)
# PBS resource lists (`-l select=1:ngpus=4`, `-l nodes=1:ppn=8:gpus=4`) and LSF's `-gpu` /
# `rusage[ngpus_physical=4]`.
_RESOURCE_RE = re.compile(r"(?<![\w-])(n?gpus(?:_\w+)?=\d+|-gpu(?:[ \t]+\S+)?)")
# Hydra's submitit launcher and submitit's own parameter, as command-line overrides.
_SUBMITIT_RE = re.compile(r"(?<![\w-])(?:[\w.+]*\.)?(gpus_per_(?:node|task))=\S+")


class SchedulerGpuRequest(TextRule):
    """
    ## What it does
    Reports GPU requests to a batch scheduler: ``#SBATCH`` / ``srun`` / ``sbatch`` / ``salloc``
    options (``--gpus``, ``--gpus-per-node``, ``--gpus-per-task``, ``-G``, ``--gres=gpu:N``,
    ``--gpu-bind``, ``--mem-per-gpu``, ...), PBS resource lists (``#PBS -l select=1:ngpus=4``,
    ``gpus=N``), LSF's ``#BSUB -gpu`` and ``ngpus`` usage, and submitit / Hydra launcher
    overrides (``hydra.launcher.gpus_per_node=8``), and Slurm node features that name an NVIDIA
    GPU model or architecture (``--constraint=volta32gb``, ``-C a100``). A count of zero
    (``--gres=gpu:0``, a CPU-only step) asks for no GPU and is not reported. A command's options are read
    across ``\\`` continuation lines and inside an ``alias`` that holds the command. Job scripts are read under every name a
    scheduler uses: ``*.slurm``, ``*.sbatch``, ``*.pbs``, ``*.lsf``, ``*.qsub`` and ``*.sh``.

    ## Why is this bad?
    A Trainium node has no GPUs: a job that asks the scheduler for GPU resources waits forever
    or is rejected, and the count it asks for is not the NeuronCore count the port runs with.

    ## Example
    ```bash
    #SBATCH --nodes=2
    #SBATCH --gpus-per-node=8
    ```
    is reported: ask for the Trainium nodes themselves (``--nodes``, ``--exclusive``) and start
    one process per NeuronCore.

    ## Fix safety
    Report only: how a cluster exposes Trainium (whole nodes, a partition, a generic resource
    of its own) is the cluster's configuration, not something the script can say.
    """

    code = "CN706"
    name = "scheduler-gpu-request"
    file_kinds = frozenset({"shell"})
    triggers = ("gpu", "gres", "constraint")
    VALID = (
        Valid("#SBATCH --nodes=2\n#SBATCH --exclusive\nsrun python train.py\n", path="job.slurm"),
        Valid("# request --gpus-per-node=8 on GPU clusters\n", path="job.slurm"),
        Valid("#SBATCH --gres=nvme:1\n", path="job.slurm"),
        Valid("python train.py --gpus 8\n", path="run.sh"),
        Valid('echo "srun --gpus=8 would not work here"\n', path="run.sh"),
        Valid('alias ll="ls -l --gpus=8"\n', path="run.sh"),
        Valid("#SBATCH --constraint=ib&skylake\n", path="job.slurm"),
        # a count of zero asks for no GPU (InternVL's CPU-only postprocessing jobs)
        Valid("srun -p ${PARTITION} --gres=gpu:0 \\\n    python merge.py\n", path="merge.sh"),
        Valid("#SBATCH --gpus-per-node=0\n", path="job.slurm"),
    )
    INVALID = (
        Invalid("#!/bin/bash\n#SBATCH --gpus-per-node=8\nsrun python train.py\n", path="job.slurm"),
        Invalid("#SBATCH --gres=gpu:a100:4\n", path="job.sbatch"),
        Invalid("#SBATCH --gres=gpu:10\n", path="job.sbatch"),
        # torchtune's GRPO jobs
        Invalid("#SBATCH --nodes=2\n#SBATCH --constraint=volta32gb\n", path="multinode.sbatch"),
        Invalid('srun --constraint "a100_80gb&ib" python train.py\n', path="run.sh"),
        Invalid("srun --nodes=1 --gpus-per-task=1 python train.py\n", path="run.sh"),
        # options on the lines a `\` continues (InternVL's Slurm launchers)
        Invalid("srun -p ${PARTITION} \\\n    --gres=gpu:${GPUS_PER_NODE} \\\n    python -u train.py\n", path="train.sh"),
        # a command an alias holds, quotes and all (InternVL's clip_benchmark scripts)
        Invalid('alias s1a="srun -p ${PARTITION} -N 1 --gres=gpu:1 --cpus-per-task 10"\ns1a python eval.py\n', path="eval.sh"),
        Invalid("#PBS -l select=2:ncpus=32:ngpus=4\n", path="job.pbs"),
        Invalid('#BSUB -gpu "num=4:mode=exclusive_process"\n', path="job.lsf"),
        Invalid("python launch.py -m hydra/launcher=submitit_slurm hydra.launcher.gpus_per_node=8\n", path="sweep.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        if "gpu" not in text and "gres" not in text and "constraint" not in text:
            return []
        out: list[TextReport] = []
        for m in _DIRECTIVE_RE.finditer(text):
            out += _requests(text, m.start(2), m.end(2), _SCHEDULERS[m.group(1)])
        for m in doc.code_matches(_COMMAND_RE):
            # The options run on past `\` continuations (`srun -p $PART \` then `--gres=gpu:8 \` on
            # the next line, InternVL's launchers); a `;`, `|` or `&` inside the first line's quotes
            # (`--constraint "a100&ib"`) must not cut that line short, so the line is the least.
            _, line_end = doc.line_bounds(m.start())
            end = max(line_end, command_end(text, m.end()))
            out += [r for r in _requests(text, m.end(), end, _SCHEDULERS[m.group(1)]) if doc.is_code(r.start)]
        for a in doc.code_matches(_ALIAS_RE):
            # The quotes that keep `echo "srun --gpus=8"` from being read hold a command here
            # (`alias s1a="srun -p $PART --gres=gpu:1"`, InternVL's clip_benchmark scripts).
            value_end = word_end(text, a.end())
            for m in _COMMAND_RE.finditer(text, a.end(), value_end):
                out += _requests(text, m.end(), value_end, _SCHEDULERS[m.group(1)])
        for m in doc.code_matches(_SUBMITIT_RE):
            out.append(_report(m.start(), m.end(), text[m.start():m.end()], "submitit"))
        return out


def _requests(text: str, start: int, end: int, scheduler: str) -> list[TextReport]:
    out = []
    for m in _SLURM_RE.finditer(text, start, end):
        option, value = m.group(1), m.group(2)
        if option == "--gres" and "gpu" not in value.lower():
            continue
        if option == "-G" and not value.strip("'\"").isdigit():
            continue
        if _zero_count(option, value):
            continue  # `--gres=gpu:0`: a CPU-only step (InternVL's postprocessing jobs) asks for none
        out.append(_report(m.start(), m.end(), m.group(0), scheduler))
    if scheduler == "Slurm":
        for m in _CONSTRAINT_RE.finditer(text, start, end):
            features = re.split(r"[&|,\[\]*()'\"]+", m.group(2))
            if any(f and _GPU_FEATURE_RE.match(f) for f in features):
                out.append(TextReport(
                    m.start(), m.end(),
                    f"`{m.group(0)}` asks Slurm for nodes with an NVIDIA GPU feature, which Trainium nodes do not have",
                    guidance="constrain the job to the Trainium nodes instead (the feature or partition your cluster "
                    f"gives them); {GPU_COUNT_GUIDANCE}",
                    effort=Effort.LOW,
                ))
    for m in _RESOURCE_RE.finditer(text, start, end):
        if any(r.start <= m.start() < r.end for r in out):
            continue
        out.append(_report(m.start(), m.end(), m.group(0), scheduler))
    return out


def _zero_count(option: str, value: str) -> bool:
    """Whether a GPU option asks for no GPU: a count of 0 (``--gres=gpu:0``, ``--gres=gpu:a100:0``,
    ``--gpus=0``, ``-G 0``). Only the count of a ``gpu`` entry decides (``--gres=gpu:0,nvme:1``);
    a variable (``gpu:${N}``) or no count at all (``--gres=gpu``, one GPU) is a request."""
    value = value.strip("'\"")
    if option == "--gres":
        counts = [entry.split(":")[-1] for entry in value.split(",") if entry.lower().startswith("gpu")]
        return bool(counts) and all(c == "0" for c in counts)
    if option in ("-G", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket"):
        return value.split(":")[-1] == "0"
    return False


def _report(start: int, end: int, written: str, scheduler: str) -> TextReport:
    return TextReport(
        start, end,
        f"`{written}` asks {scheduler} for GPUs, which Trainium nodes do not have",
        guidance="request the Trainium nodes themselves (`--nodes`, `--exclusive`, the partition your cluster "
        f"gives them) instead of GPU resources; {GPU_COUNT_GUIDANCE}",
        effort=Effort.LOW,
    )
