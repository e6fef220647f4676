"""Suppression comments checked after a file's rules ran: unknown codes, unused suppressions.

A ``# cuda2neuron: ignore[CN1O1]`` with a typo silences nothing and must not say nothing: it is
reported as CN901 at its line ("unknown rule code"), with the corrected comment as a
display-only suggestion (the code it meant is for a person to tell), and the rest of the file
is checked and migrated as usual (ruff warns about an unknown ``noqa`` code and goes on; RUF100
reports it). It used to fail the whole file: one typo left every other line unported while the
run's summary said nothing was left. A suppression that no finding needs any more (the code was
ported, the rule changed) hides the next real finding on that line; it is reported as CN901
(ruff's RUF100), with a safe fix that removes it.

"Used" is judged against the whole catalog, whatever the run selects: with ``--select CN1`` a
comment for CN3 still protects a line from CN3, and removing it would be wrong. So the file's
final text is checked once more with every rule and no suppression at all (only files that
hold a suppression comment pay for this), and each comment entry is used when a finding it
covers starts or ends on its line, the engines' own test.

Only real comments count: in Python a directive inside a string (documentation, tests of this
tool) is neither checked nor reported. Notebooks keep their comments in cells (their lines are
not the file's) and CUDA sources use ``//`` comments: neither is checked here.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, replace

from cuda2neuron.core import (
    Config,
    Effort,
    FileError,
    FileResult,
    FileStatus,
    Finding,
    Fix,
    LineIndex,
    RunOptions,
    Safety,
    Span,
    continuation_starts,
    suppressions_disabled,
)

from ._catalog import unknown_selectors
from ._code_text import _TOKEN_RE

__all__ = ["CHECKED_KINDS", "LINE_KINDS", "UNUSED_SUPPRESSION", "Directive", "check_suppressions", "directives"]

# The kinds whose files keep `#` comments on the file's own lines (CN901 and unknown codes).
# JSON has no comments and an INI value runs to the end of its line (`#` included): silence
# their findings with `per-file-ignores` in the config.
LINE_KINDS = frozenset({"python", "shell", "requirements", "config", "dockerfile", "toml", "build"})
# Notebooks: unknown codes only (their comments sit in cells, located by cell and line).
CHECKED_KINDS = LINE_KINDS | {"notebook"}
UNUSED_SUPPRESSION = ("CN901", "unused-suppression")
# Entries that name the unused-suppression rule itself: such a comment is kept as asked.
_SELF = frozenset({"CN9", "CN90", "CN901"})

_DIRECTIVE_RE = re.compile(rb"#[ \t]*cuda2neuron:[ \t]*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")


@dataclass(frozen=True)
class Directive:
    """One suppression comment: 1-based line, byte offsets of its text in the file, its codes
    (None: bare ``ignore``, every rule)."""

    line: int
    start: int
    end: int
    codes: tuple[str, ...] | None
    col: int
    # The first line of the backslash-continued command whose last line holds the comment: it
    # covers every line from there (``core.continuation_starts``).
    first: int = 0


def _comment_ranges(data: bytes) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _TOKEN_RE.finditer(data) if m.lastgroup == "comment"]


def directives(data: bytes, kind: str) -> list[Directive]:
    """The suppression comments of a file (in Python, real comments only)."""
    if b"cuda2neuron:" not in data:
        return []
    comments = _comment_ranges(data) if kind == "python" else None
    out: list[Directive] = []
    offset = 0
    lines = data.splitlines(keepends=True)
    starts = continuation_starts(lines)
    for number, line in enumerate(lines, start=1):
        m = _DIRECTIVE_RE.search(line)
        if m is not None:
            start = offset + m.start()
            if comments is None or any(a <= start < b for a, b in comments):
                raw = m.group(1)
                codes = None if raw is None else tuple(c.strip().decode() for c in raw.split(b",") if c.strip())
                out.append(Directive(number, start, offset + m.end(), codes, m.start(), starts[number - 1]))
        offset += len(line)
    return out


def check_suppressions(kind: str, path: str, data: bytes, result: FileResult, config: Config, options: RunOptions, body) -> FileResult:  # noqa: ANN001
    """``result`` with suppression comments checked: unknown codes and unused ones are CN901
    findings (unused ones applied when the run fixes). Never raises for a bad file."""
    try:
        return _check(kind, path, data, result, config, options, body)
    except Exception as exc:  # a bug here costs this file, typed, like a rule bug
        return FileResult(
            path,
            FileStatus.FAILED,
            error=FileError("internal", f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()),
        )


def _check(kind: str, path: str, data: bytes, result: FileResult, config: Config, options: RunOptions, body) -> FileResult:  # noqa: ANN001
    if kind not in CHECKED_KINDS or result.status is FileStatus.FAILED:
        return result
    if not config.selects(UNUSED_SUPPRESSION[0], path):
        return result
    if kind == "notebook":
        unknown = _notebook_codes(path, result.new_bytes if result.new_bytes is not None else data)
        return replace(result, findings=_sorted(result.findings + unknown)) if unknown else result
    final = result.new_bytes if result.new_bytes is not None else data
    found = directives(final, kind)
    if not found:
        return result
    # An unknown code silences nothing (no rule's code starts with it): it is reported, and the
    # comment is judged used or unused by its known codes alone.
    unknown: list[Finding] = []
    bad_codes: set[str] = set()
    for d in found:
        bad = unknown_selectors(d.codes or ())
        if bad:
            unknown.append(_unknown_finding(path, d, bad))
            bad_codes.update(bad)
    unused = _unused(found, _all_findings(path, final, config, body), frozenset(bad_codes))
    if not unused:
        return replace(result, findings=_sorted(result.findings + tuple(unknown))) if unknown else result
    findings = [_finding(path, d, codes, final) for d, codes in unused]
    if not options.fix:
        return replace(result, findings=_sorted(result.findings + tuple(findings) + tuple(unknown)))
    new, shifted = _apply(final, unused, result.findings + tuple(unknown))
    applied = tuple(replace(f, applied=True) for f in findings)
    return FileResult(
        path,
        FileStatus.CHANGED,
        findings=_sorted(shifted + applied),
        new_bytes=new,
        old_bytes=data,
    )


def _notebook_codes(path: str, data: bytes) -> tuple[Finding, ...]:
    """CN901 for every code cell's suppression comment that names an unknown code."""
    from cuda2neuron.documents.nbjson import NotebookShapeError, locate_cells

    try:
        text = data.decode("utf-8-sig")
        cells = locate_cells(text).cells
    except (ValueError, NotebookShapeError):
        return ()  # the notebook handler reported what is wrong with the file
    index = LineIndex(text)
    out: list[Finding] = []
    # Cells are numbered from 1 among all cells, as the notebook's findings say.
    for cell in cells:
        if cell.cell_type != "code":
            continue
        for d in directives(cell.text.encode("utf-8", "surrogateescape"), "python"):
            bad = unknown_selectors(d.codes or ())
            if bad:
                # The cell's line would point into the notebook's JSON: the finding sits on the
                # file line that holds the cell's line, and its message names the cell.
                at = cell.elements[min(d.line, len(cell.elements)) - 1][0] if cell.elements else cell.start
                line = index.position(at)[0]
                f = _unknown_finding(path, d, bad)
                out.append(replace(f, span=Span(line, 0, line, 0), message=f"cell {cell.number}, line {d.line}: {f.message}"))
    return tuple(out)


def _unknown_finding(path: str, d: Directive, bad: list[str]) -> Finding:
    """CN901 for the unknown codes of one comment: it silences nothing and is left as written
    (a display-only suggestion without them: which code was meant is for a person to say)."""
    kept = [c for c in d.codes or () if c not in bad]
    many = len(bad) > 1
    return Finding(
        code=UNUSED_SUPPRESSION[0],
        name=UNUSED_SUPPRESSION[1],
        message=f"unknown rule code{'s' if many else ''} {', '.join(bad)} in a suppression comment: "
                f"{'they silence' if many else 'it silences'} nothing",
        path=path,
        span=Span(d.line, d.col, d.line, d.col + (d.end - d.start)),
        fix=Fix(Safety.DISPLAY_ONLY, _comment_text(kept) if kept else "", "drop the unknown codes"),
        guidance="correct the code (`cuda2neuron rules` lists them; a family such as CN1 works too) or drop it",
        effort=Effort.LOW,
    )


def _sorted(findings) -> tuple[Finding, ...]:  # noqa: ANN001
    return tuple(sorted(findings, key=lambda f: (not f.applied, f.span, f.code)))


def _all_findings(path: str, text: bytes, config: Config, body) -> tuple[Finding, ...]:  # noqa: ANN001
    everything = replace(config, select=("CN",), ignore=(), per_file_ignores=())
    with suppressions_disabled():
        _, findings = body(path, text, everything, RunOptions())
    return tuple(findings)


def _unused(
    found: list[Directive], findings: tuple[Finding, ...], unknown: frozenset[str] = frozenset()
) -> list[tuple[Directive, tuple[str, ...] | None]]:
    """(directive, its unused codes; None: the whole bare directive) for every directive with
    something unused. ``unknown`` codes are reported on their own and kept in the comment."""
    out = []
    for d in found:
        if d.codes is not None and _SELF & set(d.codes):
            continue
        here = [
            f.code for f in findings
            if f.code != UNUSED_SUPPRESSION[0] and f.span.start_line <= d.line and (d.first or d.line) <= f.span.end_line
        ]
        if d.codes is None:
            if not here:
                out.append((d, None))
            continue
        known = [c for c in d.codes if c not in unknown]
        idle = tuple(c for c in known if not any(code.startswith(c) for code in here))
        if len(idle) < len(known):
            # Partly used: only unused full codes are reported. A family (`CN1`, `CN2`) says
            # "no rule of these families here", written where either may fire (rules that
            # protect a fast path write `ignore[CN1,CN2]`); it goes only when all of it is idle.
            idle = tuple(c for c in idle if len(c) == len("CN101"))
        if idle:
            out.append((d, idle))
    return out


def _finding(path: str, d: Directive, idle: tuple[str, ...] | None, text: bytes) -> Finding:
    whole = idle is None or len(idle) == len(d.codes or ())  # unknown codes stay: not whole
    if idle is None:
        message = "unused suppression: no rule reports anything on this line"
    else:
        message = f"unused suppression of {', '.join(idle)}: no such finding on this line"
    replacement = "" if whole else _comment_text([c for c in d.codes or () if c not in idle])
    return Finding(
        code=UNUSED_SUPPRESSION[0],
        name=UNUSED_SUPPRESSION[1],
        message=message,
        path=path,
        span=Span(d.line, d.col, d.line, d.col + (d.end - d.start)),
        fix=Fix(Safety.SAFE, replacement, "remove the unused suppression" if whole else "drop the unused codes"),
        guidance="",
        effort=Effort.NONE,
    )


def _comment_text(codes: list[str]) -> str:
    return f"# cuda2neuron: ignore[{', '.join(codes)}]"


def _apply(text: bytes, unused, findings: tuple[Finding, ...]) -> tuple[bytes, tuple[Finding, ...]]:  # noqa: ANN001
    """``text`` with the unused suppressions removed, and ``findings`` moved up past any line
    that held nothing but a removed comment (and is gone now)."""
    lines = text.splitlines(keepends=True)
    removed_lines: list[int] = []
    by_line = {d.line: (d, idle) for d, idle in unused}
    offset = 0
    out: list[bytes] = []
    for number, line in enumerate(lines, start=1):
        if number not in by_line:
            out.append(line)
            offset += len(line)
            continue
        d, idle = by_line[number]
        a, b = d.start - offset, d.end - offset
        offset += len(line)
        body = line.rstrip(b"\r\n")
        ending = line[len(body):]
        before, after = body[:a], body[b:]
        if idle is not None and len(idle) < len(d.codes or ()):
            kept = [c for c in d.codes or () if c not in idle]
            out.append(before + _comment_text(kept).encode() + after + ending)
            continue
        rest = after.strip()
        if rest:
            # `# cuda2neuron: ignore[CN101] why` keeps its explanation as a plain comment.
            out.append(before + b"# " + rest.lstrip(b"#").strip() + ending)
        elif before.strip():
            out.append(before.rstrip() + ending)
        else:
            removed_lines.append(number)
    if not removed_lines:
        return b"".join(out), findings
    return b"".join(out), tuple(_shift(f, removed_lines) for f in findings)


def _shift(f: Finding, removed: list[int]) -> Finding:
    up = sum(1 for n in removed if n < f.span.start_line)
    if not up:
        return f
    s = f.span
    return replace(f, span=Span(s.start_line - up, s.start_col, s.end_line - up, s.end_col))
