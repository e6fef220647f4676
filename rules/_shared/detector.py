"""The frame every rule's detector on CPython's ``ast`` shares (``Rule.detect``).

A detector subclasses ``AstDetector`` with the rule's ``visit_*`` / ``leave_*`` methods, which
``python/_ast_walk.walk_ast`` calls in libcst's order, and keeps each report as a tuple whose last
item is the node's ancestors. ``reports()`` walks the file and hands them back, or None where the
walk cannot tell what the libcst visitor would find; the engine then parses the file with libcst.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from cuda2neuron.core import Effort, Finding, Fix, Safety

__all__ = ["AstDetector", "may_be_linked"]


class AstDetector:
    def __init__(self, rule: type, file: Any) -> None:  # file: python.AstFile (rules name no engine type)
        self.rule = rule
        self.file = file
        self._reports: list[tuple[Any, ...]] = []

    def reports(self) -> list[tuple[Any, ...]] | None:
        """The walk's reports, or None: a visit could not tell (``Unsure``), or a report sits inside
        an f-string, where CPython 3.11 may misplace a node's position."""
        from cuda2neuron.python import AstWalk, Unsure, walk_ast

        self.ctx = AstWalk(self.file)
        try:
            walk_ast(self.ctx, self)
        except Unsure:
            return None
        if any(isinstance(a, ast.JoinedStr) for *_, above in self._reports for a in above):
            return None
        return self._reports

    def finding(self, node: ast.AST, message: str, guidance: str, effort: Effort, fix: Fix | None = None) -> Finding:
        """The rule's finding at ``node``, as its libcst visitor's report becomes one."""
        return Finding(
            code=self.rule.code,
            name=self.rule.name,
            message=message,
            path=self.file.path,
            span=self.file.span(node),
            fix=fix,
            guidance=guidance,
            effort=effort,
        )

    def edit(
        self, node: ast.AST, ancestors: tuple[object, ...], at: int, old: int, new: str, safety: Safety, description: str
    ) -> Fix:
        """The fix that replaces the ``old`` characters at text offset ``at`` (inside ``node``)
        with ``new``, as the visitor's replacement node's code reads (``generated_text``), noted
        for the span path (``record_edit``): a detector that builds its fixes here lets the
        engine apply them without libcst. Raises ``Unsure``."""
        from cuda2neuron.python import generated_text, record_edit

        fix = Fix(safety, generated_text(self.file, node, ancestors, at, old, new), description)
        record_edit(self.file, fix, node, ancestors, at, old, new)
        return fix


# What the program pass (python/_flows.py) needs to find before it links a report to other code:
# a CUDA fact (`torch.cuda.is_available()`, `x.is_cuda`, a "cuda" string, an f-string spelling
# "cuda"), or a scheduler's GPU resource name. `.cuda(` method calls, a `def cuda(` and a
# suppression comment's marker are no such fact.
_LINK_WORDS = re.compile(r"cuda|GPU|num_gpus")
_CUDA_METHOD = re.compile(r"(?:\.|\bdef)\s*cuda\s*\(|#\s*cuda2neuron:")
_MESSAGE_CALLS = frozenset({"print", "warn", "warning", "info", "debug", "error", "exception", "critical", "fatal", "log"})


def may_be_linked(file: Any, node: ast.AST, ancestors: tuple[object, ...]) -> bool:
    """Could ``link_groups``' program pass (``_flows.link_program``) tie a report with a fix at
    ``node`` to other code, changing its safety or guidance? It links a value bound to a name
    (an assignment, a parameter's default, a return, a command-line option, a registered buffer)
    to the tests that ask about CUDA with the name, and a message (a ``raise``, an f-string, a
    print or log call) to the CUDA test that guards it. Said no only where that cannot happen:
    the value flows nowhere (an expression statement, a ``with`` item) and is no message, or the
    file holds no word any such reader or guard needs. A detector answers None (libcst decides)
    where this says yes."""
    from cuda2neuron.python import ArgNode, dotted_name

    child: object = node
    binds = False
    for anc in reversed(ancestors):
        if isinstance(anc, (ast.JoinedStr, ast.Raise)):
            return True
        if isinstance(anc, ast.Call):
            name = dotted_name(anc.func)
            if name is not None and name.rsplit(".", 1)[-1] in _MESSAGE_CALLS:
                return True
        if isinstance(anc, (ast.arguments, ast.Return, ast.Lambda)) or (isinstance(anc, ArgNode) and anc.keyword is not None):
            binds = True
        if isinstance(anc, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if isinstance(child, (ast.Compare, ast.UnaryOp, ast.BoolOp)):
                return True  # a flag: every test of its name asks about CUDA
            binds = True
        if isinstance(anc, ast.stmt):
            break
        child = anc
    if not binds and not any(isinstance(a, ast.Call) for a in ancestors):
        return False
    return _LINK_WORDS.search(_CUDA_METHOD.sub("", file.text)) is not None
