"""CN409's visitor (``cn409_nccl_name_left.py``) on CPython's ``ast``: its raw reports, whose once
per unit and silence where another rule reports are the engine's (``python/_ast_nets.py``).
Unsure (the file goes to libcst): an implicit concatenation spelling "nccl" (libcst reads each
part alone); a report inside an f-string's placeholder (``AstDetector.reports``)."""

from __future__ import annotations

import ast

from cuda2neuron.core import Effort, Finding
from cuda2neuron.python import Unsure

from .._shared.detector import AstDetector
from .._shared.nets_ast import is_text
from ..device._strings_ast import literal_text, simple_string

__all__ = ["NcclNameDetector"]


class NcclNameDetector(AstDetector):
    def __init__(self, rule: type, file, message: str, guidance: str) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self.message = message
        self.guidance = guidance

    def findings(self) -> list[Finding] | None:
        return self.made_findings()

    def _finding(self, node: ast.AST, _ancestors: object) -> Finding:
        return self.finding(node, self.message, self.guidance, Effort.LOW)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or isinstance(self.ctx.parent, ast.JoinedStr):
            return  # bytes have no string value; an f-string's text is no SimpleString (a string
            # inside a placeholder is one: a report there leaves the walk unsure, see reports())
        text = literal_text(self.file, node)
        if not simple_string(self.file, node):
            if "nccl" in node.value or "nccl" in text:
                raise Unsure("an implicit concatenation: libcst reads each part alone")
            return
        if "nccl" not in text or node.value != "nccl":
            return
        ancestors = self.ctx.ancestors
        if is_text(ancestors, node):
            return
        parent = ancestors[-1] if ancestors else None
        if isinstance(parent, ast.Dict) and _has_neuron_entry(parent):
            return  # a backend table the port extended (CN402)
        self._reports.append((node, tuple(ancestors)))


def _has_neuron_entry(table: ast.Dict) -> bool:
    return any(isinstance(k, ast.Constant) and type(k.value) is str and "neuron" in k.value for k in table.keys)
