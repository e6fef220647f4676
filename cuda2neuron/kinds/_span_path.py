"""The span path: a file's fixes applied to its text, decided from CPython's ``ast``, no libcst.

Where every rule a file wakes has a detector (``Rule.detect``) and each decides the file, the
detectors' fixes carry the text they replace (``AstFile.edits``: the node's written bounds, its
own parentheses included, and the text written there instead). This module runs the fixed point
of ``python/_lint.py``'s ``fix_module`` on that text: per round the fixes this run applies (safe;
unsafe under ``--unsafe-fixes``) are spliced in, the new text is parsed by CPython and detected
again with the rules its words wake, until no fix applies. What the libcst path would return is
returned, byte for byte: the same rounds, the same findings (applied ones flagged, the last
round's left), every span in the file as read, the same output.

It answers None (the caller parses with libcst, from the original bytes: nothing is half-applied)
wherever it cannot reproduce that exactly:

* a woken rule without a detector, or a detector unsure, in any round;
* a fix without a recorded edit, or one written across lines (libcst re-indents what it
  generates inside a block);
* two fixes of a round on overlapping text (libcst applies the outer one and the inner one the
  next round; which is outer is the tree's to say);
* a later round's finding whose span starts or ends inside a replaced text: libcst's lineage
  locates such a node through the replacement, which text offsets cannot follow;
* more rounds than ``MAX_ITERATIONS`` (libcst raises the convergence error), or an output that
  does not compile.

Linked fixes (``Report.depends`` / ``needs``) are the detectors' to refuse: a detector returns
None where a report of its could be linked (``rules/_shared/detector.may_be_linked``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cuda2neuron.core import MAX_ITERATIONS, Finding, Rule, RunOptions, Safety, Settings, Span, Suppressions

__all__ = ["SpanOutcome", "fixed_by_spans"]


@dataclass
class SpanOutcome:
    """What the span path made of a file: the output (None: unchanged) and the findings, as
    ``fix_module`` orders them (applied, then left); ``rounds``: the rounds run, the last one
    applying nothing."""

    new: bytes | None
    findings: list[Finding]
    rounds: int


# One replaced text of a round: its offsets in the text before (start, end) and the length of
# what was written there instead.
_Cut = tuple[int, int, int]


def fixed_by_spans(
    data: bytes,
    first,  # noqa: ANN001 - python.AstFile: the file as read
    found: list[Finding],
    options: RunOptions,
    settings: Settings,
    woken_by: Callable[[str], Sequence[type[Rule]]],
    compiles: Callable[[bytes], bool],
) -> SpanOutcome | None:
    """The fixed point on the text (module docstring), or None where libcst must decide.

    ``found``: the first round's findings (the detectors of the rules the file as read wakes,
    suppressions honoured); ``woken_by(text)``: the rules a run on a later round's text wakes
    (the caller's wake, as ``fix_module`` asks it); ``compiles``: the check a rewrite passes
    before it is returned."""
    from cuda2neuron.python import AstFile

    file = first
    # Per applying round, its cuts: how a later text's offsets lead back to the text as read.
    history: list[list[_Cut]] = []
    applied: list[Finding] = []
    for n in range(1, MAX_ITERATIONS + 1):
        if n > 1:
            found = _detect(file, woken_by(file.text), settings)
            if found is None:
                return None
        chosen = [f for f in found if f.fix is not None and _applies(f.fix.safety, options.unsafe)]
        if chosen:
            cuts = _cuts(file, chosen)
            if cuts is None:
                return None
            text = _spliced(file.text, cuts)
        if not chosen or text == file.text:
            # Nothing applies (or nothing changes: libcst's `deep_equals` stop): these are left.
            left = _in_original(first, file, history, found)
            if left is None:
                return None
            return _outcome(data, file, applied, left, n, compiles)
        located = _in_original(first, file, history, chosen)
        if located is None:
            return None
        applied += [replace(f, applied=True) for f in located]
        history.append([(start, end, len(new)) for start, end, new in cuts])
        nxt = AstFile.read(first.path, text.encode("utf-8"), keep=True)
        if nxt is None:
            return None
        file = nxt
    return None  # libcst raises the convergence error, with its own message


def _applies(safety: Safety, unsafe: bool) -> bool:
    """Would the fixed point apply a fix of this safety (``python/_lint.py``'s ``_allowed``)?"""
    return safety is Safety.SAFE or (unsafe and safety is Safety.UNSAFE)


def _detect(file, rule_types: Sequence[type[Rule]], settings: Settings) -> list[Finding] | None:  # noqa: ANN001
    """The round's findings: each woken rule's detector, suppression comments honoured, in the
    rules' order (the order the libcst walk reports in); None where one cannot tell."""
    found: list[Finding] = []
    ran = []
    for rule in rule_types:
        if settings.target not in rule.targets or "python" not in rule.file_kinds:
            continue
        if not rule.has_detector():
            return None
        findings = rule.detect(file, settings)
        if findings is None:
            return None
        found += findings
        ran.append(rule)
    return as_linted(file, found, ran)


def as_linted(file, found: list[Finding], rules: Sequence[type[Rule]]) -> list[Finding] | None:  # noqa: ANN001
    """The detectors' ``found`` (in ``rules``' order) filtered as ``python/_lint.py`` filters its
    reports: other accelerators' code fenced off first, then the safety nets once per unit, then
    suppression comments; None where the nets' filter cannot find a finding's node."""
    from cuda2neuron.python import net_filtered, outside_fences

    if file.fences:
        found = outside_fences(file, found, rules)
    filtered = net_filtered(file, {r.code for r in rules if r.net}, found)
    if filtered:
        suppressions = Suppressions.from_text(file.text)
        filtered = [f for f in filtered if not suppressions.suppressed(f.code, f.span)]
    return filtered


def _cuts(file, chosen: list[Finding]) -> list[tuple[int, int, str]] | None:  # noqa: ANN001
    """The chosen fixes' edits, in text order; None where one has no edit, is written across
    lines, or overlaps another."""
    cuts = []
    for f in chosen:
        edit = file.edits.get(id(f.fix))
        if edit is None:
            return None
        start, end, new = edit
        if "\n" in new or "\r" in new or "\n" in file.text[start:end] or "\r" in file.text[start:end]:
            return None
        cuts.append(edit)
    cuts.sort()
    for (_, end, _), (start, _, _) in zip(cuts, cuts[1:]):
        if start < end:
            return None
    return cuts


def _spliced(text: str, cuts: list[tuple[int, int, str]]) -> str:
    out, at = [], 0
    for start, end, new in cuts:
        out += [text[at:start], new]
        at = end
    out.append(text[at:])
    return "".join(out)


def _in_original(first, file, history: list[list[_Cut]], found: list[Finding]) -> list[Finding] | None:  # noqa: ANN001
    """``found`` (spans in ``file``, a later round's text) with each span located in the text as
    read (``first``), as libcst's lineage places the node; None where a span starts or ends
    inside a replaced text."""
    if not history:
        return found
    starts = file._line_starts()
    out = []
    for f in found:
        s = f.span
        a = _back(history, starts[s.start_line - 1] + s.start_col)
        b = _back(history, starts[s.end_line - 1] + s.end_col)
        if a is None or b is None:
            return None
        out.append(replace(f, span=_span(first, a, b)))
    return out


def _back(history: list[list[_Cut]], offset: int) -> int | None:
    """``offset`` of the last round's text as an offset of the text as read, round by round. An
    offset at a replaced text's edge (a span that starts where it starts, or ends where it ends)
    stands where the replaced text's edge stood: the node replaced, or one around it, as the
    lineage traces them; strictly inside one, None."""
    for cuts in reversed(history):
        shift = 0
        for start, end, written in cuts:
            new_start = start + shift
            if offset <= new_start:
                break
            if offset >= new_start + written:
                shift += written - (end - start)
                continue
            return None
        offset -= shift
    return offset


def _span(first, start: int, end: int) -> Span:  # noqa: ANN001
    """The span of text offsets ``start``..``end`` in ``first`` (lines from 1, columns in code
    points from the line's start, as ``AstFile.span`` counts them)."""
    starts = first._line_starts()
    a = bisect_right(starts, start) - 1
    b = bisect_right(starts, end) - 1
    return Span(a + 1, start - starts[a], b + 1, end - starts[b])


def _outcome(data: bytes, file, applied: list[Finding], left: list[Finding], rounds: int, compiles) -> SpanOutcome | None:  # noqa: ANN001
    applied.sort(key=lambda f: (f.span, f.code))
    left.sort(key=lambda f: (f.span, f.code))
    findings = applied + left
    if not applied:
        return SpanOutcome(None, findings, rounds)
    new = file.text.encode("utf-8")
    if new == data:
        return SpanOutcome(None, findings, rounds)
    if not compiles(new):
        return None  # libcst reads it back or raises its internal error: its call
    return SpanOutcome(new, findings, rounds)
