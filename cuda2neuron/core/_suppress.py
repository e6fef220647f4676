"""`# cuda2neuron: ignore[CN101, CN2]` suppression comments (bare `ignore` silences every rule)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ._model import Span

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["Suppressions", "continuation_starts", "suppressions_disabled"]

# Set while the kinds layer asks which findings a file's suppression comments hide (to find
# the unused ones, CN901): every engine reads its comments through ``from_text``.
_DISABLED: ContextVar[bool] = ContextVar("cuda2neuron_suppressions_disabled", default=False)


@contextlib.contextmanager
def suppressions_disabled() -> Iterator[None]:
    """Within this block no suppression comment hides a finding."""
    token = _DISABLED.set(True)
    try:
        yield
    finally:
        _DISABLED.reset(token)

def continuation_starts(lines: Sequence[str] | Sequence[bytes]) -> list[int]:
    """For each 1-based line (index n-1), the first line of the backslash-continued command it
    belongs to (itself when the line before does not end with a backslash).

    A shell, Makefile or Dockerfile command, a requirements entry or a Python statement continued
    with ``\\`` is one line to its reader: a comment can only go on its last physical line (after
    a ``\\`` it would swallow the continuation, and the next line would run on its own), so a
    comment there speaks for every line of it. An even run of backslashes is an escaped one.
    """
    starts: list[int] = []
    start = 1
    for number, line in enumerate(lines, start=1):
        starts.append(start)
        body = line.rstrip("\r\n") if isinstance(line, str) else line.rstrip(b"\r\n")
        slashes = len(body) - len(body.rstrip("\\" if isinstance(body, str) else b"\\"))
        start = start if slashes % 2 else number + 1
    return starts


_COMMENT_RE = re.compile(r"#\s*cuda2neuron:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")


class Suppressions:
    def __init__(self, by_line: dict[int, frozenset[str] | None]) -> None:
        # line -> codes (prefixes allowed) or None for "every rule"
        self.by_line = by_line

    @classmethod
    def from_module(cls, module: cst.Module) -> Suppressions:
        return cls.from_text(module.code)

    @classmethod
    def from_text(cls, text: str) -> Suppressions:
        by_line: dict[int, frozenset[str] | None] = {}
        if "cuda2neuron:" not in text or _DISABLED.get():
            return cls(by_line)
        lines = text.splitlines()
        starts: list[int] | None = None
        for number, line in enumerate(lines, start=1):
            m = _COMMENT_RE.search(line)
            if m is None:
                continue
            codes = m.group(1)
            these = None if codes is None else frozenset(c.strip() for c in codes.split(",") if c.strip())
            if starts is None:
                starts = continuation_starts(lines)
            # The comment on a continued command's last line speaks for all of its lines.
            for covered in range(starts[number - 1], number + 1):
                have = by_line.get(covered, frozenset())
                by_line[covered] = None if these is None or have is None else have | these
        return cls(by_line)

    def suppressed(self, code: str, span: Span) -> bool:
        # A comment on any line the finding spans counts: multi-line calls usually carry the
        # comment on their first or last line.
        for line in range(span.start_line, span.end_line + 1):
            if line not in self.by_line:
                continue
            codes = self.by_line[line]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
        return False
