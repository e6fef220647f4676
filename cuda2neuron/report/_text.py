"""Findings as text: ``concise`` (one line each) and ``text`` (ruff's full format, with source).

Both return strings; the CLI decides where they go. Lines and columns are 1-based.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cuda2neuron.core import FileResult, Finding, Safety

from ._model import RunReport

__all__ = ["finding_header", "fix_note", "source_of", "to_concise", "to_text"]

# Lines of source shown around a finding, before and after (ruff shows two).
_CONTEXT = 2
# A finding spanning more lines than this shows its first lines only.
_MAX_SPAN_LINES = 6


def fix_note(f: Finding, unsafe: bool = False) -> str:
    """What the flags can do about ``f``; never a promise that no flag keeps.

    ``unsafe``: the run already allows unsafe fixes (then `--fix` alone applies them).
    """
    if f.applied:
        return " [fixed]"
    if f.fix is None:
        return ""
    if f.fix.safety is Safety.SAFE:
        return " [fixable: --fix]"
    if f.fix.safety is Safety.UNSAFE:
        return " [fixable: --fix]" if unsafe else " [fixable: --fix --unsafe-fixes]"
    return " [no automatic fix]"


def finding_header(f: Finding, unsafe_fixes: bool = False) -> str:
    """``path:line:col: CODE message [fixable: --fix]`` -- the concise line, and the first line
    of the full format."""
    return f"{f.path}:{f.span.start_line}:{f.span.start_col + 1}: {f.code} {f.message}{fix_note(f, unsafe_fixes)}"


def _listed(report: RunReport, show_fixed: bool):
    # Like ruff: after --fix only what is left is listed (--show-fixes adds what was fixed).
    return (f for r in report.results for f in r.findings if show_fixed or not f.applied)


def to_concise(report: RunReport, unsafe_fixes: bool = False, show_fixes: bool = False) -> str:
    return "".join(finding_header(f, unsafe_fixes) + "\n" for f in _listed(report, show_fixes))


def source_of(result: FileResult, sources: Mapping[str, bytes] | None = None) -> list[str] | None:
    """The lines the findings' spans point into, or None when the source cannot be read.

    Spans refer to the source as read: a changed file's ``old_bytes`` (after --fix the file
    on disk already holds the new text), else the given ``sources`` (stdin), else the file.
    """
    data = result.old_bytes
    if data is None and sources is not None:
        data = sources.get(result.path)
    if data is None:
        try:
            data = Path(result.path).read_bytes()
        except OSError:
            return None
    return data.decode("utf-8", "replace").splitlines()


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


def _fix_lines(f: Finding, show_fixes: bool) -> list[str]:
    if f.fix is None or f.applied:
        return []
    if f.fix.safety is Safety.DISPLAY_ONLY:
        # Advice only: no flag writes it, so say what to write by hand.
        return [f"  = suggested, to apply by hand: {_one_line(f.fix.replacement)}"]
    if show_fixes:
        what = f.fix.description or "rewrite"
        return [f"  = fix ({f.fix.safety.value}): {what} → {_one_line(f.fix.replacement) or '(removed)'}"]
    return []


def _snippet(f: Finding, lines: list[str]) -> list[str]:
    start, end = f.span.start_line, min(f.span.end_line, f.span.start_line + _MAX_SPAN_LINES - 1)
    if not 1 <= start <= len(lines):
        return []
    first = max(1, start - _CONTEXT)
    last = min(len(lines), end + _CONTEXT)
    width = len(str(last))
    gutter = " " * width
    out = [f"{gutter} |"]
    for n in range(first, last + 1):
        text = lines[n - 1].replace("\t", "    ") if "\t" in lines[n - 1] else lines[n - 1]
        out.append(f"{n:>{width}} | {text}".rstrip())
        if n == start:
            line = lines[n - 1]
            begin = min(f.span.start_col, len(line))
            stop = f.span.end_col if f.span.end_line == start else len(line)
            carets = "^" * max(1, min(stop, len(line)) - begin)
            pad = line[:begin].replace("\t", "    ")
            out.append(f"{gutter} | {' ' * len(pad)}{carets} {f.code}")
    out.append(f"{gutter} |")
    return out


def to_text(
    report: RunReport,
    unsafe_fixes: bool = False,
    sources: Mapping[str, bytes] | None = None,
    show_fixes: bool = False,
) -> str:
    """ruff's full format: the header, the source around the finding, then help and fix lines.

    ``sources``: the bytes of files that are not on disk (stdin), by path. ``show_fixes``: list
    the findings --fix wrote too, and each fixable finding's fix.
    """
    blocks: list[str] = []
    lines_of: dict[str, list[str] | None] = {}
    by_path = {r.path: r for r in report.results}
    for f in _listed(report, show_fixes):
        if f.path not in lines_of:
            lines_of[f.path] = source_of(by_path[f.path], sources) if f.path in by_path else None
        lines = lines_of[f.path]
        block = [finding_header(f, unsafe_fixes)]
        if lines is not None:
            block += _snippet(f, lines)
        if f.guidance and not f.applied:
            block.append(f"  = help: {f.guidance}")
        block += _fix_lines(f, show_fixes)
        blocks.append("\n".join(block) + "\n")
    return "\n".join(blocks)
