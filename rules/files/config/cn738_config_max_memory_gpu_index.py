"""CN738: accelerate device maps in configs that name GPU indices, and memory plans that name CUDA devices."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from ..._shared.device_maps import CUDA_KEY_RE, GPU_KEY_RE, MAX_MEMORY_GUIDANCE
from .._helpers import TextRule
from ._helpers import CONFIG_EXAMPLE, CONFIG_KINDS

__all__ = ["MaxMemoryGpuIndexInConfig"]


def _named(part: object, name: str) -> bool:
    return isinstance(part, str) and part.replace("-", "_").lower() == name


class MaxMemoryGpuIndexInConfig(TextRule):
    """
    ## What it does
    Reports the Hugging Face / accelerate loading settings of a config (YAML, JSON, TOML) that
    name GPUs: a ``max_memory`` mapping keyed by a CUDA device name (``{"cuda:0": "20GiB"}``),
    once per mapping, and a ``device_map`` that is a GPU ordinal (``device_map: 0``,
    ``device_map: {"": 0}``). In code, CN111 reports and ports the same. Integer ``max_memory``
    keys (``{0: 20GiB}``) are left: torch reads an integer device as the current accelerator's
    index, so accelerate's plan places the model on neuron:0 (measured on the emulated device with
    accelerate 1.14.0 and transformers 5.25.0).

    ## Why is this bad?
    The config is handed to ``from_pretrained(**cfg)``: accelerate takes integer device indices,
    "cpu", "mps" and "disk" as ``max_memory`` keys and raises on a ``cuda:N`` name; a device map's
    integers are the GPU ordinals of the CUDA run.

    ## Example
    ```yaml
    model:
      device_map: auto
      max_memory:
        cuda:0: 20GiB
        cuda:1: 20GiB
    ```
    is reported: key the budget by the cores' indices (``0: 20GiB``), or load the model on one
    NeuronCore (``device_map: neuron``) and shard a model too large for one core with FSDP or
    tensor parallelism.

    ## Fix safety
    Report only: which cores a model uses, and how it is sharded, is the user's plan.
    """

    code = "CN738"
    name = "config-max-memory-gpu-index"
    file_kinds = CONFIG_KINDS
    triggers = ("max_memory", "device_map")
    VALID = (
        Valid("model:\n  device_map: auto\n  max_memory:\n    cpu: 60GiB\n", path=CONFIG_EXAMPLE),
        Valid('{"device_map": "neuron:0", "max_memory": {"cpu": "60GiB", "disk": "200GiB"}}\n', path="configs/load.json"),
        Valid("device_map: auto\n", path=CONFIG_EXAMPLE),
        # A project's own table under the word, not accelerate's plan.
        Valid("max_memory_gb: 20\n", path=CONFIG_EXAMPLE),
        # integer keys: the current accelerator's cores, neuron:0 and neuron:1 on Trainium (measured)
        Valid("model:\n  device_map: auto\n  max_memory:\n    0: 20GiB\n    1: 20GiB\n    cpu: 60GiB\n", path=CONFIG_EXAMPLE),
        Valid('[model.max_memory]\n0 = "20GiB"\n', path="config/model.toml"),
    )
    INVALID = (
        Invalid("model:\n  max_memory:\n    cuda:0: 20GiB\n    cuda:1: 20GiB\n", path=CONFIG_EXAMPLE),
        Invalid('{"device_map": "auto", "max_memory": {"cuda:0": "20GiB", "cpu": "60GiB"}}\n', path="configs/load.json"),
        Invalid("device_map: 0\n", path=CONFIG_EXAMPLE),
        Invalid('model_kwargs:\n  device_map:\n    "": 0\n', path=CONFIG_EXAMPLE),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out: list[TextReport] = []
        plans: set[tuple[int, tuple]] = set()  # max_memory mappings already reported (one finding each)
        for s in doc.scalars:
            path = s.path
            if len(path) >= 2 and _named(path[-2], "max_memory") and isinstance(path[-1], str) and CUDA_KEY_RE.fullmatch(path[-1]):
                plan = (s.document, path[:-1])
                if plan in plans:
                    continue
                plans.add(plan)
                start, end = doc.keys.get(plan, (s.start, s.end))
                out.append(TextReport(
                    start, end, f"`max_memory` keyed by a CUDA device name (`{path[-1]}`): accelerate reads only integer indices, \"cpu\", \"mps\" and \"disk\"",
                    guidance=MAX_MEMORY_GUIDANCE, effort=Effort.MEDIUM,
                ))
            elif _device_map_ordinal(path) and GPU_KEY_RE.fullmatch(s.value.strip()) and s.quote == "":
                out.append(TextReport(
                    s.start, s.end, f"`{s.value.strip()}` in a device map is a CUDA device index",
                    guidance=f'write the neuron device: "neuron:{s.value.strip()}"', effort=Effort.LOW,
                ))
        return out


def _device_map_ordinal(path: tuple) -> bool:
    """``device_map: 0`` or ``device_map: {"": 0}`` (a value of the map)."""
    return bool(path) and (_named(path[-1], "device_map") or (len(path) >= 2 and _named(path[-2], "device_map")))
