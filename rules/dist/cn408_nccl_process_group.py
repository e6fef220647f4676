"""CN408: NCCL's own process-group class and its options."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.names import is_reference
from .._shared.nets import unit_of
from .._shared.strings import string_value

__all__ = ["NcclProcessGroup"]

_CLASS = "ProcessGroupNCCL"
# vLLM's NCCL communicator, which RL recipes use to push weights to inference workers.
_COMMUNICATOR = "PyNcclCommunicator"
_CLASSES = (_CLASS, _COMMUNICATOR)
# Where torch defines it; `torch.distributed` re-exports it only in builds with NCCL.
_QUALNAMES = frozenset(
    {
        "torch.distributed.ProcessGroupNCCL",
        "torch.distributed.distributed_c10d.ProcessGroupNCCL",
        "torch._C._distributed_c10d.ProcessGroupNCCL",
        # torchft's fault-tolerant wrapper of the same backend.
        "torchft.ProcessGroupNCCL",
        "torchft.process_group.ProcessGroupNCCL",
        "vllm.distributed.device_communicators.pynccl.PyNcclCommunicator",
    }
)
_MODULES = frozenset(q.rpartition(".")[0] for q in _QUALNAMES)

_GUIDANCE = (
    "On Trainium the process group is the neuron backend's: NCCL's class is absent from a build "
    "without NCCL and its options (high-priority streams, NCCL config) do not apply. Pass no "
    "NCCL options on the Trainium path (init_process_group / new_group without pg_options), or "
    'keep them behind `dist.get_backend() == "nccl"`.'
)


_COMMUNICATOR_GUIDANCE = (
    "vLLM's communicator drives NCCL directly and has no neuron counterpart: send the weights "
    "with the neuron process group's collectives (dist.broadcast over a group that spans trainer "
    "and inference ranks) or through the inference engine's own weight-loading API."
)


class NcclProcessGroup(Rule):
    """
    ## What it does
    Reports uses of NCCL's process-group class: ``dist.ProcessGroupNCCL.Options(...)`` passed as
    ``pg_options``, ``isinstance(pg, dist.ProcessGroupNCCL)``, and the look-up
    ``hasattr(dist, "ProcessGroupNCCL")`` that guards them; torchft's ``ProcessGroupNCCL`` and
    vLLM's ``PyNcclCommunicator`` (torchtune's RL weight sync) too.

    ## Why is this bad?
    The port's process group runs the ``"neuron"`` backend. NCCL's class exists only in builds
    of torch with NCCL, so its options either fail to build or configure a backend the port
    never creates; an ``isinstance`` test on it is always false on Trainium.

    ## Example
    ```python
    opts = dist.ProcessGroupNCCL.Options(is_high_priority_stream=True) if hasattr(dist, "ProcessGroupNCCL") else None
    ```
    is reported: on the Trainium path pass no NCCL options.

    ## Fix safety
    Display only: what replaces NCCL's tuning on Trainium, if anything, is the user's call.
    """

    code = "CN408"
    name = "nccl-process-group"
    triggers = _CLASSES
    VALID = (
        "class ProcessGroupNCCL:\n    pass\n\nx = ProcessGroupNCCL()\n",  # the project's own class
        'import torch.distributed as dist\nok = hasattr(dist, "ProcessGroupGloo")\n',
        'print("ProcessGroupNCCL timed out")\n',
    )
    INVALID = (
        Invalid(
            "import torch.distributed as dist\n"
            "opts = dist.ProcessGroupNCCL.Options(is_high_priority_stream=True) if hasattr(dist, 'ProcessGroupNCCL') else None\n"
        ),
        Invalid("import torch.distributed as dist\nif isinstance(pg, dist.ProcessGroupNCCL):\n    pass\n"),
        Invalid("from torch.distributed import ProcessGroupNCCL\nopts = ProcessGroupNCCL.Options()\n"),
        Invalid("from torch._C._distributed_c10d import ProcessGroupNCCL\n", target="accelerator"),
        Invalid("import torchft\npg = torchft.ProcessGroupNCCL(timeout=t)\n"),
        Invalid(
            "def sync(pg, device):\n"
            "    from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n"
            "    return PyNcclCommunicator(pg, device=device)\n"
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._statements: set[int] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _CLASSES and self.qualname(node) in _QUALNAMES:
            self._report(node, f"`{self.context.code(node)}` is {_what(node.attr.value)}")

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in _CLASSES:
            return
        parent = self.context.parent
        if isinstance(parent, cst.ImportAlias):
            if self.context.scope.lookup(node.value) in _QUALNAMES:
                self._report(node, f"`{node.value}` is {_what(node.value)}")
            return
        if isinstance(parent, cst.Attribute) or not is_reference(self, node):
            return
        if self.context.scope.lookup(node.value) in _QUALNAMES:
            self._report(node, f"`{node.value}` is {_what(node.value)}")

    def visit_Call(self, node: cst.Call) -> None:
        # hasattr(dist, "ProcessGroupNCCL"): the guard in front of the options.
        func = node.func
        if not (isinstance(func, cst.Name) and func.value in ("hasattr", "getattr") and len(node.args) >= 2):
            return
        if string_value(node.args[1].value) == _CLASS and self.qualname(node.args[0].value) in _MODULES:
            self._report(node, f"`{self.context.code(node)}` asks for NCCL's process group")

    def _report(self, node: cst.CSTNode, message: str) -> None:
        # One finding per statement: the options and their guard share one.
        statement = unit_of(self.context.ancestors)
        if statement is not None:
            if id(statement) in self._statements:
                return
            self._statements.add(id(statement))
        guidance = _COMMUNICATOR_GUIDANCE if "vLLM" in message else _GUIDANCE
        self.report(node, message, guidance=guidance, effort=Effort.LOW)


def _what(cls: str) -> str:
    return "vLLM's NCCL communicator" if cls == _COMMUNICATOR else "NCCL's process group"
