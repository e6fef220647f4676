"""CN412: ``CUDA_VISIBLE_DEVICES=...`` inside a command string that Python hands to a shell."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.strings import string_value
from .._shared.visible_devices import command_program, other_program_guidance, runs_python, visible_cores

__all__ = ["CudaVisibleDevicesInCommand"]

_VARIABLE = "CUDA_VISIBLE_DEVICES"
# The assignment where a shell reads one: first in the string or a line, after `;` / `&&` / `|` /
# `(` or a quote (`bash -c 'CUDA_VISIBLE_DEVICES=...`), or after `export` / `env`. A sentence
# that mentions it ("Set CUDA_VISIBLE_DEVICES=0,1 and ...") has a word before it.
_ASSIGN_RE = re.compile(
    r"(?:^|(?<=\n)|(?<=[;&|('\"])|(?<=[;&|('\"] )|(?<=export )|(?<=env ))([ \t]*)CUDA_VISIBLE_DEVICES=([^\s;&|'\"]*)"
)
# Launchers that start several processes: the SAFE rewrite is not made there (every rank would
# reserve the whole range; neuron-target-api-2.34.md, CN701's note).
_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate launch", "deepspeed", "mpirun")
_GUIDANCE = (
    "for a PyTorch program on Trainium set NEURON_RT_VISIBLE_CORES (one index or an inclusive range such as "
    "0-3, not a comma list); under a multi-process launcher drop it and let init_process_group(\"neuron\") give "
    "each rank its core"
)


class CudaVisibleDevicesInCommand(Rule):
    """
    ## What it does
    Reports ``CUDA_VISIBLE_DEVICES=...`` written inside a string that holds a shell command
    (``os.system(f"CUDA_VISIBLE_DEVICES={gpu} python train.py")``, a ``subprocess`` command run
    with ``shell=True``, a ``screen`` / ``tmux`` command line built in Python), and rewrites a
    literal single-process one to ``NEURON_RT_VISIBLE_CORES`` (``0,1,2,3`` becomes ``0-3``).

    ## Why is this bad?
    Launch scripts are read by CN701, but a program that starts its workers itself keeps the
    variable in a string: on Trainium nothing reads it, so every worker sees every NeuronCore
    and the jobs meant for different devices collide on the same cores.

    ## Example
    ```python
    os.system("CUDA_VISIBLE_DEVICES=2 python eval.py")
    ```
    becomes
    ```python
    os.system("NEURON_RT_VISIBLE_CORES=2 python eval.py")
    ```

    ## Fix safety
    Safe for a literal list of consecutive indices in a command without a multi-process
    launcher (the Neuron runtime reads one index or a range). Computed values (f-string
    placeholders), gaps, and launcher commands are reported: there each rank should get its
    core from ``init_process_group("neuron")``. With ``--target accelerator`` it is reported.
    A command whose program is not Python (``./llama-server``, ``java``; read past ``env``,
    ``nohup`` and other assignments) is reported and never rewritten: whether it runs PyTorch on
    the device cannot be known from the command, and the finding says so.
    """

    code = "CN412"
    name = "cuda-visible-devices-in-command"
    fixes = frozenset({Safety.SAFE})
    triggers = (_VARIABLE,)
    VALID = (
        'os.environ["NEURON_RT_VISIBLE_CORES"] = "0"\n',
        'print("set CUDA_VISIBLE_DEVICES to choose GPUs")\n',  # a sentence, not an assignment
        'name = "CUDA_VISIBLE_DEVICES"\n',  # CN405 reads the environment
        'HELP = "Set CUDA_VISIBLE_DEVICES=0,1 and NCCL_DEBUG=INFO when debugging hangs."\n',  # a sentence
    )
    INVALID = (
        Invalid('import os\nos.system("CUDA_VISIBLE_DEVICES=2 python eval.py")\n', 'import os\nos.system("NEURON_RT_VISIBLE_CORES=2 python eval.py")\n'),
        Invalid(
            "import subprocess\nsubprocess.run('CUDA_VISIBLE_DEVICES=0,1,2,3 python serve.py', shell=True)\n",
            "import subprocess\nsubprocess.run('NEURON_RT_VISIBLE_CORES=0-3 python serve.py', shell=True)\n",
        ),
        Invalid("import os\ngpu = 1\nos.system(f\"CUDA_VISIBLE_DEVICES={gpu} python train.py\")\n"),
        Invalid("import os\nos.system('cd out && CUDA_VISIBLE_DEVICES=3 python eval.py')\n", "import os\nos.system('cd out && NEURON_RT_VISIBLE_CORES=3 python eval.py')\n"),
        Invalid("cmd = \"screen -dmS job bash -c 'CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 train.py'\"\n"),
        Invalid('import os\nos.system("CUDA_VISIBLE_DEVICES=2 python eval.py")\n', target="accelerator"),
        # Not a Python program: whether it uses a NeuronCore cannot be known, so nothing is rewritten.
        Invalid('import subprocess\nsubprocess.Popen("CUDA_VISIBLE_DEVICES=1 ./llama-server -m m.gguf", shell=True)\n'),
        Invalid("import os\nos.system('cd out && CUDA_VISIBLE_DEVICES=0 nohup python3 -m srv.worker &')\n",
                "import os\nos.system('cd out && NEURON_RT_VISIBLE_CORES=0 nohup python3 -m srv.worker &')\n"),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if _VARIABLE not in node.value:
            return
        text = string_value(node)
        if text is None:
            return
        matches = list(_ASSIGN_RE.finditer(text))
        if not matches:
            return
        others = [p for m in matches if not runs_python(p := command_program(text[m.end():]))]
        if others:
            # The child is no Python program: a rewrite would guess what it runs.
            self.report(
                node, f"`{_VARIABLE}=` in a command string selects CUDA GPUs for `{others[0]}`; nothing reads it on Trainium",
                guidance=other_program_guidance(others[0]), effort=Effort.LOW,
            )
            return
        cores = [visible_cores(m.group(2)) for m in matches]
        launcher = any(word in text for word in _LAUNCHERS)
        message = f"`{_VARIABLE}=` in a command string selects CUDA GPUs; nothing reads it on Trainium"
        if self.context.settings.target == "neuron" and not launcher and all(cores):
            # Spliced into the literal as written (its quotes, prefix and escapes kept): the
            # assignment itself holds no character a literal escapes.
            raw = iter(cores)
            written = _ASSIGN_RE.sub(lambda m: f"{m.group(1)}NEURON_RT_VISIBLE_CORES={next(raw)}", node.value)
            self.report(
                node, message, replacement=node.with_changes(value=written),
                description="select the NeuronCores with NEURON_RT_VISIBLE_CORES",
            )
            return
        self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText) and _ASSIGN_RE.search(part.value) is not None:
                self.report(
                    node, f"`{_VARIABLE}=` in a command string selects CUDA GPUs; nothing reads it on Trainium",
                    guidance=_GUIDANCE, effort=Effort.LOW,
                )
                return
