"""Fences on the ``ast`` path: ``_lint._outside_fences`` for findings a detector made.

A rule whose libcst report carries ``fences`` (CN112: another accelerator's code) keeps every
other rule's report on or inside the fenced nodes out of the result. A detector has no node to
hand on, only spans: it records its finding with the spans of the fenced code
(``record_fence``), and the engine drops the other detectors' findings whose spans lie inside one
(``outside_fences``) before suppressions, as ``_lint._collect`` drops reports before the
findings are made. A span inside a fenced node's span is a node inside it: the fenced code is a
block of whole statements or one expression, and no node outside it is written between its
first and last character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cuda2neuron.core import Finding, Rule, Span

__all__ = ["Fence", "outside_fences", "record_fence"]


@dataclass(frozen=True)
class Fence:
    """A fencing finding and the spans of the code it fences; ``quiet``: it keeps out only the
    rules that port code, and stays only where it kept one out (``Report.quiet``)."""

    finding: Finding
    spans: tuple[Span, ...]
    quiet: bool


def record_fence(file, finding: Finding, spans: Sequence[Span], quiet: bool) -> None:  # noqa: ANN001 - AstFile
    """Note on ``file`` (an ``AstFile``) that ``finding`` fences the code at ``spans``."""
    file.fences.append(Fence(finding, tuple(spans), quiet))


def outside_fences(file, found: list[Finding], rules: Sequence[type[Rule]]) -> list[Finding]:  # noqa: ANN001 - AstFile
    """``found`` without the findings on or inside code a finding of ``found`` fences, as
    ``_lint._outside_fences`` keeps reports (a quiet fence's finding dropped unless it kept a
    rule that ports code out)."""
    fences = [f for f in file.fences if any(f.finding is g for g in found)]
    if not fences:
        return found
    advisory = {r.code: r.advisory for r in rules}
    loud = [s for f in fences if not f.quiet for s in f.spans]
    quiet = [s for f in fences if f.quiet for s in f.spans]
    fencing = {id(f.finding) for f in fences}
    kept: list[Finding] = []
    spoke = False
    for finding in found:
        if id(finding) in fencing:
            kept.append(finding)
        elif any(s.contains(finding.span) for s in loud):
            continue
        elif quiet and not advisory.get(finding.code, False) and any(s.contains(finding.span) for s in quiet):
            spoke = True
        else:
            kept.append(finding)
    if spoke:
        return kept
    silent = {id(f.finding) for f in fences if f.quiet}
    return [f for f in kept if id(f) not in silent]
