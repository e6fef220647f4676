"""Spans of a few nodes for the price of one code generation.

libcst's ``PositionProvider`` records a position for every node; we need them for the handful of
reported nodes only. A code-generation state that counts lines lazily, only when a wanted node
starts or ends, costs about one plain ``module.code``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import libcst as cst
from libcst._nodes.internal import CodegenState

from cuda2neuron.core import Span

__all__ = ["spans_and_code", "spans_in_statements", "spans_of"]


class _AllFound(Exception):
    """Every wanted span is known: the rest of the code generation would only be thrown away."""


class _SpanState(CodegenState):
    def __init__(self, module: cst.Module, wanted: set[int], stop_early: bool = False) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self._wanted = wanted
        self._stop_early = stop_early
        self._counted = 0
        self._line = 1
        self._col = 0
        self._after_cr = False  # the last text counted ended with a CR
        self._starts: dict[int, list[tuple[int, int]]] = {}
        self.spans: dict[int, Span] = {}
        self._syntactic: set[int] = set()

    def _position(self) -> tuple[int, int]:
        # The tokens added since the last call, counted as one string: a join and two searches
        # in C instead of a Python step per token (a file's tokens number in the hundreds of
        # thousands; diffusers: 4,476 calls walked 3.8M tokens one by one).
        tokens = self.tokens
        if self._counted < len(tokens):
            text = "".join(tokens[self._counted :])
            self._counted = len(tokens)
            if "\r" in text or self._after_cr:
                return self._count_any_newline(text)
            newlines = text.count("\n")
            if newlines:
                self._line += newlines
                self._col = len(text) - text.rfind("\n") - 1
            else:
                self._col += len(text)
        return self._line, self._col

    def _count_any_newline(self, text: str) -> tuple[int, int]:
        # A lone CR ends a line too (old Mac files; Python reads them with universal newlines,
        # and editors number them so): counting "\n" alone put every finding of a CR-only file
        # on line 1. Trap: a CRLF may be split between two counts — the LF of a CR counted
        # last time ends no line.
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = text.endswith("\r")
        newlines = text.count("\n") + text.count("\r") - text.count("\r\n")
        if newlines:
            self._line += newlines
            self._col = len(text) - max(text.rfind("\n"), text.rfind("\r")) - 1
        else:
            self._col += len(text)
        return self._line, self._col

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self._wanted:
            self._starts.setdefault(id(node), []).append(self._position())

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self._wanted:
            start = self._starts[key].pop()
            if key not in self._syntactic:
                end = self._position()
                self.spans[key] = Span(start[0], start[1], end[0], end[1])
            self._check_done()

    def _check_done(self) -> None:
        if self._stop_early and len(self.spans) == len(self._wanted):
            raise _AllFound

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        # libcst enters this for ~80% of the nodes it generates; its own is a @contextmanager,
        # whose generator costs more than the rest of the node's code generation. A plain
        # object does the same for the nodes we do not want (all but a handful).
        if id(node) not in self._wanted:
            return _NOTHING
        return _Syntactic(self, id(node))


class _Nothing:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = _Nothing()


class _Syntactic:
    """Statements start after their leading comment lines: this is where a person looks."""

    __slots__ = ("_key", "_start", "_state")

    def __init__(self, state: _SpanState, key: int) -> None:
        self._state = state
        self._key = key

    def __enter__(self) -> None:
        self._start = self._state._position()

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            return  # as the generator did: nothing recorded when generation fails
        end = self._state._position()
        self._state._syntactic.add(self._key)
        start = self._start
        self._state.spans[self._key] = Span(start[0], start[1], end[0], end[1])
        # after_codegen of the same node follows and may stop the generation then.


def spans_and_code(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> tuple[dict[int, Span], str]:
    """Spans (keyed by ``id(node)``) of ``nodes`` in ``module``, and the module's code."""
    state = _SpanState(module, {id(n) for n in nodes})
    module._codegen(state)
    return state.spans, "".join(state.tokens)


def spans_of(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, Span]:
    """Spans of ``nodes`` only: the code generation stops once the last of them has ended.

    For a module whose text the caller already has (the parsed file, unchanged): a file with
    findings but no fix needs its code for nothing else, and its findings often sit in its first
    half. Only for freshly parsed modules, where no node object occurs twice.
    """
    state = _SpanState(module, {id(n) for n in nodes}, stop_early=True)
    if not state._wanted:
        return {}
    try:
        module._codegen(state)
    except _AllFound:
        pass
    return state.spans


def spans_in_statements(
    module: cst.Module,
    located: Iterable[tuple[cst.CSTNode, cst.CSTNode | None]],
    lines: Mapping[int, int],
    indents: Mapping[int, tuple[str, ...]] | None = None,
) -> dict[int, Span]:
    """Spans of nodes, each given with the top-level statement of ``module`` that holds it (or
    None), ``lines`` the line each top-level statement starts on (python/_splice.py).

    Each such statement is generated alone, its line count starting where it starts in the file
    (a top-level statement starts a line, at column 0): a finding at the end of a long file no
    longer costs the code generation of everything above it. A node not found where it was said
    to be, or given without a statement, is located the old way (``spans_of``). Only for freshly
    parsed modules, like ``spans_of``.

    ``indents``: a statement inside a block (python/_splice.py's ``block_statements``) is
    generated under the indentation it was parsed under, so a finding deep in a long function
    costs the code generation of its own statement, not of the function above it.
    """
    by_statement: dict[int, tuple[cst.CSTNode, dict[int, cst.CSTNode]]] = {}
    rest: list[cst.CSTNode] = []
    for node, statement in located:
        if statement is None or id(statement) not in lines:
            rest.append(node)
        else:
            by_statement.setdefault(id(statement), (statement, {}))[1][id(node)] = node
    spans: dict[int, Span] = {}
    for key, (statement, wanted) in by_statement.items():
        state = _SpanState(module, set(wanted), stop_early=True)
        state._line = lines[key]
        if indents is not None and key in indents:
            state.indent_tokens = list(indents[key])
        try:
            statement._codegen(state)
        except _AllFound:
            pass
        spans.update(state.spans)
        rest += [node for k, node in wanted.items() if k not in state.spans]
    if rest:
        spans.update(spans_of(module, rest))
    return spans
