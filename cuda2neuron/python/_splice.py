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

A rewritten top-level statement is regenerated, but not all of it: a training script's whole loop
is often one ``def main():``, and one edit in it regenerated every line of it (the rewritten
files' code generation was about a tenth of `migrate`'s CPU on diffusers). Inside it, each block
statement the fix left as parsed, other than a block's last, stands for the text it was parsed
from (the lines from its leading blank and comment lines to the next statement's), cut with the
same line agreement at every depth, and is written as that text wherever the indentation
around it is still the one it was parsed under (``_Verbatim``); anywhere else (a fix moved it
into a new block) it is generated as before.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst._nodes.internal import CodegenState

from cuda2neuron.core import kept_tree, parse_kept

__all__ = ["Splicer"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+")


class Splicer:
    """The code of modules rewritten from ``first``, the module parsed from ``source``."""

    def __init__(self, first: cst.Module, source: str) -> None:
        self._first = first
        self._source = source
        self._pieces: dict[int, str] | None = None  # id(original top-level statement) -> its text
        # id(original statement inside a block) -> the lines its text spans (first, past the
        # last; cut when it is written: a statement's text is inside each of its ancestors')
        # and the indents it was parsed under
        self._nested: dict[int, tuple[int, int, tuple[str, ...]]] = {}
        self._source_lines: list[str] = []
        # id(original statement inside a block, its last too) -> its start line and indents
        self._block_starts: dict[int, tuple[int, tuple[str, ...]]] = {}
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
                (self._verbatim(stmt) if self._nested else stmt)._codegen(state)
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

    def block_statements(self) -> tuple[dict[int, int], dict[int, tuple[str, ...]]] | None:
        """``statement_lines`` for the statements inside blocks too, each with the indentation
        it was parsed under (``()`` at the top level); None where the text cannot be cut."""
        if self._statement_texts() is None:
            return None
        lines = dict(self._lines)
        indents: dict[int, tuple[str, ...]] = {}
        for key, (line, inside) in self._block_starts.items():
            lines[key] = line
            indents[key] = inside
        return lines, indents

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
        # The detectors may have parsed this very text already (a file they could not decide
        # goes to libcst with its CPython tree kept): one CPython parse per text, not two.
        tree = kept_tree(source)
        if tree is None:
            try:
                # Kept: a file that ends unchanged is read again by the residual pass (core/_kept_tree.py).
                tree = parse_kept(source)
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
        self._source_lines = lines
        groups = _grouped(tree.body)
        for stmt, group in zip(body, groups or ()):
            if len(group) == 1:
                self._cut_inside(stmt, group[0], lines, (), first.default_indent)
        return pieces

    def _cut_inside(
        self, stmt: cst.CSTNode, node: ast.AST, lines: list[str], indents: tuple[str, ...], default: str
    ) -> None:
        """Record the text of each statement in the blocks of ``stmt`` (parsed as ``node``)."""
        for suite, statements in _paired_blocks(stmt, node):
            if isinstance(suite, cst.If):  # an elif: its own blocks, at the same depth
                self._cut_inside(suite, statements[0], lines, indents, default)
            elif isinstance(suite, cst.IndentedBlock):
                inner = (*indents, default if suite.indent is None else suite.indent)
                self._cut_block(suite.body, statements, lines, inner, default)

    def _cut_block(
        self,
        body: Sequence[cst.BaseStatement],
        nodes: list[ast.stmt],
        lines: list[str],
        indents: tuple[str, ...],
        default: str,
    ) -> None:
        groups = _grouped(nodes)
        if groups is None or len(groups) != len(body):
            return  # the parsers disagree on this block: its statements are generated
        bounds = [_first_line(group[0]) - len(stmt.leading_lines) for group, stmt in zip(groups, body)]
        if any(a >= b for a, b in zip(bounds, bounds[1:])) or bounds[0] < 1:
            return
        for i, stmt in enumerate(body):
            self._block_starts[id(stmt)] = (bounds[i], indents)
            # A block's last statement is left out: where its text ends (the block's footer,
            # comments after it) is libcst's to say, not the line numbers'.
            if i + 1 < len(body):
                self._nested[id(stmt)] = (bounds[i], bounds[i + 1], indents)
            if len(groups[i]) == 1:
                self._cut_inside(stmt, groups[i][0], lines, indents, default)

    def _verbatim(self, node: cst.CSTNode) -> cst.CSTNode:
        """``node`` with every statement of its blocks that has a parsed text standing for it."""
        known = self._nested.get(id(node))
        if known is not None:
            first, past, indents = known
            return _Verbatim(node, "".join(self._source_lines[first - 1 : past - 1]), indents)  # type: ignore[arg-type]
        fields = _SUITE_FIELDS.get(type(node))
        if fields is None:
            return node
        changes: dict[str, object] = {}
        for field in fields:
            value = getattr(node, field)
            if isinstance(value, (tuple, list)):
                new_items = tuple(self._verbatim(item) for item in value)
                if any(a is not b for a, b in zip(new_items, value)):
                    changes[field] = new_items
            elif value is not None:
                new = self._verbatim(value)
                if new is not value:
                    changes[field] = new
        return node.with_changes(**changes) if changes else node


# The fields that hold a statement's blocks (and a block's statements).
_SUITE_FIELDS: dict[type, tuple[str, ...]] = {
    cst.IndentedBlock: ("body",),
    cst.FunctionDef: ("body",),
    cst.ClassDef: ("body",),
    cst.If: ("body", "orelse"),
    cst.Else: ("body",),
    cst.For: ("body", "orelse"),
    cst.While: ("body", "orelse"),
    cst.With: ("body",),
    cst.Try: ("body", "handlers", "orelse", "finalbody"),
    cst.ExceptHandler: ("body",),
    cst.Finally: ("body",),
}


@dataclass(frozen=True)
class _Verbatim(cst.BaseStatement):
    """A parsed statement written as the text it was parsed from, where the indentation around
    it is the one it was parsed under (libcst writes a parsed node back as it was read, and a
    statement's text depends on nothing else the code generation holds); else generated."""

    original: cst.BaseStatement
    text: str
    indents: tuple[str, ...]

    def _visit_and_replace_children(self, visitor: cst.CSTVisitorT) -> _Verbatim:  # type: ignore[name-defined]
        return self

    def _codegen_impl(self, state: CodegenState) -> None:
        if tuple(state.indent_tokens) == self.indents:
            state.add_token(self.text)
        else:
            self.original._codegen(state)


def _first_line(node: ast.stmt) -> int:
    """The line a statement starts on: its first decorator's for a decorated definition."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def _grouped(nodes: list[ast.stmt]) -> list[list[ast.stmt]] | None:
    """CPython's statements grouped as libcst's (``a; b`` is one libcst line); None where they
    do not start on increasing lines."""
    groups: list[list[ast.stmt]] = []
    last = 0
    for node in nodes:
        line = _first_line(node)
        if groups and line == last:
            groups[-1].append(node)
            continue
        if line < last:
            return None
        groups.append([node])
        last = line
    return groups


# libcst's statement beside CPython's for the same source: blocks only, then blocks and an else.
_SAME_KIND: tuple[tuple[type, tuple[type, ...]], ...] = (
    (cst.FunctionDef, (ast.FunctionDef, ast.AsyncFunctionDef)),
    (cst.ClassDef, (ast.ClassDef,)),
    (cst.With, (ast.With, ast.AsyncWith)),
    (cst.If, (ast.If,)),
    (cst.For, (ast.For, ast.AsyncFor)),
    (cst.While, (ast.While,)),
)


def _paired_blocks(stmt: cst.CSTNode, node: ast.AST) -> list[tuple[cst.CSTNode, list]]:
    """Each block of ``stmt`` beside the statements CPython parsed into it (an elif: the ``If``
    beside its node); nothing where the two are not the same kind of statement."""
    pairs: list[tuple[cst.CSTNode, list]] = []
    if any(isinstance(stmt, c) and isinstance(node, a) for c, a in _SAME_KIND[:3]):
        pairs.append((stmt.body, node.body))  # type: ignore[attr-defined]
    elif any(isinstance(stmt, c) and isinstance(node, a) for c, a in _SAME_KIND[3:]):
        pairs.append((stmt.body, node.body))  # type: ignore[attr-defined]
        orelse = stmt.orelse
        if isinstance(orelse, cst.Else) and node.orelse:
            pairs.append((orelse.body, node.orelse))
        elif isinstance(orelse, cst.If) and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            pairs.append((orelse, node.orelse))
    elif isinstance(stmt, cst.Try) and isinstance(node, ast.Try) and len(stmt.handlers) == len(node.handlers):
        pairs.append((stmt.body, node.body))
        pairs += [(h.body, a.body) for h, a in zip(stmt.handlers, node.handlers)]
        if stmt.orelse is not None and node.orelse:
            pairs.append((stmt.orelse.body, node.orelse))
        if stmt.finalbody is not None and node.finalbody:
            pairs.append((stmt.finalbody.body, node.finalbody))
    return pairs
