"""CN412: ``CUDA_VISIBLE_DEVICES=...`` inside a command string that Python hands to a shell."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.nets import is_bare_string, unit_of
from .._shared.strings import string_value
from .._shared.visible_devices import command_program, other_program_guidance, runs_python, visible_cores

__all__ = ["CudaVisibleDevicesInCommand"]


def _concatenation(ancestors, node: cst.CSTNode) -> tuple[str, int] | None:  # noqa: ANN001 - the chain above node
    """(the text of the implicit concatenation ``node`` is a piece of, where ``node``'s text
    starts in it), or None for a string standing alone. An f-string piece's placeholders are
    read as one word."""
    outer = None
    for above in reversed([a for a in ancestors if a is not node]):
        if not isinstance(above, cst.ConcatenatedString):
            break
        outer = above
    if outer is None:
        return None
    pieces: list[str] = []
    offset = 0
    stack: list[cst.CSTNode] = [outer]
    while stack:
        part = stack.pop()
        if isinstance(part, cst.ConcatenatedString):
            stack += [part.right, part.left]
            continue
        if part is node:
            offset = sum(map(len, pieces))
        if isinstance(part, cst.SimpleString):
            pieces.append(string_value(part) or "")
        elif isinstance(part, cst.FormattedString):
            pieces.append("".join(p.value if isinstance(p, cst.FormattedStringText) else "X" for p in part.parts))
    return "".join(pieces), offset

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
        # a docstring, and a sentence split over the pieces of one concatenation (unsloth's tests
        # and llama-server help text): a word stands before the assignment in the whole text
        'def test_one_visible(monkeypatch):\n    """CUDA_VISIBLE_DEVICES=1 -> only GPU 1 visible."""\n'
        '    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")\n',
        'hint = (\n    "hide the extra GPU with CUDA_VISIBLE_DEVICES (e.g. "\n    "CUDA_VISIBLE_DEVICES=0 exposes only the first GPU)."\n)\n',
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
        # a command built over the pieces of one concatenation: the piece starts the command
        Invalid('import os\nos.system(\n    "cd out && "\n    "CUDA_VISIBLE_DEVICES=2 python eval.py"\n)\n',
                'import os\nos.system(\n    "cd out && "\n    "NEURON_RT_VISIBLE_CORES=2 python eval.py"\n)\n'),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if _VARIABLE not in node.value:
            return
        text = string_value(node)
        if text is None:
            return
        matches = list(_ASSIGN_RE.finditer(text))
        if not matches or is_bare_string(unit_of(self.context.ancestors), node):
            return  # a docstring (`CUDA_VISIBLE_DEVICES=1 -> only GPU 1 visible.`) runs nothing
        whole = _concatenation(self.context.ancestors, node)
        if whole is not None:
            # One piece of `"... hide it with CUDA_VISIBLE_DEVICES (e.g. " "CUDA_VISIBLE_DEVICES=0
            # exposes ..."`: the value is the whole text, where a word stands before the assignment.
            joined, offset = whole
            kept = [m for m in matches if _ASSIGN_RE.match(joined, offset + m.start()) is not None]
            if len(kept) < len(matches):
                self._report_kept(node, text, kept)
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

    def _report_kept(self, node: cst.SimpleString, text: str, kept: list[re.Match[str]]) -> None:
        """The piece's assignments a shell reads in the whole concatenation, reported without a
        rewrite (the piece's other `CUDA_VISIBLE_DEVICES=` are prose)."""
        if kept:
            program = command_program(text[kept[0].end():])
            guidance = _GUIDANCE if runs_python(program) else other_program_guidance(program)
            self.report(
                node, f"`{_VARIABLE}=` in a command string selects CUDA GPUs; nothing reads it on Trainium",
                guidance=guidance, effort=Effort.LOW,
            )

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText) and _ASSIGN_RE.search(part.value) is not None:
                self.report(
                    node, f"`{_VARIABLE}=` in a command string selects CUDA GPUs; nothing reads it on Trainium",
                    guidance=_GUIDANCE, effort=Effort.LOW,
                )
                return
