"""Markdown for people, and the one table of formats: ``--output-format`` and ``--report``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cuda2neuron.core import atomic_write

from ._ci import to_github, to_gitlab, to_junit
from ._html import to_html
from ._json import to_json, to_json_lines
from ._model import RunReport, describe_effort
from ._sarif import to_sarif
from ._text import to_concise, to_text

__all__ = ["OUTPUT_FORMATS", "REPORT_SUFFIXES", "render", "to_markdown", "write_report"]

# `--output-format` values (ruff's names where ruff has the format). "full" is ruff's name for
# the text format with source snippets; "text" stays the default name. "html" is ours: the page
# `migrate --report x.html` writes, for `check --output-format html -o check.html` in CI.
OUTPUT_FORMATS = ("text", "full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "html")

# `--report FILE`: the format is chosen by the file's extension.
REPORT_SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".sarif": "sarif", ".html": "html", ".htm": "html"}


def render(
    report: RunReport,
    output_format: str,
    *,
    unsafe_fixes: bool = False,
    sources: Mapping[str, bytes] | None = None,
    rules: dict[str, type] | None = None,
    show_fixes: bool = False,
) -> str:
    """The report in one of OUTPUT_FORMATS (or ``markdown`` / ``html``), as text.

    ``show_fixes`` (text formats): list the findings --fix wrote too, and the fixes."""
    if output_format in ("text", "full"):
        return to_text(report, unsafe_fixes, sources, show_fixes)
    if output_format == "concise":
        return to_concise(report, unsafe_fixes, show_fixes)
    if output_format == "json":
        return to_json(report)
    if output_format == "json-lines":
        return to_json_lines(report)
    if output_format == "sarif":
        return to_sarif(report, rules)
    if output_format == "github":
        return to_github(report)
    if output_format == "gitlab":
        return to_gitlab(report)
    if output_format == "junit":
        return to_junit(report)
    if output_format == "markdown":
        return to_markdown(report)
    if output_format == "html":
        return to_html(report)
    raise ValueError(f"unknown output format {output_format!r}; choose one of {', '.join(OUTPUT_FORMATS)}")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: RunReport) -> str:
    cov = "n/a" if report.coverage is None else f"{report.coverage:.0%}"
    out = [
        f"# cuda2neuron {report.command} report",
        "",
        f"Target: `{report.target}`",
        "",
        "| files scanned | changed | failed | edits | fixable | manual actions | coverage | effort left |",
        "|---|---|---|---|---|---|---|---|",
        f"| {report.scanned} | {report.changed} | {len(report.failed)} | {len(report.edits)} "
        f"| {len(report.fixable) + len(report.unsafe_fixable)} | {len(report.manual)} | {cov} | {describe_effort(report.effort_hours)} |",
        "",
    ]
    if report.residual:
        out += [f"{len(report.residual)} lines still mention CUDA (CN902: no specific rule covers them; review each).", ""]
    if report.edits_per_rule:
        out += ["## Edits per rule", "", "| rule | edits |", "|---|---|"]
        out += [f"| {rule} | {n} |" for rule, n in report.edits_per_rule.items()]
        out.append("")
    if report.manual:
        out += ["## Manual actions", "", "| location | rule | effort | what to do |", "|---|---|---|---|"]
        for f in report.manual:
            what = f.guidance or f.message
            out.append(
                f"| `{f.path}:{f.span.start_line}` | {f.code} {f.name} | {f.effort.value} | "
                f"{_md_escape(f.message)}. {_md_escape(what) if f.guidance else ''} |"
            )
        out.append("")
    if report.fixable or report.unsafe_fixable:
        out += ["## Fixable (`check --fix`; unsafe ones with `--unsafe-fixes`)", "", "| location | rule | safety | fix |", "|---|---|---|---|"]
        for f in (*report.fixable, *report.unsafe_fixable):
            assert f.fix is not None
            out.append(
                f"| `{f.path}:{f.span.start_line}` | {f.code} {f.name} | {f.fix.safety.value} | "
                f"{_md_escape(f.fix.description or f.message)} |"
            )
        out.append("")
    if report.failed:
        out += ["## Failed files", "", "| file | problem |", "|---|---|"]
        for r in report.failed:
            assert r.error is not None
            where = f"{r.path}:{r.error.line}" if r.error.line else r.path
            out.append(f"| `{where}` | {r.error.kind}: {_md_escape(r.error.message)} |")
        out.append("")
    if report.edits:
        out += ["## Edits", "", "| location | rule | safety | change |", "|---|---|---|---|"]
        for f in report.edits:
            safety = f.fix.safety.value if f.fix else ""
            change = f.fix.description if f.fix and f.fix.description else f.message
            out.append(f"| `{f.path}:{f.span.start_line}` | {f.code} {f.name} | {safety} | {_md_escape(change)} |")
        out.append("")
    per_file = [s for s in report.files if s.edits or s.fixable or s.manual or s.error]
    if per_file:
        out += ["## Per file", "", "| file | status | edits | fixable | manual | coverage | effort |", "|---|---|---|---|---|---|---|"]
        for s in per_file:
            c = "n/a" if s.coverage is None else f"{s.coverage:.0%}"
            out.append(f"| `{s.path}` | {s.status} | {s.edits} | {s.fixable} | {s.manual} | {c} | {s.effort} |")
        out.append("")
    return "\n".join(out)


def write_report(
    report: RunReport,
    path: Path,
    *,
    rules: dict[str, type] | None = None,
    validation: Mapping[str, Any] | None = None,
) -> None:
    """Write by extension (REPORT_SUFFIXES); ``validation`` (a validate JSON report) goes into
    an HTML page. Raises ValueError for another extension."""
    kind = REPORT_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: report format is chosen by extension: .md, .json, .sarif or .html")
    text = to_html(report, validation) if kind == "html" else render(report, kind, rules=rules)
    atomic_write(path, text.encode("utf-8"))
