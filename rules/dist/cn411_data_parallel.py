"""CN411: ``nn.DataParallel`` replicates the model over GPUs through CUDA's scatter and gather."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.names import call_qualname

__all__ = ["DataParallel"]

_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.data_parallel",
        "torch.nn.parallel.data_parallel.data_parallel",
    }
)

_GUIDANCE = (
    "For one NeuronCore, drop the wrapper and move its inputs to the device where it did (it copies "
    "host batches to the device); mind `model.module` in the code and the 'module.' prefix of the keys "
    "in checkpoints it saved. For several cores, run one process per core: DistributedDataParallel "
    'under torchrun with init_process_group("neuron").'
)


class DataParallel(Rule):
    """
    ## What it does
    Reports ``nn.DataParallel(model)`` (also ``torch.nn.parallel.DataParallel`` and the functional
    ``data_parallel(module, inputs)``), followed through aliases and from-imports.

    ## Why is this bad?
    DataParallel runs one process over several GPUs: each forward scatters the batch to the
    devices and gathers the outputs through CUDA's own copy kernels (``torch._C._scatter``), which
    a torch without CUDA does not have. On Trainium the wrapper picks up the neuron devices and
    stops at its first forward (``module 'torch._C' has no attribute '_scatter'``), after a port
    whose device rules left nothing to report. It is common in older research code
    (``model = nn.DataParallel(model).cuda()``), often under ``if torch.cuda.device_count() > 1``.

    ## Example
    ```python
    model = nn.DataParallel(Net()).cuda()
    ```

    ## Fix safety
    No fix: dropping the wrapper changes ``model.module``, the keys of every checkpoint the
    program saves or loads (``module.`` prefix) and who moves the inputs to the device (the
    wrapper copies host batches), and several cores need one process each
    (DistributedDataParallel and a launcher), which is a change of the program's structure.
    ``cuda2neuron validate`` compares a port that dropped it with the original that has it (the
    wrapped model is the root in both).
    """

    code = "CN411"
    name = "data-parallel"
    triggers = ("DataParallel", "data_parallel")
    reports_names = tuple(sorted(_WRAPPERS))
    VALID = (
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(torch.nn.Linear(2, 2))\n",
        # a check of what the checkpoint was saved from runs anywhere
        "import torch.nn as nn\nif isinstance(model, nn.DataParallel):\n    model = model.module\n",
        # the project's own class of the same name
        "class DataParallel:\n    pass\nm = DataParallel()\n",
    )
    INVALID = (
        Invalid("import torch.nn as nn\nmodel = nn.DataParallel(Net()).cuda()\n"),
        Invalid("import torch\nif torch.cuda.device_count() > 1:\n    model = torch.nn.DataParallel(model)\n"),
        Invalid("from torch.nn.parallel import DataParallel as DP\nmodel = DP(model, device_ids=[0, 1])\n"),
        Invalid("from torch.nn.parallel import data_parallel\nout = data_parallel(model, x, device_ids=[0, 1])\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if call_qualname(self, node) in _WRAPPERS:
            self.report(
                node,
                "nn.DataParallel scatters and gathers through CUDA's copy kernels (torch._C._scatter); "
                "on neuron it stops at its first forward",
                guidance=_GUIDANCE,
                effort=Effort.MEDIUM,
            )
