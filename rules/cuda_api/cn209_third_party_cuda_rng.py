"""CN209: CUDA RNG state kept by model-parallel libraries (Megatron's ``get_cuda_rng_tracker``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.names import is_reference
from .._shared.tables import read_table

__all__ = ["ThirdPartyCudaRng"]

TABLE = Path(__file__).with_name("cuda_rng.toml")

_GUIDANCE = (
    "The library saves, swaps and seeds torch.cuda's generator itself (torch.cuda.get_rng_state "
    "/ set_rng_state / manual_seed), which the neuron device does not have: on Trainium the "
    "call fails or the device's dropout is no longer tracked per tensor-parallel rank. If the "
    "library is vendored in this project, its RNG module is ported with it (those calls become "
    "torch.neuron.get_rng_state / set_rng_state / manual_seed); otherwise use a model-parallel "
    "library that supports the neuron device, or seed with torch.neuron.manual_seed and give up "
    "per-rank RNG streams."
)


@lru_cache(maxsize=1)
def _table() -> dict[str, frozenset[str]]:
    """Module -> the names of it that keep CUDA RNG state."""
    data = read_table(TABLE)
    return {module: frozenset(row["names"]) for module, row in data["module"].items()}


@lru_cache(maxsize=1)
def _all_names() -> frozenset[str]:
    return frozenset().union(*_table().values())


def _library_module(qualified: str) -> str | None:
    """The table's module ``qualified`` (``pkg.mod.name``) lives in, also in a vendored copy
    (``fairseq.model_parallel.megatron.mpu.get_cuda_rng_tracker`` ends with ``megatron.mpu``)."""
    module, _, name = qualified.rpartition(".")
    for known, names in _table().items():
        if name in names and (module == known or module.endswith("." + known)):
            return known
    return None


class ThirdPartyCudaRng(Rule):
    """
    ## What it does
    Reports the CUDA RNG functions of model-parallel libraries (Megatron's CUDA RNG tracker and
    seeding). They are ``get_cuda_rng_tracker()`` (``.fork()``, ``.get_states()``, ``.set_states()``),
    ``model_parallel_cuda_manual_seed(seed)`` and ``CudaRNGStatesTracker``, from Megatron-LM
    (``megatron.mpu``, ``megatron.core.tensor_parallel``), apex's ``transformer.tensor_parallel``
    and DeepSpeed's activation checkpointing, also from a copy vendored inside the project
    (``fairseq.model_parallel.megatron.mpu``). The libraries and names are a data table,
    ``cuda_rng.toml``; names are resolved through the file's imports.

    ## Why is this bad?
    These functions keep one CUDA generator state per tensor-parallel rank and swap it in and
    out with ``torch.cuda.get_rng_state`` / ``set_rng_state``. The port rewrites the program's
    own ``torch.cuda`` RNG calls, not the library's: on Trainium the library still drives the
    CUDA generator, so the call fails, or dropout in tensor-parallel layers stops being
    reproducible, and checkpoints lose the tracker's states.

    ## Example
    ```python
    from megatron.core.tensor_parallel import get_cuda_rng_tracker
    with get_cuda_rng_tracker().fork():
        x = dropout(x)
    ```
    is reported: the tracker must come from a library that supports the neuron device.

    ## Fix safety
    Report only: what replaces the tracker depends on the model-parallel library the port uses.
    """

    code = "CN209"
    name = "third-party-cuda-rng"
    triggers = ("cuda_rng", "cuda_manual_seed", "CudaRNG")
    VALID = (
        # The project's own function of the same name, and torch's own RNG calls (CN201's).
        "def get_cuda_rng_tracker():\n    return None\nwith get_cuda_rng_tracker().fork():\n    pass\n",
        "import torch\ns = torch.cuda.get_rng_state()\n",
        "from megatron.core.tensor_parallel import get_cuda_rng_tracker\n",  # the import alone
    )
    INVALID = (
        Invalid(
            "from megatron.core.tensor_parallel import get_cuda_rng_tracker\n"
            "with get_cuda_rng_tracker().fork():\n    x = drop(x)\n"
        ),
        Invalid("from megatron import mpu\nmpu.model_parallel_cuda_manual_seed(1234)\n"),
        # A vendored copy keeps the library's module path as its tail.
        Invalid(
            "from fairseq.model_parallel.megatron.mpu import get_cuda_rng_tracker\n"
            "state = get_cuda_rng_tracker().get_states()\n"
        ),
        Invalid("import deepspeed\ndeepspeed.checkpointing.model_parallel_cuda_manual_seed(0)\n"),
        Invalid(
            "from apex.transformer.tensor_parallel import random\nt = random.CudaRNGStatesTracker()\n",
            target="accelerator",
        ),
    )

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in _all_names() or not is_reference(self, node):
            return
        if isinstance(self.context.parent, cst.ImportAlias):
            return  # the import alone is no use
        self._check(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _all_names():
            self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        qualified = self.qualname(node)
        if qualified is None:
            return
        module = _library_module(qualified)
        if module is None:
            return
        name = qualified.rpartition(".")[2]
        self.report(
            node,
            f"`{name}` ({module}) keeps CUDA RNG state for model-parallel regions; the neuron "
            "device has no CUDA generator",
            guidance=_GUIDANCE,
            effort=Effort.MEDIUM,
        )
