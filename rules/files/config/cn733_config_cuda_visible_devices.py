"""CN733: ``CUDA_VISIBLE_DEVICES`` set in a config's environment (CI, compose, Kubernetes)."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, Safety, TextReport, Valid

from ..._shared.visible_devices import LAUNCHER_GUIDANCE, MULTI_PROCESS_LAUNCHER_RE, launcher_caveat, visible_cores
from .._helpers import TextRule
from ._helpers import CONFIG_KINDS, env_entries, splice

__all__ = ["CudaVisibleDevicesInConfig"]


_CVD = "CUDA_VISIBLE_DEVICES"
_NRVC = "NEURON_RT_VISIBLE_CORES"
_WORKFLOW = ".github/workflows/test.yml"


class CudaVisibleDevicesInConfig(TextRule):
    """
    ## What it does
    Rewrites ``CUDA_VISIBLE_DEVICES: "0,1"`` in the environment a config sets to
    ``NEURON_RT_VISIBLE_CORES: "0-1"``: GitHub Actions and GitLab CI ``env:`` / ``variables:``,
    docker compose ``environment:`` mappings, and Kubernetes ``env:`` lists of ``{name, value}``.
    Comma lists become inclusive ranges, as in launch scripts (CN701); compose's
    ``- CUDA_VISIBLE_DEVICES=0,1`` list items are read as shell and rewritten by CN701.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``; it selects NeuronCores with
    ``NEURON_RT_VISIBLE_CORES``, which takes one index or an inclusive range, never a comma list.

    ## Example
    ```yaml
    env:
      CUDA_VISIBLE_DEVICES: "0,1"
    ```
    becomes
    ```yaml
    env:
      NEURON_RT_VISIBLE_CORES: "0-1"
    ```

    ## Fix safety
    Safe for a literal consecutive list: the same indices stay visible. Unsafe when the file
    runs a multi-process launcher (``torchrun``, ``torch.distributed.run``, ``accelerate
    launch``, ``deepspeed``): each rank would reserve the whole range, since TorchNeuron gives
    each rank its own core only when the variable is unset (CN701 says more). A value computed when
    the job runs (``${{ matrix.gpu }}``, ``$GPU``) gets an unsafe rename of the name only.
    Lists without a range form (``0,2``), empty values and GPU UUIDs are reported. With
    ``--target accelerator`` it is reported: add ``NEURON_RT_VISIBLE_CORES`` next to it so the
    job still runs on GPUs.
    """

    code = "CN733"
    name = "config-cuda-visible-devices"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    file_kinds = CONFIG_KINDS
    triggers = (_CVD,)
    VALID = (
        Valid("env:\n  NEURON_RT_VISIBLE_CORES: 0-1\n", path=_WORKFLOW),
        Valid("notes:\n  CUDA_VISIBLE_DEVICES: not an environment here\n", path="config/train.yaml"),
        Valid("# env:\n#   CUDA_VISIBLE_DEVICES: 0\n", path=_WORKFLOW),
    )
    INVALID = (
        Invalid(
            "jobs:\n  test:\n    env:\n      CUDA_VISIBLE_DEVICES: \"0,1\"  # two GPUs\n",
            "jobs:\n  test:\n    env:\n      NEURON_RT_VISIBLE_CORES: \"0-1\"  # two GPUs\n",
            path=_WORKFLOW,
        ),
        Invalid(
            "services:\n  train:\n    environment:\n      CUDA_VISIBLE_DEVICES: 3\n",
            "services:\n  train:\n    environment:\n      NEURON_RT_VISIBLE_CORES: 3\n",
            path="docker-compose.yml",
        ),
        Invalid(
            "spec:\n  containers:\n  - name: t\n    env:\n    - name: CUDA_VISIBLE_DEVICES\n      value: \"0,1,2,3\"\n",
            "spec:\n  containers:\n  - name: t\n    env:\n    - name: NEURON_RT_VISIBLE_CORES\n      value: \"0-3\"\n",
            path="k8s/job.yaml",
        ),
        Invalid('{"env": {"CUDA_VISIBLE_DEVICES": "0"}}\n', '{"env": {"NEURON_RT_VISIBLE_CORES": "0"}}\n', path=".devcontainer/devcontainer.json"),
        Invalid("env:\n  CUDA_VISIBLE_DEVICES: 0,2\n", path=_WORKFLOW),
        # The job's environment reaches torchrun's ranks: each would reserve cores 0-1.
        Invalid(
            "jobs:\n  t:\n    env:\n      CUDA_VISIBLE_DEVICES: \"0,1\"\n    steps:\n      - run: torchrun --nproc_per_node=2 t.py\n",
            "jobs:\n  t:\n    env:\n      NEURON_RT_VISIBLE_CORES: \"0-1\"\n    steps:\n      - run: torchrun --nproc_per_node=2 t.py\n",
            unsafe=True,
            path=_WORKFLOW,
        ),
        Invalid(
            "env:\n  CUDA_VISIBLE_DEVICES: ${{ matrix.gpu }}\n",
            "env:\n  NEURON_RT_VISIBLE_CORES: ${{ matrix.gpu }}\n",
            unsafe=True,
            path=_WORKFLOW,
        ),
        Invalid("env:\n  CUDA_VISIBLE_DEVICES: \"0,1\"\n", None, path=_WORKFLOW, target="accelerator"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        raw = doc.raw
        if _CVD not in raw:
            return []
        out = []
        # The environment a config sets reaches every command it runs: a torchrun / deepspeed /
        # accelerate launch anywhere in the file makes the rewrite unsafe (each rank would
        # reserve the whole range; see rules/_shared/visible_devices.py).
        found = MULTI_PROCESS_LAUNCHER_RE.search(raw)
        launcher = " ".join(found.group(0).split()) if found else None
        for entry in env_entries(doc):
            if entry.name != _CVD:
                continue
            value = entry.value
            written = raw[entry.name_start:entry.name_end]
            shown = f"{_CVD}={value.value}" if value is not None else _CVD
            if settings.target != "neuron":
                cores = visible_cores(value.value) if value is not None else None
                out.append(TextReport(
                    entry.name_start, entry.name_end, f"`{shown}` selects GPUs only",
                    guidance=f"add `{_NRVC}: {cores or '<one index or a range a-b>'}` next to it for Trainium",
                    effort=Effort.LOW,
                ))
                continue
            renamed = written.replace(_CVD, _NRVC)
            if value is None or "$" in value.value:
                # Computed when the job runs: rename, and let the user check the value's form.
                out.append(TextReport(
                    entry.name_start, entry.name_end,
                    f"`{_CVD}` selects GPUs from a run-time value; Trainium reads {_NRVC}",
                    replacement=renamed, safety=Safety.UNSAFE,
                    guidance=f"{_NRVC} takes one index or an inclusive range `a-b`, not a comma list: make sure "
                    "the value has that form",
                    description=f"use {_NRVC}",
                ))
                continue
            cores = visible_cores(value.value)
            new_value = splice(value, cores) if cores is not None else None
            if new_value is None:
                why = "not a consecutive ascending list of indices" if value.value.strip() else "an empty value"
                out.append(TextReport(
                    entry.name_start, max(entry.name_end, value.end),
                    f"`{shown}` has no {_NRVC} equivalent ({why})",
                    guidance=f"{_NRVC} takes one index or an inclusive range of NeuronCores, e.g. `{_NRVC}: 0-1`",
                    effort=Effort.LOW,
                ))
                continue
            # One edit over the name, the value and what lies between (kept as written).
            start, end = min(entry.name_start, value.start), max(entry.name_end, value.end)
            pieces = sorted([(entry.name_start, entry.name_end, renamed), (value.start, value.end, new_value)])
            text, pos = [], start
            for a, b, new in pieces:
                text.append(raw[pos:a])
                text.append(new)
                pos = b
            text.append(raw[pos:end])
            out.append(TextReport(
                start, end, f"`{shown}` selects GPUs; NeuronCores are selected with `{_NRVC}={cores}`"
                + (launcher_caveat(launcher) if launcher else ""),
                replacement="".join(text), description=f"use {_NRVC}",
                safety=Safety.UNSAFE if launcher else Safety.SAFE,
                guidance=LAUNCHER_GUIDANCE if launcher else "",
            ))
        return out
