"""What a migrate/check run amounts to: counts, edits per rule, manual actions, coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from cuda2neuron.core import Effort, FileResult, FileStatus, Finding, Safety
from cuda2neuron.workspace import SkippedPath

__all__ = ["EFFORT_POINTS", "EFFORT_SCALE", "FileSummary", "RunReport", "build_report", "finding_status", "is_manual"]

# Points per manual finding, summed per file into an effort level (SYCLomatic-style estimate).
EFFORT_POINTS = {Effort.NONE: 0, Effort.LOW: 1, Effort.MEDIUM: 3, Effort.HIGH: 8}


# What the levels mean in time (README "Coverage and effort"): a point is about a quarter of an
# hour of a person who knows the code.
EFFORT_SCALE = {
    "none": "nothing left",
    "low": "under an hour",
    "medium": "1-2.5 hours",
    "high": "more than 2.5 hours",
}


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


def _level(points: int) -> str:
    if points == 0:
        return "none"
    if points <= 3:
        return "low"
    if points <= 10:
        return "medium"
    return "high"


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
    def effort_points(self) -> int:
        return sum(EFFORT_POINTS[f.effort] for f in self.remaining)

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
        return _level(self.effort_points)


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
                effort=_level(sum(EFFORT_POINTS[f.effort] for f in r.findings if not f.applied)),
                error="" if r.error is None else f"{r.error.kind}: {r.error.message}",
                fixable=sum(1 for f in r.findings if finding_status(f) == "fixable"),
            )
        )
    return RunReport(command, target, tuple(results), tuple(skipped), tuple(files))
