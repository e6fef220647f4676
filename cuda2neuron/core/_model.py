"""The data the engine returns: findings, fixes and per-file results.

Everything here is frozen and picklable so that results cross process boundaries (``--jobs``) and
can be serialised into reports without touching libcst nodes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "Effort",
    "FileError",
    "FileResult",
    "FileStatus",
    "Finding",
    "Fix",
    "Safety",
    "Span",
]


class Safety(str, enum.Enum):
    """How far a fix can be trusted (ruff's model).

    SAFE keeps runtime meaning and is applied by ``migrate``/``check --fix``. UNSAFE may change
    numerics, performance or control flow and needs ``--unsafe-fixes``. DISPLAY_ONLY is advice: the
    replacement is shown in reports but never written.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


class Effort(str, enum.Enum):
    """Rough size of the manual work a finding leaves behind (SYCLomatic-style)."""

    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True, order=True)
class Span:
    """1-based lines, 0-based columns; end is exclusive in columns, inclusive in lines."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def contains(self, other: Span) -> bool:
        return (self.start_line, self.start_col) <= (other.start_line, other.start_col) and (
            other.end_line,
            other.end_col,
        ) <= (self.end_line, self.end_col)

    def overlaps(self, other: Span) -> bool:
        return not (
            (self.end_line, self.end_col) <= (other.start_line, other.start_col)
            or (other.end_line, other.end_col) <= (self.start_line, self.start_col)
        )


@dataclass(frozen=True)
class Fix:
    """A replacement the rule proposes; ``replacement`` is the new source text of the span."""

    safety: Safety
    replacement: str
    description: str = ""


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    path: str
    span: Span
    fix: Fix | None = None
    # True once the engine wrote the fix into the output (migrate / --fix).
    applied: bool = False
    guidance: str = ""
    effort: Effort = Effort.LOW

    @property
    def line(self) -> int:
        return self.span.start_line

    @property
    def manual(self) -> bool:
        """A finding that leaves work for a person: no fix, or a fix that was not applied."""
        return not self.applied


class FileStatus(str, enum.Enum):
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class FileError:
    """Why one file failed; the other files carry on."""

    kind: str  # "parse", "decode", "io", "convergence", "internal"
    message: str
    line: int | None = None
    col: int | None = None  # 1-based, like every column the reports show
    traceback: str = ""


@dataclass(frozen=True)
class FileResult:
    path: str
    status: FileStatus
    findings: tuple[Finding, ...] = ()
    error: FileError | None = None
    # The rewritten bytes, present only when status is CHANGED.
    new_bytes: bytes | None = field(default=None, repr=False)
    # The source as read, for diffs; present only when status is CHANGED.
    old_bytes: bytes | None = field(default=None, repr=False)
    skip_reason: str = ""

    @property
    def applied(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.applied)

    @property
    def manual(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.manual)
