"""Text rules: the protocol between non-Python file handlers and the rules they run.

A text rule (shell, requirements, notebook) is still a ``Rule`` subclass — code, docs, examples,
select/ignore all work — but instead of visiting a libcst tree it implements the classmethod
``check_text(doc, settings) -> list[TextReport]`` where ``doc`` is the parsed file its handler
built. Reports carry character offsets into the text; this module applies the allowed,
non-overlapping fixes and turns reports into the engine's ``Finding``s.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cuda2neuron.engine import Effort, Finding, Fix, Rule, Safety, Span
from cuda2neuron.engine._suppress import Suppressions

__all__ = ["LineIndex", "TextItem", "TextReport", "apply_text_fixes", "run_text_rules", "span_of", "to_finding"]


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


def run_text_rules(
    text: str,
    rules: Sequence[type[Rule]],
    doc: object,
    settings,
    *,
    fix: bool,
    unsafe: bool,
) -> tuple[str | None, list[TextItem]]:
    """Run ``rules`` over ``doc`` (parsed from ``text``); with ``fix``, write the allowed fixes.

    Text fixes never depend on each other (each rewrites its own span), so one round is a fixed
    point; the handlers' tests re-run every fixed example to prove it.
    """
    index = LineIndex(text)
    suppressions = Suppressions.from_text(text)
    items: list[TextItem] = []
    for rule in rules:
        for report in rule.check_text(doc, settings):  # type: ignore[attr-defined]
            start_line, _ = index.position(report.start)
            end_line, _ = index.position(max(report.start, report.end - 1))
            if suppressions.suppressed(rule.code, Span(start_line, 0, end_line, 0)):
                continue
            items.append(TextItem(rule, report))
    items.sort(key=lambda it: (it.report.start, it.report.end, it.rule.code))
    if not fix:
        return None, items
    chosen: list[int] = []
    last_end = -1
    for i, it in enumerate(items):
        r = it.report
        if r.replacement is None or not _allowed(r.safety, unsafe):
            continue
        # Outer-first is moot for text: spans of one file never nest; overlapping ones wait.
        if r.start < last_end:
            continue
        chosen.append(i)
        last_end = r.end
    if not chosen:
        return None, items
    new = apply_text_fixes(text, [items[i].report for i in chosen])
    for i in chosen:
        items[i] = replace(items[i], applied=True)
    return (new if new != text else None), items


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


def span_of(index: LineIndex, start: int, end: int) -> Span:
    sl, sc = index.position(start)
    el, ec = index.position(end)
    return Span(sl, sc, el, ec)
