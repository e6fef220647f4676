"""Text output for people: findings, the run summary and coloured diffs."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from cuda2neuron.core import Config, FileResult, Finding, Safety, printable

from ._console import Console

if TYPE_CHECKING:
    from cuda2neuron.report import RunReport

__all__ = ["SUMMARY_ROWS", "diff_text", "effort_lines", "finding_line", "print_diff", "print_finding", "print_summary",
           "print_statistics", "settings_text"]


def finding_line(f: Finding, unsafe: bool = False) -> str:
    # One wording for every output: the report's (text, concise and this stderr listing).
    from cuda2neuron.report import finding_header

    return finding_header(f, unsafe)


def print_finding(console: Console, f: Finding, *, unsafe: bool = False, show_fix: bool = False) -> None:
    console.say(finding_line(f, unsafe))
    if f.applied:
        return
    if f.guidance:
        console.say((f"    → {f.guidance}", "dim"))
    if f.fix is not None and f.fix.safety is Safety.DISPLAY_ONLY:
        # Advice only: no flag writes it (display-only), so say what to write by hand.
        console.say((f"    suggested, to apply by hand: {_one_line(f.fix.replacement)}", "dim"))
    elif show_fix and f.fix is not None:
        what = f.fix.description or "rewrite"
        console.say((f"    fix ({f.fix.safety.value}): {what} → {_one_line(f.fix.replacement) or '(removed)'}", "dim"))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


def diff_text(result: FileResult) -> str:
    assert result.old_bytes is not None and result.new_bytes is not None
    old = result.old_bytes.decode("utf-8", "replace").splitlines(keepends=True)
    new = result.new_bytes.decode("utf-8", "replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, fromfile=f"a/{result.path}", tofile=f"b/{result.path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def print_diff(console: Console, result: FileResult) -> None:
    text = diff_text(result)
    if not console.styled:
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


def effort_text(report: RunReport) -> str:
    from cuda2neuron.report import describe_effort

    text = describe_effort(report.effort_hours)
    if report.failed:
        # A failed file was not looked at: its work is not in the estimate.
        text += f", not counting {len(report.failed)} failed file(s)"
    return text


def headline(report: RunReport, wrote: str) -> str:
    """One line: what the run did and what is left (README "Coverage and effort"). Every count
    here is the length of the table below it that lists the same things."""
    parts = [
        f"{report.scanned} files scanned, {report.changed} {wrote}, {len(report.failed)} failed",
        f"{len(report.edits)} edits",
        f"{len(report.manual)} manual action{'' if len(report.manual) == 1 else 's'}",
    ]
    if report.unsafe_fixable:
        parts.append(f"{len(report.unsafe_fixable)} more fixable with --unsafe-fixes")
    if report.residual:
        # Counted apart (CN902): lines no specific rule covers; `nothing CUDA-specific left`
        # below needs no remaining finding at all, so never prints while any is left.
        parts.append(f"{len(report.residual)} lines still mention CUDA")
    if report.coverage is not None:
        parts.append(f"coverage {report.coverage:.0%}")
    elif report.failed:
        # Never "nothing left" while a file could not be read: what it holds is unknown.
        parts.append(f"{len(report.failed)} file(s) not processed")
    elif not report.remaining:
        parts.append("nothing CUDA-specific left")
    else:
        # Nothing rewritten: a finished port (the edits were made before) or only manual work.
        parts.append("nothing left to rewrite automatically")
    parts.append(f"effort left: {effort_text(report)}")
    return " · ".join(parts)


def next_steps(report: RunReport, mode: str, paths: list[str], out_dir: str | None) -> list[str]:
    """What to do after `migrate`: review, validate, and the work that is left."""
    from collections import Counter

    shown = " ".join(paths)
    steps: list[str] = []
    if mode == "diff":
        if report.changed:
            steps.append(f"review the diff above, then write it: cuda2neuron migrate {shown}")
    elif mode == "out":
        if report.changed:
            steps.append(f"review the port: diff -ru {shown} {out_dir}")
        steps.append(f"prove it: cuda2neuron validate {shown} {out_dir} --entry MODULE:CALLABLE (or --script train.py)")
    else:
        if report.changed:
            steps.append("review the changes: git diff (the files were rewritten in place)")
        steps.append(
            f"prove the port: cuda2neuron validate {shown} --rev <pre-port ref> --entry MODULE:CALLABLE "
            "(--rev defaults to HEAD: validate before you commit, or name the commit before the port)"
        )
    by_effort = Counter(f.effort.value for f in report.manual)
    left = []
    if report.manual:
        levels = ", ".join(f"{by_effort[e]} {e}" for e in ("high", "medium", "low", "none") if by_effort[e])
        left.append(f"{len(report.manual)} manual action(s) ({levels})")
    if report.unsafe_fixable:
        left.append(f"{len(report.unsafe_fixable)} unsafe fix(es) to review (then rerun with --unsafe-fixes)")
    if report.failed:
        left.append(f"{len(report.failed)} failed file(s), not rewritten")
    if left:
        where = f"`cuda2neuron check {out_dir or shown}` lists them again"
        steps.append(f"left: {', '.join(left)}; effort {effort_text(report)}; listed below, {where}")
    else:
        steps.append("left: nothing: no manual action remains")
    return steps


# Rows a terminal summary lists per table: a large repository's thousands of findings go to
# --report / check's outputs, and what to do next stays on the first screen (issue 43: 13,732
# lines with the next steps at the very end).
SUMMARY_ROWS = 25
TOP = 5  # rules and files named in the summary's leading lines


def _hours(h: float) -> str:
    return f"{round(h * 60)} min" if h < 1 else f"{round(h * 2) / 2:g} h"


def effort_lines(report: RunReport) -> list[str]:
    """The estimate's range and what makes most of it (README "Coverage and effort")."""
    if report.effort_hours <= 0:
        return []
    low, high = report.effort_range
    units = len(report.constructs)
    lines = [f"Effort: {effort_text(report)}; likely {_hours(low)} to {_hours(high)}, "
             f"{units} piece{'' if units == 1 else 's'} of work"]
    for what in ("file", "rule"):
        top = report.effort_by(what)
        if top:
            lines.append(f"  most by {what}: " + ", ".join(f"{name} ({_hours(h)})" for name, h in top))
    return lines


def _top_counts(names: list[str]) -> str:
    from collections import Counter

    counts = Counter(names).most_common()
    shown = ", ".join(f"{name} {n}" for name, n in counts[:TOP])
    return shown + (f", {len(counts) - TOP} more" if len(counts) > TOP else "")


def print_summary(
    console: Console, report: RunReport, wrote: str, mode: str = "", paths: list[str] | None = None, out_dir: str | None = None
) -> None:
    """Totals first, then the effort, the next steps and the top rules and files; then the
    tables, each up to SUMMARY_ROWS rows (the full lists are the reports')."""
    from rich.markup import escape
    from rich.table import Table

    console.say(headline(report, wrote), soft_wrap=True)
    for line in effort_lines(report):
        console.say(line, soft_wrap=True)
    if mode:
        console.say(("Next steps:", "bold"))
        for i, step in enumerate(next_steps(report, mode, paths or ["."], out_dir), start=1):
            console.say(f"  {i}. {step}", soft_wrap=True)
    left = report.remaining
    if left:
        console.say(f"Findings left by rule: {_top_counts([f'{f.code} {f.name}' for f in left])}", soft_wrap=True)
        console.say(f"Findings left by file: {_top_counts([f.path for f in left])}", soft_wrap=True)
    if report.edits_per_rule:
        table = Table(title="Edits per rule", show_edge=False, title_justify="left")
        table.add_column("rule")
        table.add_column("edits", justify="right")
        for rule, n in report.edits_per_rule.items():
            table.add_row(rule, str(n))
        console.print(table)
    # Two tables, each titled with the count the headline gives for it.
    for title, rows in (
        (f"Manual actions ({len(report.manual)})", report.manual),
        (f"Unsafe fixes to review ({len(report.unsafe_fixable)}): rerun with --unsafe-fixes to apply them",
         report.unsafe_fixable),
    ):
        if not rows:
            continue
        table = Table(title=title, show_edge=False, title_justify="left")
        table.add_column("location", overflow="fold")
        table.add_column("rule")
        table.add_column("effort")
        table.add_column("what to do", overflow="fold")
        for f in rows[:SUMMARY_ROWS]:
            what = f.message + (f". {f.guidance}" if f.guidance else "")
            if f.fix is not None and f.fix.safety is Safety.DISPLAY_ONLY:
                what += f" (no automatic fix; suggested: {_one_line(f.fix.replacement) or '(remove it)'})"
            table.add_row(escape(printable(f"{f.path}:{f.span.start_line}")), f.code, f.effort.value, escape(printable(what)))
        console.print(table)
        if len(rows) > SUMMARY_ROWS:
            console.say(f"  ... and {len(rows) - SUMMARY_ROWS} more: {_FULL_LIST}", soft_wrap=True)
    for r in report.failed[:SUMMARY_ROWS]:
        assert r.error is not None
        where = f"{r.path}:{r.error.line}" if r.error.line else r.path
        console.print(f"[red]failed[/] {escape(where)}: {escape(r.error.kind)}: {escape(r.error.message)}")
    for s in report.skipped[:SUMMARY_ROWS]:
        console.print(f"[yellow]skipped[/] {escape(s.path)}: {escape(s.reason)}")
    more = max(0, len(report.failed) - SUMMARY_ROWS) + max(0, len(report.skipped) - SUMMARY_ROWS)
    if more:
        console.say(f"  ... and {more} more failed or skipped: {_FULL_LIST}", soft_wrap=True)


_FULL_LIST = "every one in --report FILE (.html, .md, .json, .sarif) or `cuda2neuron check --output-format concise PATH`"


def print_statistics(console: Console, report: RunReport) -> None:
    """ruff's --statistics: one row per rule, how many findings and how many are fixable."""
    from collections import Counter

    counts = Counter((f.code, f.name) for f in report.remaining)
    fixable = Counter(f.code for f in (*report.fixable, *report.unsafe_fixable))
    for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = f" ({fixable[code]} fixable)" if fixable[code] else ""
        console.say(f"{n:>5}  {code}  {name}{mark}")


def settings_text(config: Config) -> str:
    """--show-settings: the resolved settings as the keys of a cuda2neuron.toml (paste-able), the
    file they came from first. min-torch is the configured one: a run may still read the
    project's requirements for it when neither the config nor --min-torch sets it."""
    import json

    def toml_list(items) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    s = config.settings
    source = config.source or "none found: the defaults"
    pfi = ", ".join(f"{json.dumps(glob)} = {toml_list(codes)}" for glob, codes in config.per_file_ignores)
    lines = [
        f"# config: {source}",
        f"select = {toml_list(config.select)}",
        f"ignore = {toml_list(config.ignore)}",
        f"exclude = {toml_list(config.exclude)}",
        f"per-file-ignores = {{{pfi}}}" if pfi else "per-file-ignores = {}",
        f"unsafe-fixes = {'true' if config.unsafe_fixes else 'false'}",
        f"target = {json.dumps(s.target)}",
        f"amp-dtype = {json.dumps(s.amp_dtype)}",
        f'min-torch = "{s.min_torch[0]}.{s.min_torch[1]}"' + ("" if config.min_torch_given else
                                                             "  # the default, or the project's requirements'"),
    ]
    return "\n".join(lines) + "\n"
