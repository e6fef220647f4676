"""Text rules: the protocol between non-Python file handlers and the rules they run.

A text rule (shell, requirements, notebook) is still a ``Rule`` subclass — code, docs, examples,
select/ignore all work — but instead of visiting a libcst tree it implements the classmethod
``check_text(doc, settings) -> list[TextReport]`` where ``doc`` is the parsed file its handler
built. Reports carry character offsets into the text; this module applies the allowed,
non-overlapping fixes and turns reports into the engine's ``Finding``s.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ._model import Effort, Finding, Fix, Safety, Span
from ._rule import Rule
from ._convergence import MAX_ITERATIONS, ConvergenceError
from ._suppress import Suppressions

__all__ = [
    "CellProblem",
    "CellReport",
    "LineIndex",
    "NotebookProblems",
    "TextItem",
    "TextReport",
    "apply_text_fixes",
    "run_text_rules",
    "to_finding",
]


@dataclass(frozen=True)
class TextReport:
    """One finding of a text rule: ``text[start:end]`` and an optional replacement for it."""

    start: int
    end: int
    message: str
    replacement: str | None = None
    safety: Safety = Safety.SAFE
    guidance: str = ""
    effort: Effort | None = None
    description: str = ""


@dataclass(frozen=True)
class TextItem:
    """A report tied to the rule that made it, and whether its fix was written."""

    rule: type[Rule]
    report: TextReport
    applied: bool = False
    # (line, column) of the report's start and end in the text it was found in: after fixes the
    # offsets of a report no longer index the original text.
    start: tuple[int, int] = (1, 0)
    end: tuple[int, int] = (1, 0)

    @property
    def span(self) -> Span:
        return Span(*self.start, *self.end)


class LineIndex:
    """Offsets to 1-based lines / 0-based columns in O(log n)."""

    def __init__(self, text: str) -> None:
        self._starts = [0]
        start = text.find("\n")
        while start != -1:
            self._starts.append(start + 1)
            start = text.find("\n", start + 1)

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line]

    def line_start(self, line: int) -> int:
        return self._starts[min(max(line, 1), len(self._starts)) - 1]


def _allowed(safety: Safety, unsafe: bool) -> bool:
    return safety is Safety.SAFE or (unsafe and safety is Safety.UNSAFE)


def _lint(text: str, rules: Sequence[type[Rule]], parse, settings) -> list[TextItem]:
    index = LineIndex(text)
    suppressions = Suppressions.from_text(text)
    doc = parse(text)
    items: list[TextItem] = []
    for rule in rules:
        for report in rule.check_text(doc, settings):  # type: ignore[attr-defined]
            start_line, _ = index.position(report.start)
            end_line, _ = index.position(max(report.start, report.end - 1))
            if suppressions.suppressed(rule.code, Span(start_line, 0, end_line, 0)):
                continue
            items.append(TextItem(rule, report, start=index.position(report.start), end=index.position(report.end)))
    items.sort(key=lambda it: (it.report.start, it.report.end, it.rule.code))
    return items


def run_text_rules(
    text: str,
    rules: Sequence[type[Rule]],
    parse: Callable[[str], object],
    settings,
    *,
    fix: bool,
    unsafe: bool,
) -> tuple[str | None, list[TextItem]]:
    """Run ``rules`` over ``parse(text)``; with ``fix``, apply the allowed fixes to a fixed point.

    Like the Python engine: non-overlapping fixes are applied, the text is checked again, and
    an overlapping fix gets its turn in the next round. Every item, applied or left, is located
    in ``text``, the text as read (``_in_original``): a finding of the final text after an edit
    that changed a line's length is not a few columns off.
    """
    items = _lint(text, rules, parse, settings)
    if not fix:
        return None, items
    applied: list[TextItem] = []
    current = text
    # Each round's edits, (start, end, length of the replacement) in that round's text: a finding
    # of a later round, and an applied edit, are located in the text as read through them.
    rounds: list[list[tuple[int, int, int]]] = []
    for _ in range(MAX_ITERATIONS):
        chosen: list[int] = []
        last_end = -1
        for i, it in enumerate(items):
            r = it.report
            if r.replacement is None or not _allowed(r.safety, unsafe) or r.start < last_end:
                continue
            chosen.append(i)
            last_end = r.end
        new = apply_text_fixes(current, [items[i].report for i in chosen]) if chosen else current
        if new == current:
            return (current if current != text else None), _in_original(text, rounds, applied, items)
        applied += [replace(items[i], applied=True, start=(len(rounds), 0)) for i in chosen]
        rounds.append([(items[i].report.start, items[i].report.end, len(items[i].report.replacement or "")) for i in chosen])
        current = new
        items = _lint(current, rules, parse, settings)
    raise ConvergenceError(f"text fixes did not converge after {MAX_ITERATIONS} rounds")


def _back(offset: int, edits: list[tuple[int, int, int]], end: bool) -> int:
    """``offset`` in the text after ``edits`` (sorted, not overlapping) -> in the text before.
    Inside a replacement it stands for the whole replaced range (its start, or for an end
    offset its end)."""
    shift = 0
    for start, stop, length in edits:
        new_start = start + shift
        new_stop = new_start + length
        # A start offset where text was deleted starts on what followed it.
        if offset < new_start or (offset == new_start and (end or length > 0)):
            break
        if offset < new_stop or (end and offset == new_stop):
            return stop if end else start
        shift += length - (stop - start)
    return offset - shift


def _in_original(
    text: str, rounds: list[list[tuple[int, int, int]]], applied: list[TextItem], remaining: list[TextItem]
) -> list[TextItem]:
    """Every item with its position in ``text`` (the text as read): an applied one was found in
    the text of its round (stored in ``start[0]`` by the loop), a remaining one in the last."""
    if not rounds:
        return applied + remaining
    index = LineIndex(text)

    def located(it: TextItem, found_in: int) -> TextItem:
        start, end = it.report.start, it.report.end
        for edits in reversed(rounds[:found_in]):
            start, end = _back(start, edits, end=False), _back(end, edits, end=True)
        return replace(it, start=index.position(start), end=index.position(max(start, end)))

    return [located(it, it.start[0]) for it in applied] + [located(it, len(rounds)) for it in remaining]


def apply_text_fixes(text: str, reports: Iterable[TextReport]) -> str:
    out = text
    for r in sorted(reports, key=lambda r: r.start, reverse=True):
        out = out[: r.start] + (r.replacement or "") + out[r.end :]
    return out


def to_finding(item: TextItem, path: str, span: Span, message_prefix: str = "") -> Finding:
    r = item.report
    effort = r.effort
    if effort is None:
        effort = Effort.NONE if r.replacement is not None and r.safety is Safety.SAFE else Effort.LOW
    fix = None if r.replacement is None else Fix(r.safety, r.replacement, r.description)
    return Finding(
        code=item.rule.code,
        name=item.rule.name,
        message=message_prefix + r.message,
        path=path,
        span=span,
        fix=fix,
        applied=item.applied,
        guidance=r.guidance,
        effort=effort,
    )


# -- notebook rules ------------------------------------------------------------------------------
# A notebook rule (file_kinds {"notebook"}) reports what the notebook handler could not migrate.
# It implements the classmethod ``check_cells(problems: NotebookProblems) -> list[CellReport]``;
# a rule that sets ``reads_unparsed_cells = True`` makes the handler parse the cells even where
# no Python rule would (so a broken cell that hides CUDA code is found). A rule that reads the
# notebook's top-level metadata instead implements ``check_metadata(doc) -> list[TextReport]``:
# ``doc`` is that JSON object read as a config (``documents.structured``), offsets into its text.


@dataclass(frozen=True)
class CellProblem:
    """Something in one code cell the handler left alone: ``cell`` and ``line`` count from 1."""

    cell: int
    line: int
    detail: str


@dataclass(frozen=True)
class NotebookProblems:
    unparsed: tuple[CellProblem, ...] = ()  # cells that do not parse even with magics masked
    in_magics: tuple[CellProblem, ...] = ()  # CUDA code inside magics, which is never rewritten


@dataclass(frozen=True)
class CellReport:
    cell: int
    line: int
    message: str
    guidance: str = ""
