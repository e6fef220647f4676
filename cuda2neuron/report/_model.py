"""What a migrate/check run amounts to: counts, edits per rule, manual actions, coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from cuda2neuron.core import Effort, FileResult, FileStatus, Finding, Safety
from cuda2neuron.kinds import RESIDUAL
from cuda2neuron.workspace import SkippedPath

__all__ = [
    "EFFORT_BANDS", "EFFORT_HOURS", "EFFORT_SCALE", "REVIEW_HOURS", "FileSummary", "RunReport", "build_report",
    "describe_effort", "effort_level", "finding_hours", "finding_status", "is_manual",
]

# The person-time a finding left costs, in hours of someone who knows the code (README "Coverage
# and effort", docs/output-formats.md "Effort"). The per-finding levels are the rules' own.
EFFORT_HOURS = {Effort.NONE: 0.0, Effort.LOW: 0.25, Effort.MEDIUM: 1.0, Effort.HIGH: 8.0}
# A fix a flag writes (`--unsafe-fixes`) costs its review, not the work it does: reading the
# hunk and deciding, at most this long (a rule's "low" or "none" is kept when it is less).
REVIEW_HOURS = 0.25

# Bands of the total, in hours: (upper bound, level, what it means). They tell an hour from a
# day, a day from a week, and a week from more.
EFFORT_BANDS = (
    (0.0, "none", "nothing left"),
    (1.0, "low", "up to an hour"),
    (8.0, "medium", "up to a day"),  # a working day: 8 h
    (40.0, "high", "up to a week"),  # a working week: 5 days, 40 h
    (float("inf"), "very-high", "more than a week"),
)
EFFORT_SCALE = {level: meaning for _, level, meaning in EFFORT_BANDS}


def finding_hours(f: Finding) -> float:
    """What ``f`` still costs a person: nothing once applied or when ``--fix`` writes it (a safe
    fix), a review when only ``--unsafe-fixes`` would, else its level's hours."""
    if f.applied or (f.fix is not None and f.fix.safety is Safety.SAFE):
        return 0.0
    hours = EFFORT_HOURS[f.effort]
    if f.fix is not None and f.fix.safety is Safety.UNSAFE:
        return min(hours, REVIEW_HOURS)
    return hours


def effort_level(hours: float) -> str:
    for bound, level, _ in EFFORT_BANDS:
        if hours <= bound:
            return level
    raise AssertionError("unreachable: the last band is unbounded")


def describe_effort(hours: float) -> str:
    """One phrase for every output: ``none``, ``~45 min (low: up to an hour)``,
    ``~14.5 h, about 2 days (high: up to a week)``."""
    level = effort_level(hours)
    if level == "none":
        return "none"
    if hours < 1:
        amount = f"~{round(hours * 60)} min"
    else:
        amount = f"~{_half(hours)} h"
        if hours > 40:
            amount += f", about {_count(hours / 40, 'week')}"
        elif hours > 8:
            amount += f", about {_count(hours / 8, 'day')}"
    return f"{amount} ({level}: {EFFORT_SCALE[level]})"


def _half(x: float) -> str:
    """``x`` to the nearest half: 14.5, 3, 0.5."""
    return f"{round(x * 2) / 2:g}"


def _count(x: float, unit: str) -> str:
    n = _half(x)
    return f"{n} {unit}" + ("" if n == "1" else "s")


def is_manual(f: Finding) -> bool:
    """Work for a person: not applied, and no flag would apply it (no fix, or display-only).
    A fixable finding is not a manual action: `--fix` (or `--unsafe-fixes`) takes it."""
    return not f.applied and (f.fix is None or f.fix.safety is Safety.DISPLAY_ONLY)


def finding_status(f: Finding) -> str:
    """``fixed`` (written), ``fixable`` (``--fix`` writes it; ``--unsafe-fixes`` too for an
    unsafe fix) or ``manual`` (``is_manual``): the status every output format reports."""
    if f.applied:
        return "fixed"
    return "manual" if is_manual(f) else "fixable"


@dataclass(frozen=True)
class FileSummary:
    path: str
    status: str
    edits: int
    manual: int
    coverage: float | None  # share of CUDA-specific constructs migrated automatically
    effort: str
    error: str = ""
    fixable: int = 0  # not written, but --fix (with --unsafe-fixes for an unsafe fix) would


@dataclass(frozen=True)
class RunReport:
    command: str
    target: str
    results: tuple[FileResult, ...]
    skipped: tuple[SkippedPath, ...]
    files: tuple[FileSummary, ...]

    @property
    def scanned(self) -> int:
        return sum(1 for r in self.results if r.status is not FileStatus.SKIPPED)

    @property
    def changed(self) -> int:
        return sum(1 for r in self.results if r.status is FileStatus.CHANGED)

    @property
    def failed(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.results if r.status is FileStatus.FAILED)

    @property
    def edits(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.results for f in r.findings if f.applied)

    @property
    def manual(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.results for f in r.findings if is_manual(f))

    @property
    def fixable(self) -> tuple[Finding, ...]:
        """Not applied, and `--fix` would apply it (a safe fix)."""
        return tuple(
            f for r in self.results for f in r.findings
            if not f.applied and f.fix is not None and f.fix.safety is Safety.SAFE
        )

    @property
    def unsafe_fixable(self) -> tuple[Finding, ...]:
        """Not applied, and only `--unsafe-fixes` would apply it."""
        return tuple(
            f for r in self.results for f in r.findings
            if not f.applied and f.fix is not None and f.fix.safety is Safety.UNSAFE
        )

    @property
    def remaining(self) -> tuple[Finding, ...]:
        """Every finding not applied in this run (manual or fixable)."""
        return tuple(f for r in self.results for f in r.findings if not f.applied)

    @property
    def residual(self) -> tuple[Finding, ...]:
        """Lines that still mention CUDA and that no specific rule covers (CN902, the residual
        pass): counted apart in every report as "N lines still mention CUDA"."""
        return tuple(f for f in self.remaining if f.code == RESIDUAL[0])

    @property
    def effort_hours(self) -> float:
        """Hours of person-time the findings left need (``finding_hours`` summed)."""
        return sum(finding_hours(f) for f in self.remaining)

    @property
    def edits_per_rule(self) -> dict[str, int]:
        counts = Counter(f"{f.code} {f.name}" for f in self.edits)
        return dict(sorted(counts.items()))

    @property
    def coverage(self) -> float | None:
        """Share of this run's findings that it rewrote: None when it rewrote nothing (a
        finished port, or a check without --fix), where a ratio would read as "0% done"."""
        total = len(self.edits) + len(self.remaining)
        return None if total == 0 or not self.edits else len(self.edits) / total

    @property
    def effort(self) -> str:
        """The band of ``effort_hours``: none, low, medium, high or very-high (EFFORT_BANDS)."""
        return effort_level(self.effort_hours)


def build_report(
    command: str, target: str, results: Sequence[FileResult], skipped: Sequence[SkippedPath] = ()
) -> RunReport:
    files = []
    for r in results:
        edits = sum(1 for f in r.findings if f.applied)
        manual = sum(1 for f in r.findings if is_manual(f))
        total = sum(1 for f in r.findings)
        files.append(
            FileSummary(
                path=r.path,
                status=r.status.value,
                edits=edits,
                manual=manual,
                coverage=None if total == 0 or not edits else edits / total,
                effort=effort_level(sum(finding_hours(f) for f in r.findings)),
                error="" if r.error is None else f"{r.error.kind}: {r.error.message}",
                fixable=sum(1 for f in r.findings if finding_status(f) == "fixable"),
            )
        )
    return RunReport(command, target, tuple(results), tuple(skipped), tuple(files))
