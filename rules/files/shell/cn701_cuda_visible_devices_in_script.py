"""CN701: ``CUDA_VISIBLE_DEVICES`` in launch scripts becomes ``NEURON_RT_VISIBLE_CORES``."""

from __future__ import annotations

import re
from dataclasses import replace

from cuda2neuron.core import Effort, Invalid, Safety, TextReport, Valid
from cuda2neuron.documents.shell import CODE, DQUOTE, SQUOTE, ShellScript, command_end, unquote

from ..._shared.visible_devices import (
    LAUNCHER_GUIDANCE, MULTI_PROCESS_LAUNCHER_RE, command_program, launcher_caveat, other_program_guidance, runs_python,
)
from ..._shared.visible_devices import visible_cores as dist_visible_cores
from .._helpers import TextRule

__all__ = ["CudaVisibleDevicesInScript"]


_CVD = "CUDA_VISIBLE_DEVICES"
_NRVC = "NEURON_RT_VISIBLE_CORES"
_CVD_RE = re.compile(_CVD)
# `$CUDA_VISIBLE_DEVICES`, `${CUDA_VISIBLE_DEVICES:-0}`, or the bare name after export/unset.
_CVD_USE_RE = re.compile(r"(?:\$\{?)?(?<![\w])CUDA_VISIBLE_DEVICES(?![\w=])")
# An assignment inside a quoted command another program runs (`screen -X stuff "CUDA_VISIBLE_DEVICES=0
# python3 -m worker"`, `bash -c '...'`, `ssh host "..."`): its value up to a space or a quote.
_QUOTED_CVD_RE = re.compile(r"(?<![\w$])CUDA_VISIBLE_DEVICES=([^\s;&|'\"\\]*)")


def visible_cores(value: str) -> tuple[str | None, str]:
    """``"0,1,2"`` -> ``("0-2", "")``; ``(None, why)`` when there is no range form.

    The conversion is the one the Python rule (CN405) uses; this adds the reason for scripts.
    """
    cores = dist_visible_cores(value)
    if cores is not None:
        return cores, ""
    if not value.strip():
        return None, "an empty value hides every GPU (a CPU-only run)"
    if not all(p.strip().isdigit() for p in value.split(",")):
        return None, "the value is not a list of device indices (GPU UUIDs and MIG names have no Neuron form)"
    return None, f"`{value}` is not a consecutive ascending list"


def launcher_reached(doc: ShellScript, value_end: int) -> str | None:
    """The multi-process launcher an assignment ending at ``value_end`` reaches, or None.

    A prefix (``X=0,1 torchrun ...``, ``env X=0,1 deepspeed ...``) reaches the command it
    prefixes; a statement of its own (``export X=0,1``) reaches every later command of the script.
    """
    text = doc.text
    end = command_end(text, value_end)
    if text[value_end:end].strip(" \t\\\n"):
        start, stop = value_end, end
    else:
        start, stop = value_end, len(text)
    for m in doc.code_matches(MULTI_PROCESS_LAUNCHER_RE):
        if start <= m.start() < stop:
            return " ".join(m.group(0).split())
    return None


class CudaVisibleDevicesInScript(TextRule):
    """
    ## What it does
    Rewrites ``CUDA_VISIBLE_DEVICES=0,1`` in launch scripts to ``NEURON_RT_VISIBLE_CORES=0-1``.
    Prefix assignments, ``export`` and ``env`` forms are covered, comma lists become inclusive
    ranges, and later reads of ``$CUDA_VISIBLE_DEVICES`` are renamed with the assignment. Lists
    that are not consecutive, empty values and GPU UUIDs are reported.

    A command string the script hands to another program (``screen -X stuff "CUDA_VISIBLE_DEVICES=0
    python3 -m worker"``, ``tmux send-keys``, ``bash -c '...'``) is read the same way: the assignment
    at the start of the quoted command, or after its ``;`` / ``&&`` / ``|``.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``; it selects NeuronCores with
    ``NEURON_RT_VISIBLE_CORES``, which takes one index or an inclusive range (``0-3``), never a
    comma list. With ``--target accelerator`` the Neuron variable is added next to the CUDA one so
    the script keeps working on GPUs.

    ## Example
    ```bash
    CUDA_VISIBLE_DEVICES=0,1 python train.py
    ```
    becomes
    ```bash
    NEURON_RT_VISIBLE_CORES=0-1 python train.py
    ```

    ## Fix safety
    Safe for literal consecutive lists in front of one process: the same indices stay visible.
    Unsafe when the assignment reaches a multi-process launcher (it prefixes ``torchrun``,
    ``python -m torch.distributed.run``, ``accelerate launch`` or ``deepspeed``, or is exported
    before one): on CUDA rank r took GPU r of the list, but a Neuron process reserves every core
    it sees (AWS's runtime configuration guide), and TorchNeuron's ``neuron`` process group gives
    each rank its own core only when ``NEURON_RT_VISIBLE_CORES`` is unset (pre-release source; not
    verified on a Trn2), so every rank may try to reserve the whole range. The guidance says to
    drop the variable for such a launcher. A value computed at run
    time (``$LOCAL_RANK``) is renamed only as an unsafe fix, because a comma list arriving at
    run time would be rejected. Reads of the variable are renamed with the same safety as the
    assignments in the script, and only reported when an assignment could not be rewritten; a
    read inside ``$(...)`` (the value is computed with, e.g. counted) is an unsafe rename,
    because ``0-3`` does not split on commas as ``0,1,2,3`` did. In a quoted command, a literal
    list in front of one Python process is a safe rewrite; in front of a program that is not
    Python nothing is rewritten (whether it uses a NeuronCore cannot be known from the script).
    """

    code = "CN701"
    name = "cuda-visible-devices-in-script"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    file_kinds = frozenset({"shell"})
    triggers = (_CVD,)
    VALID = (
        Valid("NEURON_RT_VISIBLE_CORES=0-1 torchrun train.py\n", path="launch.sh"),
        Valid("# CUDA_VISIBLE_DEVICES=0,1 selects GPUs\n", path="launch.sh"),
        Valid("echo 'set CUDA_VISIBLE_DEVICES=0,1 first'\n", path="launch.sh"),
        Valid('echo "usage: CUDA_VISIBLE_DEVICES=0,1 ./run.sh"\n', path="launch.sh"),
        Valid("cat <<EOF\nCUDA_VISIBLE_DEVICES=0,1\nEOF\n", path="launch.sh"),
        Valid("MY_CUDA_VISIBLE_DEVICES=0,1 python a.py\n", path="launch.sh"),
        Valid('tmux send-keys -t w "echo set CUDA_VISIBLE_DEVICES=0 first" Enter\n', path="launch.sh"),
        Valid(
            "CUDA_VISIBLE_DEVICES=0,1 NEURON_RT_VISIBLE_CORES=0-1 torchrun train.py\n",
            target="accelerator",
            path="launch.sh",
        ),
    )
    INVALID = (
        # FastChat's build-api.sh: the worker's command is typed into a screen session.
        Invalid(
            'screen -DRRS w0 -X stuff "CUDA_VISIBLE_DEVICES=0 python3 -m fastchat.serve.model_worker \\r"\n',
            'screen -DRRS w0 -X stuff "NEURON_RT_VISIBLE_CORES=0 python3 -m fastchat.serve.model_worker \\r"\n',
            path="build-api.sh",
        ),
        Invalid("tmux send-keys -t srv 'cd app && CUDA_VISIBLE_DEVICES=1 ./llama-server -m m.gguf' Enter\n", path="serve.sh"),
        Invalid("bash -c 'CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 train.py'\n", path="launch.sh"),
        Invalid('screen -S w -X stuff "CUDA_VISIBLE_DEVICES=0 python3 w.py\\r"\n', path="build-api.sh", target="accelerator"),
        Invalid(
            "CUDA_VISIBLE_DEVICES=0,1 python train.py\n",
            "NEURON_RT_VISIBLE_CORES=0-1 python train.py\n",
            path="launch.sh",
        ),
        # A multi-process launcher: each rank would reserve the whole range (unsafe).
        Invalid(
            "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py\n",
            "NEURON_RT_VISIBLE_CORES=0-1 torchrun --nproc_per_node=2 train.py\n",
            unsafe=True,
            path="launch.sh",
        ),
        Invalid(
            "export CUDA_VISIBLE_DEVICES=0,1,2,3\npython -m torch.distributed.run --nproc_per_node=4 train.py\n",
            "export NEURON_RT_VISIBLE_CORES=0-3\npython -m torch.distributed.run --nproc_per_node=4 train.py\n",
            unsafe=True,
            path="launch.sh",
        ),
        Invalid("export CUDA_VISIBLE_DEVICES=3\n", "export NEURON_RT_VISIBLE_CORES=3\n", path="launch.sh"),
        Invalid(
            'export CUDA_VISIBLE_DEVICES="0,1,2,3"\r\necho "$CUDA_VISIBLE_DEVICES"\r\n',
            'export NEURON_RT_VISIBLE_CORES="0-3"\r\necho "$NEURON_RT_VISIBLE_CORES"\r\n',
            path="launch.sh",
        ),
        Invalid(
            "env CUDA_VISIBLE_DEVICES=4,5 \\\n    python train.py  # two GPUs\n",
            "env NEURON_RT_VISIBLE_CORES=4-5 \\\n    python train.py  # two GPUs\n",
            path="launch.sh",
        ),
        # Non-consecutive: NEURON_RT_VISIBLE_CORES has no list form; the read stays as well.
        Invalid("export CUDA_VISIBLE_DEVICES=0,2\necho ${CUDA_VISIBLE_DEVICES}\n", path="launch.sh"),
        Invalid("CUDA_VISIBLE_DEVICES= python cpu_only.py\n", path="launch.sh"),
        Invalid(
            "CUDA_VISIBLE_DEVICES=$LOCAL_RANK python worker.py\n",
            "NEURON_RT_VISIBLE_CORES=$LOCAL_RANK python worker.py\n",
            unsafe=True,
            path="launch.sh",
        ),
        Invalid('python train.py --gpus "$CUDA_VISIBLE_DEVICES"\n', path="launch.sh"),
        # Computing with the value: the range form would change the result, so unsafe only.
        Invalid(
            "export CUDA_VISIBLE_DEVICES=0,1\nN=$(echo $CUDA_VISIBLE_DEVICES | tr , ' ' | wc -w)\n",
            "export NEURON_RT_VISIBLE_CORES=0-1\nN=$(echo $NEURON_RT_VISIBLE_CORES | tr , ' ' | wc -w)\n",
            unsafe=True,
            path="launch.sh",
        ),
        Invalid(
            "CUDA_VISIBLE_DEVICES=0,1 python train.py\n",
            "CUDA_VISIBLE_DEVICES=0,1 NEURON_RT_VISIBLE_CORES=0-1 python train.py\n",
            target="accelerator",
            path="launch.sh",
        ),
        Invalid(
            "CUDA_VISIBLE_DEVICES=0,1 torchrun train.py\n",
            "CUDA_VISIBLE_DEVICES=0,1 NEURON_RT_VISIBLE_CORES=0-1 torchrun train.py\n",
            unsafe=True,
            target="accelerator",
            path="launch.sh",
        ),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        if _CVD not in text:
            return []
        assignments = list(doc.assignments(_CVD_RE))
        reads = [m for m in _CVD_USE_RE.finditer(text) if _is_read(doc, m, {a[0] for a in assignments})]
        if settings.target == "accelerator":
            # A quoted command is reported only: the GPU run keeps its variable as written.
            quoted = [replace(r, replacement=None, guidance=r.guidance or f"add `{_NRVC}=<one index or a range a-b>` next to it")
                      for r in _quoted_commands(doc)]
            return _add_neuron_variable(doc, assignments) + quoted
        # One script, one spelling: renaming some assignments but not others (or not a read)
        # would leave a read of an unset variable. So the weakest case decides for all:
        # any list without a range form -> nothing is rewritten; any run-time value or any
        # computed read -> everything is an unsafe fix.
        plans = []
        level: Safety | None = Safety.SAFE
        for ns, ne, vs, ve in assignments:
            word = text[vs:ve]
            value = unquote(word)
            cores, why = visible_cores(value) if value is not None else (None, "")
            plans.append((ns, ne, ve, word, value, cores, why))
            if value is not None and cores is None:
                level = None
            elif value is None and level is Safety.SAFE:
                level = Safety.UNSAFE
        if level is Safety.SAFE and any(doc.in_substitution(m.start()) for m in reads):
            level = Safety.UNSAFE
        # A job-wide range in front of torchrun & co. may hand every rank every core: unsafe.
        launcher = next((hit for p in plans if (hit := launcher_reached(doc, p[2])) is not None), None)
        if launcher is not None and level is Safety.SAFE:
            level = Safety.UNSAFE
        blocked = next((f"`{text[p[0]:p[2]]}`" for p in plans if p[4] is not None and p[5] is None), "")
        out: list[TextReport] = []
        for ns, ne, ve, word, value, cores, why in plans:
            assignment = text[ns:ve]
            if value is not None and cores is None:
                out.append(TextReport(
                    ns, ve,
                    f"`{assignment}` has no {_NRVC} equivalent: {why}",
                    guidance=f"{_NRVC} takes one index or an inclusive range of NeuronCores, e.g. "
                    f"`{_NRVC}=0-1`; `NEURON_RT_NUM_CORES=2` asks for a number of cores instead",
                    effort=Effort.LOW,
                ))
                continue
            if value is None:
                message = f"`{assignment}` selects GPUs from a run-time value; Trainium reads {_NRVC}"
                guidance = f"{_NRVC} takes one index or an inclusive range `a-b`, not a comma list: " \
                    "make sure the value has that form"
                # Only the name is replaced: the value is code we do not need to rewrite.
                fix_span, replacement = (ns, ne), _NRVC
            else:
                message = f"`{assignment}` selects GPUs; NeuronCores are selected with `{_NRVC}={cores}`"
                guidance = ""
                quote = word[0] if word[:1] in ("'", '"') else ""
                fix_span, replacement = (ns, ve), f"{_NRVC}={quote}{cores}{quote}"
            if launcher is not None:
                message += launcher_caveat(launcher)
                guidance = f"{guidance.rstrip('.')}. {LAUNCHER_GUIDANCE}" if guidance else LAUNCHER_GUIDANCE
            if level is None:
                out.append(TextReport(
                    ns, ve, message + f" (not rewritten: {blocked} in this script has no range form)",
                    guidance=f"rename every {_CVD} of the script to {_NRVC} together, with values "
                    "that are one index or a range `a-b`",
                ))
                continue
            out.append(TextReport(
                *fix_span, message, replacement=replacement, safety=level, guidance=guidance,
                description=f"use {_NRVC}",
            ))
        out.extend(_quoted_commands(doc))
        for m in reads:
            name_start = m.end() - len(_CVD)
            message = f"reads `{_CVD}`; the Neuron runtime uses `{_NRVC}`"
            if doc.in_substitution(m.start()):
                # `$(echo $CUDA_VISIBLE_DEVICES | tr , '\n' | wc -l)` counts a comma list; the
                # Neuron value is a range (`0-3`), so the computation would silently change.
                message += " (computed with: a range `a-b` does not split on commas)"
            if level is None or not plans:
                out.append(TextReport(
                    m.start(), m.end(), message,
                    guidance=f"set and read `{_NRVC}` (one index or a range `a-b`) instead",
                ))
                continue
            out.append(TextReport(
                name_start, m.end(), message, replacement=_NRVC, safety=level,
                description=f"rename to {_NRVC} with its assignment",
            ))
        return out


def _quoted_commands(doc: ShellScript) -> list[TextReport]:
    """``CUDA_VISIBLE_DEVICES=`` at the start of a quoted command (or after its ``;`` / ``&&`` /
    ``|``): a command another program runs. A sentence that mentions it has words before it."""
    text, states = doc.text, doc.states
    out: list[TextReport] = []
    for m in _QUOTED_CVD_RE.finditer(text):
        state = states[m.start()]
        if state not in (DQUOTE, SQUOTE):
            continue
        quote = "'" if state == SQUOTE else '"'
        a = m.start()
        while a > 0 and states[a - 1] == state and text[a - 1] != quote:
            a -= 1
        before = text[a:m.start()].rstrip()
        if before and not before.endswith((";", "&&", "|", "(")):
            continue
        b = m.end()
        while b < len(text) and states[b] == state and text[b] != quote:
            b += 1
        rest, value = text[m.end():b], m.group(1)
        program = command_program(rest)
        assignment = m.group(0)
        if not runs_python(program):
            out.append(TextReport(
                m.start(), m.end(), f"`{assignment}` in a quoted command selects CUDA GPUs for `{program}`; Trainium reads {_NRVC}",
                guidance=other_program_guidance(program or ""), effort=Effort.LOW,
            ))
            continue
        cores = visible_cores(value)[0] if "$" not in value else None
        launcher = MULTI_PROCESS_LAUNCHER_RE.search(rest)
        if cores is None or launcher is not None:
            message = f"`{assignment}` in a quoted command selects GPUs; Trainium reads {_NRVC}"
            if launcher is not None:
                message += launcher_caveat(" ".join(launcher.group(0).split()))
            out.append(TextReport(
                m.start(), m.end(), message, effort=Effort.LOW,
                guidance=LAUNCHER_GUIDANCE if launcher is not None else
                f"{_NRVC} takes one index or an inclusive range `a-b` of NeuronCores, not a comma list",
            ))
            continue
        out.append(TextReport(
            m.start(), m.end(), f"`{assignment}` in a quoted command selects GPUs; NeuronCores are selected with `{_NRVC}={cores}`",
            replacement=f"{_NRVC}={cores}", safety=Safety.SAFE, description=f"use {_NRVC}",
        ))
    return out


def _is_read(doc: ShellScript, m: re.Match[str], assignment_starts: set[int]) -> bool:
    """``$CUDA_VISIBLE_DEVICES`` in code or double quotes, or the bare name after export/unset."""
    name_start = m.end() - len(_CVD)
    if name_start in assignment_starts:
        return False
    state = doc.states[m.start()]
    if m.group(0).startswith("$"):
        return state in (CODE, DQUOTE)
    return state == CODE and doc.at_word_start(m.start())


def _add_neuron_variable(doc: ShellScript, assignments) -> list[TextReport]:
    """--target accelerator: keep the CUDA variable and set the Neuron one next to it."""
    text = doc.text
    out: list[TextReport] = []
    for ns, ne, vs, ve in assignments:
        _, line_end = doc.line_bounds(ns)
        if _NRVC in text[ne:line_end]:
            continue  # already sets both: portable as it is
        word = text[vs:ve]
        value = unquote(word)
        assignment = text[ns:ve]
        cores, why = visible_cores(value) if value is not None else (None, "the value is computed at run time")
        if cores is None:
            out.append(TextReport(
                ns, ve,
                f"`{assignment}` selects GPUs; Trainium reads {_NRVC}, and {why}",
                guidance=f"add `{_NRVC}=<one index or a range a-b>` next to it",
            ))
            continue
        quote = word[0] if word[:1] in ("'", '"') else ""
        launcher = launcher_reached(doc, ve)
        out.append(TextReport(
            ns, ve,
            f"`{assignment}` selects GPUs only; add `{_NRVC}={cores}` for Trainium"
            + (launcher_caveat(launcher) if launcher else ""),
            replacement=f"{assignment} {_NRVC}={quote}{cores}{quote}",
            safety=Safety.UNSAFE if launcher else Safety.SAFE,
            guidance=LAUNCHER_GUIDANCE if launcher else "",
            description=f"add {_NRVC}={cores}",
        ))
    return out


