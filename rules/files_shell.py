"""CN701–CN705: shell launch scripts (``*.sh``, ``*.bash``, and ``!``/``%%bash`` notebook lines)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Safety, Valid
from cuda2neuron.documents.shell import (
    CODE,
    DQUOTE,
    ShellScript,
    is_gpu_count,
    unquote,
    word_end,
)
from cuda2neuron.core import TextReport

from ._dist_util import visible_cores as dist_visible_cores
from ._files_util import TextRule

__all__ = [
    "CudaEnvVarInScript",
    "CudaVisibleDevicesInScript",
    "GpuCountProcessCount",
    "NcclEnvVarInScript",
    "NvidiaSmiCall",
]

_SHELL = frozenset({"shell"})
_CVD = "CUDA_VISIBLE_DEVICES"
_NRVC = "NEURON_RT_VISIBLE_CORES"
_CVD_RE = re.compile(_CVD)
# `$CUDA_VISIBLE_DEVICES`, `${CUDA_VISIBLE_DEVICES:-0}`, or the bare name after export/unset.
_CVD_USE_RE = re.compile(r"(?:\$\{?)?(?<![\w])CUDA_VISIBLE_DEVICES(?![\w=])")


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


class CudaVisibleDevicesInScript(TextRule):
    """
    ## What it does
    Rewrites ``CUDA_VISIBLE_DEVICES=0,1`` in launch scripts to ``NEURON_RT_VISIBLE_CORES=0-1``.
    Prefix assignments, ``export`` and ``env`` forms are covered, comma lists become inclusive
    ranges, and later reads of ``$CUDA_VISIBLE_DEVICES`` are renamed with the assignment. Lists
    that are not consecutive, empty values and GPU UUIDs are reported.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``; it selects NeuronCores with
    ``NEURON_RT_VISIBLE_CORES``, which takes one index or an inclusive range (``0-3``), never a
    comma list. With ``--target accelerator`` the Neuron variable is added next to the CUDA one so
    the script keeps working on GPUs.

    ## Example
    ```bash
    CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py
    ```
    becomes
    ```bash
    NEURON_RT_VISIBLE_CORES=0-1 torchrun --nproc_per_node=2 train.py
    ```

    ## Fix safety
    Safe for literal consecutive lists: the same indices stay visible. A value computed at run
    time (``$LOCAL_RANK``) is renamed only as an unsafe fix, because a comma list arriving at
    run time would be rejected. Reads of the variable are renamed with the same safety as the
    assignments in the script, and only reported when an assignment could not be rewritten; a
    read inside ``$(...)`` (the value is computed with, e.g. counted) is an unsafe rename,
    because ``0-3`` does not split on commas as ``0,1,2,3`` did.
    """

    code = "CN701"
    name = "cuda-visible-devices-in-script"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    file_kinds = _SHELL
    triggers = (_CVD,)
    VALID = (
        Valid("NEURON_RT_VISIBLE_CORES=0-1 torchrun train.py\n", path="launch.sh"),
        Valid("# CUDA_VISIBLE_DEVICES=0,1 selects GPUs\n", path="launch.sh"),
        Valid("echo 'set CUDA_VISIBLE_DEVICES=0,1 first'\n", path="launch.sh"),
        Valid('echo "usage: CUDA_VISIBLE_DEVICES=0,1 ./run.sh"\n', path="launch.sh"),
        Valid("cat <<EOF\nCUDA_VISIBLE_DEVICES=0,1\nEOF\n", path="launch.sh"),
        Valid("MY_CUDA_VISIBLE_DEVICES=0,1 python a.py\n", path="launch.sh"),
        Valid(
            "CUDA_VISIBLE_DEVICES=0,1 NEURON_RT_VISIBLE_CORES=0-1 torchrun train.py\n",
            target="accelerator",
            path="launch.sh",
        ),
    )
    INVALID = (
        Invalid(
            "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py\n",
            "NEURON_RT_VISIBLE_CORES=0-1 torchrun --nproc_per_node=2 train.py\n",
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
            "CUDA_VISIBLE_DEVICES=0,1 torchrun train.py\n",
            "CUDA_VISIBLE_DEVICES=0,1 NEURON_RT_VISIBLE_CORES=0-1 torchrun train.py\n",
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
            return _add_neuron_variable(doc, assignments)
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
        out.append(TextReport(
            ns, ve,
            f"`{assignment}` selects GPUs only; add `{_NRVC}={cores}` for Trainium",
            replacement=f"{assignment} {_NRVC}={quote}{cores}{quote}",
            safety=Safety.SAFE,
            description=f"add {_NRVC}={cores}",
        ))
    return out


_NVIDIA_SMI_RE = re.compile(r"(?<![\w.-])nvidia-smi(?![\w-])")


class NvidiaSmiCall(TextRule):
    """
    ## What it does
    Reports ``nvidia-smi`` calls in launch scripts and notebook shell lines. Any invocation
    counts: ``!nvidia-smi``, ``NGPUS=$(nvidia-smi -L | wc -l)``, ``command -v nvidia-smi``.

    ## Why is this bad?
    ``nvidia-smi`` ships with the NVIDIA driver and does not exist on Trainium hosts: the script
    fails (or, with ``|| true``, silently counts zero devices).

    ## Example
    ```bash
    nvidia-smi --query-gpu=name --format=csv
    ```
    Use ``neuron-ls`` to list Neuron devices and NeuronCores and ``neuron-top`` to watch them.

    ## Fix safety
    Report only: what the call was for (a banner, a device count, a health check) decides the
    replacement.
    """

    code = "CN702"
    name = "nvidia-smi-call"
    file_kinds = _SHELL
    triggers = ("nvidia-smi",)
    VALID = (
        Valid("neuron-ls\n", path="launch.sh"),
        Valid("# run nvidia-smi to check the GPUs\n", path="launch.sh"),
        Valid('echo "nvidia-smi is not needed"\n', path="launch.sh"),
        Valid("pip install nvidia-smi-exporter\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("nvidia-smi\n", path="launch.sh"),
        Invalid("NGPUS=$(nvidia-smi -L | wc -l)\n", path="launch.sh"),
        Invalid('echo "$(/usr/bin/nvidia-smi -L | wc -l) GPUs"\n', path="launch.sh"),
        Invalid("if command -v nvidia-smi >/dev/null; then echo gpu; fi\n", path="launch.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        if "nvidia-smi" not in doc.text:
            return []
        return [
            TextReport(
                m.start(), m.end(),
                "`nvidia-smi` is NVIDIA-only and is not installed on Trainium hosts",
                guidance="list Neuron devices and NeuronCores with `neuron-ls`, watch them with "
                "`neuron-top`; drop GPU checks that depend on nvidia-smi",
                effort=Effort.LOW,
            )
            for m in doc.code_matches(_NVIDIA_SMI_RE)
        ]


_NPROC_RE = re.compile(r"--(nproc[_-]per[_-]node|num[_-]gpus)(=|[ \t]+)")
_VAR_RE = re.compile(r"\$\{?([A-Za-z_]\w*)")
_DEVICE_COUNT_RE = re.compile(r"cuda\.device_count")


class GpuCountProcessCount(TextRule):
    """
    ## What it does
    Reports launcher process counts taken from the number of GPUs. Covered:
    ``torchrun --nproc_per_node=$(nvidia-smi -L | wc -l)``, ``--nproc_per_node=gpu`` / ``auto``,
    a variable assigned such a count, deepspeed's ``--num_gpus``, and shell variables set from
    ``torch.cuda.device_count()``.

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
    file_kinds = _SHELL
    triggers = ("nproc", "num_gpus", "num-gpus", "device_count")
    VALID = (
        Valid("torchrun --nproc_per_node=2 train.py\n", path="launch.sh"),
        Valid("torchrun --nproc_per_node=$NCORES train.py\n", path="launch.sh"),
        Valid("# torchrun --nproc_per_node=$(nvidia-smi -L | wc -l)\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("torchrun --nproc_per_node=$(nvidia-smi -L | wc -l) train.py\n", path="launch.sh"),
        Invalid("torchrun --nproc-per-node gpu train.py\n", path="launch.sh"),
        Invalid("torchrun --nproc_per_node=auto train.py\n", path="launch.sh"),
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


_NCCL_ENV_RE = re.compile(r"(?:TORCH_)?NCCL_\w+")


class NcclEnvVarInScript(TextRule):
    """
    ## What it does
    Reports ``NCCL_*`` variables set in launch scripts. PyTorch's ``TORCH_NCCL_*`` count too.

    ## Why is this bad?
    TorchNeuron's ``neuron`` process-group backend does not use NCCL: the variables have no
    effect, and tuning meant for NCCL (``NCCL_IB_DISABLE``, ``NCCL_SOCKET_IFNAME``) gives a false
    sense of configuration. Multi-node Trainium traffic goes over EFA.

    ## Example
    ```bash
    export NCCL_DEBUG=INFO
    ```
    Delete the line for Trainium runs (keep it in a CUDA-only script).

    ## Fix safety
    Report only; with ``--target accelerator`` the variables are kept silently because the
    script must still run on GPUs.
    """

    code = "CN704"
    name = "nccl-env-var-in-script"
    file_kinds = _SHELL
    targets = frozenset({"neuron"})
    triggers = ("NCCL_",)
    VALID = (
        Valid("export OMP_NUM_THREADS=4\n", path="launch.sh"),
        Valid('echo "NCCL_DEBUG=INFO helps"\n', path="launch.sh"),
        Valid("export MY_NCCL_DEBUG=INFO\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("export NCCL_DEBUG=INFO  # ring setup\n", path="launch.sh"),
        Invalid("NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=NVL torchrun train.py\n", path="launch.sh"),
        Invalid("export TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n", path="launch.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        if "NCCL_" not in doc.text:
            return []
        return [
            TextReport(
                ns, ve,
                f"`{doc.text[ns:ne]}` configures NCCL, which the neuron process-group backend does not use",
                guidance="delete it for Trainium runs (keep it only in a CUDA launch script); "
                "the neuron backend sets up its own collectives",
                effort=Effort.LOW,
            )
            for ns, ne, _vs, ve in doc.assignments(_NCCL_ENV_RE)
        ]


# Variables the CUDA runtime, cuDNN/cuBLAS or PyTorch's CUDA code read. Named one by one (plus
# library prefixes): a script's own `CUDA_FLAG="--cuda"` is not a CUDA setting (trap 6).
_CUDA_ENV_RE = re.compile(
    r"CUDA_(?:LAUNCH_BLOCKING|DEVICE_ORDER|DEVICE_MAX_CONNECTIONS|MODULE_LOADING|HOME|PATH|ROOT"
    r"|AUTO_BOOST|FORCE_PTX_JIT|DISABLE_PTX_JIT|CACHE_\w+|MPS_\w+)"
    r"|PYTORCH_CUDA_\w+|PYTORCH_NO_CUDA_MEMORY_CACHING|PYTORCH_NVML_BASED_CUDA_CHECK|TORCH_CUDA_\w+"
    r"|TORCH_CUDNN_\w+|CUDNN_\w+|CUBLAS_\w+|CUBLASLT_\w+"
)


class CudaEnvVarInScript(TextRule):
    """
    ## What it does
    Reports CUDA runtime, library and build variables set in launch scripts. Covered:
    ``CUDA_LAUNCH_BLOCKING``, ``CUDA_DEVICE_ORDER``, ``PYTORCH_CUDA_ALLOC_CONF``,
    ``TORCH_CUDA_ARCH_LIST``, ``CUDA_HOME``, ``CUBLAS_*`` / ``CUDNN_*`` and the like
    (``CUDA_VISIBLE_DEVICES`` is CN701's; a script's own ``CUDA_FLAG`` is not a CUDA setting).

    ## Why is this bad?
    They configure the CUDA runtime, PyTorch's CUDA caching allocator or CUDA extension builds;
    on Trainium nothing reads them, so a setting the run relied on (synchronous launches for
    debugging, allocator tuning) silently stops applying.

    ## Example
    ```bash
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    ```
    Delete it for Trainium runs, or keep it in a CUDA-only script.

    ## Fix safety
    Report only. With ``--target accelerator`` they are kept silently (harmless on Trainium,
    needed on GPUs).
    """

    code = "CN705"
    name = "cuda-env-var-in-script"
    file_kinds = _SHELL
    targets = frozenset({"neuron"})
    triggers = ("CUDA_", "CUDNN_", "CUBLAS")
    VALID = (
        Valid("export NEURON_RT_VISIBLE_CORES=0-1\n", path="launch.sh"),
        Valid("echo $CUDA_HOME\n", path="launch.sh"),
        Valid("USE_CUDA=0 python setup.py develop\n", path="launch.sh"),
        Valid('CUDA_FLAG="--cuda"\npython main.py $CUDA_FLAG\n', path="launch.sh"),
    )
    INVALID = (
        Invalid("export CUDA_LAUNCH_BLOCKING=1\n", path="launch.sh"),
        Invalid("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py\n", path="launch.sh"),
        Invalid("TORCH_CUDA_ARCH_LIST='8.0;9.0' pip install -e .\n", path="launch.sh"),
        Invalid("export CUBLAS_WORKSPACE_CONFIG=:4096:8\n", path="launch.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        if not any(t in doc.text for t in cls.triggers):
            return []
        return [
            TextReport(
                ns, ve,
                f"`{doc.text[ns:ne]}` configures CUDA and has no effect on Trainium",
                guidance="delete it for Trainium runs (keep it only in a CUDA launch script)",
                effort=Effort.LOW,
            )
            for ns, ne, _vs, ve in doc.assignments(_CUDA_ENV_RE)
        ]
