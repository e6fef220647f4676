"""CN409: a "nccl" backend name no other rule ports or reports: the distributed family's safety net."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.nets import is_text
from .._shared.strings import string_value

__all__ = ["NcclNameLeft"]

_MESSAGE = '`"nccl"` names NCCL, the CUDA collectives backend'
_GUIDANCE = (
    'If this value selects the process-group backend (a config field, the option of a launcher or '
    'fault-tolerance library such as torchft), the Trainium run needs "neuron"; if it only labels '
    "NCCL's own settings, keep it and make sure the Trainium path does not take it."
)


class NcclNameLeft(Rule):
    """
    ## What it does
    Reports the string ``"nccl"`` where code uses it and no other rule ports or reports the
    statement: a config field (``process_group="nccl"``), a test of one
    (``if cfg.process_group == "nccl":``), a value returned or collected.

    It is the distributed family's safety net: CN401 ports ``"nccl"`` wherever it reaches
    ``init_process_group``/``new_group`` (directly, through a variable, a config or the
    project's own functions); what it cannot follow is reported here.

    ## Why is this bad?
    NCCL exists only for CUDA. A backend name that reaches a process group by a path the tool
    cannot follow (torchft's ``ProcessGroupNCCL`` chosen from a config string) still asks for
    NCCL on Trainium, with nothing in the report.

    ## Example
    ```python
    if config.process_group == "nccl":
        pg = torchft.ProcessGroupNCCL(timeout=timeout)
    ```
    is reported: choose the Neuron backend for the Trainium run.

    ## Fix safety
    Display only: what the value selects is what the tool could not follow. A backend table that
    already has a ``"neuron"`` entry, printed or logged values and docstrings are not reported.
    """

    code = "CN409"
    name = "nccl-name-left"
    triggers = ("nccl",)
    net = True
    VALID = (
        'print("nccl")\n',
        'def f():\n    "nccl"\n',
        'BACKENDS = {"cuda": "nccl", "neuron": "neuron"}\n',
        'name = "nccl_timeout"\n',
        'x = b"nccl"\n',
    )
    INVALID = (
        Invalid('cfg = FTConfig(process_group="nccl")\n'),
        Invalid('if config.process_group == "nccl":\n    pg = make_group()\n'),
        Invalid('def pick():\n    return "nccl"\n', target="accelerator"),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "nccl" not in node.value or string_value(node) != "nccl":
            return
        ancestors = self.context.ancestors
        if is_text(ancestors, node):
            return
        parent = self.context.parent
        if isinstance(parent, cst.DictElement) and _has_neuron_entry(ancestors[-2] if len(ancestors) >= 2 else None):
            return  # a backend table the port extended (CN402)
        self.report(node, _MESSAGE, guidance=_GUIDANCE, effort=Effort.LOW)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visitor's reports on ``ast`` (``_nccl_ast``), before the engine's net filter."""
        if "nccl" not in file.text:
            return []
        from ._nccl_ast import NcclNameDetector

        return NcclNameDetector(cls, file, _MESSAGE, _GUIDANCE).findings()


def _has_neuron_entry(table: cst.CSTNode | None) -> bool:
    if not isinstance(table, cst.Dict):
        return False
    for element in table.elements:
        if isinstance(element, cst.DictElement) and "neuron" in (string_value(element.key) or ""):
            return True
    return False
