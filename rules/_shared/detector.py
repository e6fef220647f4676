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

    def made_findings(self) -> list[Finding] | None:
        """The walk's reports, each made a finding by the subclass's ``_finding(*report)``; None
        where the walk cannot tell or a finding cannot be made as libcst would (``Unsure``)."""
        from cuda2neuron.python import Unsure

        reports = self.reports()
        if reports is None:
            return None
        try:
            return [self._finding(*report) for report in reports]  # type: ignore[attr-defined]
        except Unsure:
            return None

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
# a CUDA fact as `_device_truth.asks_cuda` reads one (`x.is_cuda`, `cuda.is_available()` /
# `device_count()` / `is_initialized()`, a "cuda" or "cuda:N" literal), a scheduler's GPU
# resource name ("GPU", "num_gpus", which `_groups._names_cuda` holds a group by), or an
# f-string whose text spells "cuda" (`_flows._spells_cuda`, looked for on the tree). A name
# such as `use_cuda` or a `.cuda()` call is none of them.
_CUDA_FACT = re.compile(
    r"\bis_cuda\b|\bcuda\s*\.\s*(?:is_available|device_count|is_initialized)\b|[\"']cuda[\"':]|[\"'](?:GPU|num_gpus)[\"']"
)
_MESSAGE_CALLS = frozenset({"print", "warn", "warning", "info", "debug", "error", "exception", "critical", "fatal", "log"})


def may_be_linked(file: Any, node: ast.AST, ancestors: tuple[object, ...]) -> bool:
    """Could ``link_groups``' program pass (``_flows.link_program``) tie a report with a fix at
    ``node`` to other code, changing its safety or guidance? It links a value bound to a name
    (an assignment, a parameter's default, a return, a command-line option, a registered buffer)
    to the tests that ask about CUDA with the name, and a message (a ``raise``, an f-string, a
    print or log call) to the CUDA test that guards it. Said no only where that cannot happen:
    the value flows nowhere (an expression statement, a ``with`` item) and is no message, or the
    text its readers could be in holds no word any such reader needs: a plain function's, for a
    value bound to plain names in it (not a method's: ``self`` may keep it for the class), else
    the file's. A detector answers None (libcst decides) where this says yes."""
    from cuda2neuron.python import ArgNode

    child: object = node
    wide = local = False
    for anc in reversed(ancestors):
        if isinstance(anc, (ast.JoinedStr, ast.Raise)):
            return True
        if isinstance(anc, ast.Call):
            # `_flows._in_message`: a call whose dotted callee's last part shows text.
            if _last_dotted_part(anc.func) in _MESSAGE_CALLS:
                return True
            if isinstance(anc.func, ast.Attribute) and anc.func.attr in ("register_buffer", "register_parameter"):
                wide = True
        if isinstance(anc, (ast.arguments, ast.Return, ast.Lambda)) or (isinstance(anc, ArgNode) and anc.keyword is not None):
            wide = True
        if isinstance(anc, (ast.Assign, ast.AnnAssign)):
            if isinstance(child, (ast.Compare, ast.UnaryOp, ast.BoolOp)):
                return True  # a flag: every test of its name asks about CUDA
            # `_flows._binding`: names bound in a function are read there (a method's may be
            # kept on `self`), names bound at module or class level by nobody it follows; an
            # attribute (`self.device`, `runner.device`) by a class; a tuple or a subscript
            # binds nothing it follows.
            targets = anc.targets if isinstance(anc, ast.Assign) else [anc.target]
            wide = wide or any(isinstance(t, ast.Attribute) for t in targets)
            local = any(isinstance(t, ast.Name) for t in targets) and _function(ancestors) is not None
        if isinstance(anc, ast.stmt):
            break
        child = anc
    if not (wide or local):
        return False
    where: ast.AST = file.tree
    if local and not wide:
        where = _plain_function(ancestors) or where
    text = file.text if where is file.tree else file.segment(where)
    if _CUDA_FACT.search(text):
        return True
    return any(
        isinstance(n, ast.JoinedStr) and any(isinstance(p, ast.Constant) and "cuda" in str(p.value) for p in n.values)
        for n in ast.walk(where)
    )


def _function(ancestors: tuple[object, ...]) -> ast.AST | None:
    """The function whose local scope holds a node (``_flows._function``): None at module or
    class level."""
    for anc in reversed(ancestors):
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return anc
        if isinstance(anc, (ast.ClassDef, ast.Lambda)):
            return None
    return None


def _plain_function(ancestors: tuple[object, ...]) -> ast.AST | None:
    """The innermost function around a node, where it is no method (directly in a class body)."""
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None if i > 0 and isinstance(ancestors[i - 1], ast.ClassDef) else anc
        if isinstance(anc, (ast.ClassDef, ast.Lambda)):
            return None
    return None


def _last_dotted_part(node: ast.AST) -> str | None:
    """The last part of a pure ``a.b.c`` chain (``dotted_name`` on ``ast``), None for others."""
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    while isinstance(node, ast.Attribute):
        node = node.value
    return last if isinstance(node, ast.Name) else None
