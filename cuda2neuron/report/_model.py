"""What a migrate/check run amounts to: counts, edits per rule, manual actions, coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cuda2neuron.core import Effort, FileResult, FileStatus, Finding, Safety
from cuda2neuron.kinds import RESIDUAL
from cuda2neuron.workspace import SkippedPath

__all__ = [
    "CONSTRUCT_UNITS", "EFFORT_BANDS", "EFFORT_HOURS", "EFFORT_RANGE", "EFFORT_SCALE", "REVIEW_HOURS", "Construct",
    "FileSummary", "RunReport", "build_report", "constructs", "describe_effort", "effort_level", "finding_hours",
    "finding_status", "is_manual",
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


# The estimate counts pieces of work (constructs), not findings: by default one finding is one,
# and these rules' findings in one file group (issue 43: every `import triton` line cost a day
# and a kernel under two decorators counted twice — ~3,600 h for a fine-tuning framework).
#   "stacked": findings on adjacent lines are one construct (the decorators of one kernel:
#              @triton.autotune over @triton.jit is one kernel to port);
#   "file":    all of the rule's findings in the file are one (a kernel package used through
#              many names there: one decision, drop it or call its PyTorch reference).
# A construct costs its costliest finding, at most the cap; the rule's findings in the file below
# its costliest level there cost nothing on top (an `import triton` beside the kernels it serves:
# porting them removes it). CN617's kernels are counted where they are defined (CN601 there, or
# the extension's build): the importing file's work is repointing the import, an hour at most.
CONSTRUCT_UNITS: dict[str, tuple[str, Effort | None]] = {
    "CN601": ("stacked", None),
    "CN616": ("file", None),
    "CN618": ("file", None),  # a kernel hub's loader: one function's calls, one replacement
    "CN617": ("file", Effort.MEDIUM),
}
# How far the total may be off, as factors of it: each construct's level is a typical cost
# (a day for a kernel), and a real one takes from half of it to twice it.
EFFORT_RANGE = (0.5, 2.0)


@dataclass(frozen=True)
class Construct:
    """One piece of work for a person: a rule's findings that one change settles."""

    path: str
    code: str
    name: str
    line: int  # the first finding's
    findings: int
    hours: float


def constructs(findings: Iterable[Finding]) -> list[Construct]:
    """The pieces of work ``findings`` leave (CONSTRUCT_UNITS), each with its cost, in order of
    path, rule and line; findings that cost nothing make none."""
    by_rule: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if finding_hours(f) > 0:
            by_rule.setdefault((f.path, f.code), []).append(f)
    out: list[Construct] = []
    for (path, code), found in sorted(by_rule.items()):
        found.sort(key=lambda f: (f.span.start_line, f.span.start_col))
        unit, cap = CONSTRUCT_UNITS.get(code, ("finding", None))
        if unit == "finding":
            groups = [[f] for f in found]
        else:
            top = max(finding_hours(f) for f in found)
            costly = [f for f in found if finding_hours(f) == top]
            groups = [costly] if unit == "file" else _adjacent(costly)
        limit = EFFORT_HOURS[cap] if cap is not None else float("inf")
        for group in groups:
            hours = min(max(finding_hours(f) for f in group), limit)
            out.append(Construct(path, code, group[0].name, group[0].span.start_line, len(group), hours))
    return out


def _adjacent(found: list[Finding]) -> list[list[Finding]]:
    """Runs of findings whose spans touch or follow each other line by line (stacked decorators)."""
    groups: list[list[Finding]] = []
    end = 0
    for f in found:
        if groups and f.span.start_line <= end + 1:
            groups[-1].append(f)
            end = max(end, f.span.end_line)
        else:
            groups.append([f])
            end = f.span.end_line
    return groups


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
    def constructs(self) -> list[Construct]:
        """The pieces of work the findings left make (``constructs``)."""
        return constructs(self.remaining)

    @property
    def effort_hours(self) -> float:
        """Hours of person-time the findings left need: their constructs' costs summed."""
        return sum(c.hours for c in self.constructs)

    @property
    def effort_range(self) -> tuple[float, float]:
        """The range the estimate stands for (EFFORT_RANGE)."""
        hours = self.effort_hours
        return hours * EFFORT_RANGE[0], hours * EFFORT_RANGE[1]

    def effort_by(self, what: str, top: int = 3) -> list[tuple[str, float]]:
        """The ``top`` contributors to the estimate by "file" or "rule" (code and name), costliest first."""
        hours: Counter[str] = Counter()
        for c in self.constructs:
            hours[c.path if what == "file" else f"{c.code} {c.name}"] += c.hours
        return sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))[:top]

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
                effort=effort_level(sum(c.hours for c in constructs(r.findings))),
                error="" if r.error is None else f"{r.error.kind}: {r.error.message}",
                fixable=sum(1 for f in r.findings if finding_status(f) == "fixable"),
            )
        )
    return RunReport(command, target, tuple(results), tuple(skipped), tuple(files))
