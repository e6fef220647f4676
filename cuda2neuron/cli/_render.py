"""Text output for people: findings, the run summary and coloured diffs."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from cuda2neuron.core import FileResult, Finding

from ._console import Console

if TYPE_CHECKING:
    from cuda2neuron.report import RunReport

__all__ = ["diff_text", "print_diff", "print_finding", "print_summary"]


def finding_line(f: Finding) -> str:
    fixable = ""
    if not f.applied and f.fix is not None:
        fixable = f" [{f.fix.safety.value} fix]"
    return f"{f.path}:{f.span.start_line}:{f.span.start_col + 1}: {f.code} {f.message}{fixable}"


def print_finding(console: Console, f: Finding) -> None:
    console.say(finding_line(f))
    if f.guidance and not f.applied:
        console.say((f"    → {f.guidance}", "dim"))


def diff_text(result: FileResult) -> str:
    assert result.old_bytes is not None and result.new_bytes is not None
    old = result.old_bytes.decode("utf-8", "replace").splitlines(keepends=True)
    new = result.new_bytes.decode("utf-8", "replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, fromfile=f"a/{result.path}", tofile=f"b/{result.path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def print_diff(console: Console, result: FileResult) -> None:
    text = diff_text(result)
    if not console.is_terminal:
        # Piped into a file or a patch tool: plain text, and no per-line styling cost.
        console.file.write(text)
        return
    for line in text.splitlines():
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        console.say((line, style) if style else line, soft_wrap=True)


def print_summary(console: Console, report: RunReport, wrote: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    cov = "n/a" if report.coverage is None else f"{report.coverage:.0%}"
    console.print(
        f"[bold]{report.scanned}[/] files scanned, [bold]{report.changed}[/] {wrote}, "
        f"[bold]{len(report.failed)}[/] failed · {len(report.edits)} edits · "
        f"{len(report.manual)} manual actions · coverage {cov} · effort left: {report.effort}"
    )
    if report.edits_per_rule:
        table = Table(title="Edits per rule", show_edge=False, title_justify="left")
        table.add_column("rule")
        table.add_column("edits", justify="right")
        for rule, n in report.edits_per_rule.items():
            table.add_row(rule, str(n))
        console.print(table)
    if report.manual:
        table = Table(title="Manual actions", show_edge=False, title_justify="left")
        table.add_column("location", overflow="fold")
        table.add_column("rule")
        table.add_column("effort")
        table.add_column("what to do", overflow="fold")
        for f in report.manual:
            what = f.message + (f". {f.guidance}" if f.guidance else "")
            table.add_row(f"{f.path}:{f.span.start_line}", f.code, f.effort.value, escape(what))
        console.print(table)
    for r in report.failed:
        assert r.error is not None
        where = f"{r.path}:{r.error.line}" if r.error.line else r.path
        console.print(f"[red]failed[/] {escape(where)}: {escape(r.error.kind)}: {escape(r.error.message)}")
    for s in report.skipped:
        console.print(f"[yellow]skipped[/] {escape(s.path)}: {escape(s.reason)}")
