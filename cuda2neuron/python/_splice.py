"""A rewritten module's code from the file as read, regenerating only the statements that changed.

A fix rebuilds only the path from the module down to the node it replaces (``_rebuild``): every
top-level statement it does not touch is still the very object the parser made, and at the top
level (no indentation around it) such an object generates exactly the text it was parsed from.
So the code of a rewritten module is the original text of its untouched statements and the
generated code of the others, joined; a whole code generation of a file with one edit in it
generated thousands of unchanged lines (diffusers: 248 rewritten files, most edited in a few
statements).

The original text of a statement is cut by line: libcst gives a statement every blank and comment
line above it (``leading_lines``), CPython's ``ast`` gives the line each statement starts on
(its first decorator's for a decorated definition; statements joined by ``;`` share one libcst
line). Where the two do not agree to the line (the module's header and footer, the number of
statements) or the text has newlines libcst and CPython count differently (a lone CR), the module
is generated whole, as before: never a guess.
"""

from __future__ import annotations

import ast
import re
import warnings

import libcst as cst
from libcst._nodes.internal import CodegenState

__all__ = ["Splicer"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+")


class Splicer:
    """The code of modules rewritten from ``first``, the module parsed from ``source``."""

    def __init__(self, first: cst.Module, source: str) -> None:
        self._first = first
        self._source = source
        self._pieces: dict[int, str] | None = None  # id(original top-level statement) -> its text
        self._lines: dict[int, int] = {}  # id(original top-level statement) -> the line its text starts on
        self._ready = False
        self._header = ""
        self._footer = ""

    def code(self, module: cst.Module) -> str:
        """``module.code``, from the original text where ``module`` kept the parsed statements."""
        pieces = self._statement_texts()
        first = self._first
        if (
            pieces is None
            or module.default_indent != first.default_indent
            or module.default_newline != first.default_newline
            or not module.has_trailing_newline
        ):
            return module.code
        state = None
        out: list[str] = []
        for part, original in ((module.header, first.header), (module.footer, first.footer)):
            if part is not original:
                return module.code  # rare (an import helper moved the header): generated whole
        out.append(self._header)
        for stmt in module.body:
            text = pieces.get(id(stmt))
            if text is None:
                if state is None:
                    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
                start = len(state.tokens)
                stmt._codegen(state)
                text = "".join(state.tokens[start:])
            out.append(text)
        out.append(self._footer)
        code = "".join(out)
        if not code:
            return module.default_newline  # as Module._codegen_impl: an empty file keeps its newline
        return code

    def statement_lines(self) -> dict[int, int] | None:
        """The line (from 1) on which each top-level statement of the parsed module starts, its
        leading blank and comment lines included, keyed by ``id(statement)``; None where the
        text cannot be cut (see the module's docstring)."""
        return None if self._statement_texts() is None else self._lines

    def _statement_texts(self) -> dict[int, str] | None:
        if self._ready:
            return self._pieces
        self._ready = True
        self._pieces = self._cut()
        return self._pieces

    def _cut(self) -> dict[int, str] | None:
        first, source = self._first, self._source
        if "\r" in source or "\x00" in source or not first.has_trailing_newline:
            return None  # lone CRs, CRLF (kept simple), a last line without newline: generated whole
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # newer syntax than this interpreter's: libcst read it, CPython cannot
        starts: list[int] = []
        for node in tree.body:
            line = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            if starts and line == starts[-1]:
                continue  # `a; b`: one libcst line
            if starts and line < starts[-1]:
                return None
            starts.append(line)
        body = first.body
        if len(starts) != len(body):
            return None
        lines = _LINE.findall(source)
        if not source.endswith("\n"):
            return None
        # Line (1-based) each statement's text starts on, its leading blank/comment lines included.
        bounds = [start - len(stmt.leading_lines) for start, stmt in zip(starts, body)]
        footer_start = len(lines) + 1 - len(first.footer)
        edges = [1, *bounds, footer_start]
        if bounds and bounds[0] - 1 != len(first.header):
            return None
        if not bounds and footer_start - 1 != len(first.header):
            return None
        if any(a > b for a, b in zip(edges, edges[1:])) or (bounds and bounds[-1] > footer_start):
            return None
        self._header = "".join(lines[: edges[1] - 1])
        self._footer = "".join(lines[footer_start - 1 :])
        pieces: dict[int, str] = {}
        for i, stmt in enumerate(body):
            pieces[id(stmt)] = "".join(lines[bounds[i] - 1 : edges[i + 2] - 1])
            self._lines[id(stmt)] = bounds[i]
        return pieces
