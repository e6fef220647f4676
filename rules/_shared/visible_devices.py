"""``CUDA_VISIBLE_DEVICES`` values as ``NEURON_RT_VISIBLE_CORES`` values.

One conversion for the Python rule (CN405) and the launch-script rule (CN701), so a port of a
script and of the code it starts agree on which cores are visible.
"""

from __future__ import annotations

import re

__all__ = [
    "LAUNCHER_GUIDANCE", "MULTI_PROCESS_LAUNCHER_RE", "command_program", "launcher_caveat", "other_program_guidance",
    "runs_python", "visible_cores",
]

# Commands that start one process per device from one environment: torchrun and the module it
# runs (`python -m torch.distributed.run`, the older `.launch`), `accelerate launch`, deepspeed's
# launcher. Each child inherits the job-wide NEURON_RT_VISIBLE_CORES.
MULTI_PROCESS_LAUNCHER_RE = re.compile(
    r"(?<![\w.-])(?:torchrun|torch\.distributed\.(?:run|launch)|accelerate[ \t]+launch|deepspeed)(?![\w-])"
)
# Why a job-wide range in front of such a launcher is not a safe rewrite. AWS's runtime pages
# (neuron-runtime configuration guide, 2026-05-11; nrt-env-var-reference, 2026-09-27): one process
# reserves every NeuronCore it sees, exclusively. TorchNeuron's pre-release `neuron` process group
# sets NEURON_RT_VISIBLE_CORES=LOCAL_RANK only when the variable is unset. So with `0-1` set for the
# job, every rank may try to reserve cores 0-1 where CUDA gave rank r GPU r of the list. Not
# verified on a Trn2 (neuron-target-api-2.34.md, section 7); no per-rank form is documented.
LAUNCHER_GUIDANCE = (
    "For a multi-process launcher, drop the variable and let `init_process_group(\"neuron\")` give each rank "
    "its own core (TorchNeuron sets NEURON_RT_VISIBLE_CORES=LOCAL_RANK only when it is unset), or ask for a "
    "number of cores with NEURON_RT_NUM_CORES; each process reserves every core it sees."
)


def launcher_caveat(launcher: str) -> str:
    """The text a finding adds when the variable reaches several processes through ``launcher``
    (``torchrun``, ``torch.distributed.init_process_group``, ...)."""
    return (
        f" (unsafe: with `{launcher}` several processes see it, and each would reserve every core in "
        "the range: TorchNeuron assigns one core per rank only when the variable is unset)"
    )


def visible_cores(value: str) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` value -> ``NEURON_RT_VISIBLE_CORES`` value, or None.

    Neuron takes one index or an inclusive consecutive range ``a-b``, never a comma list:
    "0,1,2,3" -> "0-3", "2" -> "2"; "0,2" (gaps), "3,2" (order matters for CUDA's renumbering),
    "" (hide every GPU) and "GPU-<uuid>" forms have no Neuron spelling.
    """
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    numbers = [int(p) for p in parts]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return None
    if len(numbers) == 1:
        return str(numbers[0])
    return f"{numbers[0]}-{numbers[-1]}"


# The words in front of a command's program that are not it: more assignments, `env`, and the
# wrappers that run the next word (`nohup python ...`, `exec torchrun ...`).
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_]\w*=\S*")
_WRAPPERS = frozenset({"env", "nohup", "exec", "time", "nice", "stdbuf", "setsid"})
# A Python program: an interpreter (`python3`, `python3.11`, a venv's `.venv/bin/python`), a
# script run directly (`./train.py`), or a Python launcher of PyTorch jobs.
_PYTHON_PROGRAM = re.compile(r"(?:.*/)?(?:python(?:\d+(?:\.\d+)?)?|torchrun|accelerate|deepspeed|[\w./-]+\.py)")


def command_program(command: str) -> str | None:
    """The program a shell command runs after its assignments and wrappers (``CUDA_VISIBLE_DEVICES=0
    nohup python3 -m srv`` -> ``python3``), up to the first ``;`` / ``&`` / ``|``; None when the
    command is empty or the program is computed (``$CMD``)."""
    head = re.split(r"[;&|\n]", command, maxsplit=1)[0]
    for word in head.split():
        word = word.strip("'\"")
        if _ASSIGNMENT_WORD.fullmatch(word) or word in _WRAPPERS or word.startswith("-"):
            continue
        return None if word.startswith(("$", "{", "`")) else word
    return None


def runs_python(program: str | None) -> bool:
    """Whether ``program`` is a Python interpreter, script or PyTorch launcher; an unknown
    (computed) program counts as one, as the CUDA variable was written for a GPU program."""
    return program is None or _PYTHON_PROGRAM.fullmatch(program) is not None


def other_program_guidance(program: str) -> str:
    """What to say where the variable reaches a program that is not Python (``./llama-server``,
    ``java``): whether it runs PyTorch on the device cannot be known from the command."""
    return (
        f"`{program}` is not a Python program, and whether it runs PyTorch on the device cannot be known from "
        "the command: if it does, select its NeuronCores with NEURON_RT_VISIBLE_CORES (one index or an "
        "inclusive range such as 0-3); if it does not (a server or a tool that uses no NeuronCore), drop the variable"
    )
