"""Renderings of a RunReport: JSON for machines, Markdown for people, SARIF for code scanning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda2neuron import __version__
from cuda2neuron.core import Finding, atomic_write

from ._model import RunReport

__all__ = ["to_json", "to_markdown", "to_sarif", "write_report"]


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "rule": f.name,
        "path": f.path,
        "line": f.span.start_line,
        "col": f.span.start_col,
        "end_line": f.span.end_line,
        "end_col": f.span.end_col,
        "message": f.message,
        "applied": f.applied,
        "fix": None
        if f.fix is None
        else {"safety": f.fix.safety.value, "replacement": f.fix.replacement, "description": f.fix.description},
        "guidance": f.guidance,
        "effort": f.effort.value,
    }


def to_json(report: RunReport) -> str:
    data = {
        "tool": "cuda2neuron",
        "version": __version__,
        "command": report.command,
        "target": report.target,
        "summary": {
            "files_scanned": report.scanned,
            "files_changed": report.changed,
            "files_failed": len(report.failed),
            "edits": len(report.edits),
            "manual_actions": len(report.manual),
            "fixable": len(report.fixable),
            "unsafe_fixable": len(report.unsafe_fixable),
            "coverage": report.coverage,
            "effort": report.effort,
            "edits_per_rule": report.edits_per_rule,
        },
        "files": [
            {
                "path": s.path,
                "status": s.status,
                "edits": s.edits,
                "manual": s.manual,
                "coverage": s.coverage,
                "effort": s.effort,
                "error": s.error or None,
            }
            for s in report.files
        ],
        "edits": [_finding(f) for f in report.edits],
        "manual_actions": [_finding(f) for f in report.manual],
        # Not manual work: `--fix` applies these (`--unsafe-fixes` the unsafe ones).
        "fixable": [_finding(f) for f in (*report.fixable, *report.unsafe_fixable)],
        "failures": [
            {"path": r.path, "kind": r.error.kind, "message": r.error.message, "line": r.error.line}
            for r in report.failed
            if r.error is not None
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
    }
    import json  # here: text output (the common case) never needs it

    return json.dumps(data, indent=2) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: RunReport) -> str:
    cov = "n/a" if report.coverage is None else f"{report.coverage:.0%}"
    out = [
        f"# cuda2neuron {report.command} report",
        "",
        f"Target: `{report.target}`",
        "",
        "| files scanned | changed | failed | edits | manual actions | coverage | effort left |",
        "|---|---|---|---|---|---|---|",
        f"| {report.scanned} | {report.changed} | {len(report.failed)} | {len(report.edits)} "
        f"| {len(report.manual)} | {cov} | {report.effort} |",
        "",
    ]
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
    per_file = [s for s in report.files if s.edits or s.manual or s.error]
    if per_file:
        out += ["## Per file", "", "| file | status | edits | manual | coverage | effort |", "|---|---|---|---|---|---|"]
        for s in per_file:
            c = "n/a" if s.coverage is None else f"{s.coverage:.0%}"
            out.append(f"| `{s.path}` | {s.status} | {s.edits} | {s.manual} | {c} | {s.effort} |")
        out.append("")
    return "\n".join(out)


def to_sarif(report: RunReport, rules: dict[str, type] | None = None) -> str:
    findings = [f for r in report.results for f in r.findings]
    used = sorted({(f.code, f.name) for f in findings})
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "cuda2neuron",
                        "version": __version__,
                        "rules": [
                            {
                                "id": code,
                                "name": name,
                                "shortDescription": {
                                    "text": rules[code].summary() if rules and code in rules else name
                                },
                            }
                            for code, name in used
                        ],
                    }
                },
                "results": [
                    {
                        "ruleId": f.code,
                        "level": "note" if f.applied else "warning",
                        "message": {"text": f.message + (f" — {f.guidance}" if f.guidance else "")},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": Path(f.path).as_posix()},
                                    "region": {
                                        "startLine": f.span.start_line,
                                        "startColumn": f.span.start_col + 1,
                                        "endLine": f.span.end_line,
                                        "endColumn": f.span.end_col + 1,
                                    },
                                }
                            }
                        ],
                    }
                    for f in findings
                ],
            }
        ],
    }
    import json

    return json.dumps(sarif, indent=2) + "\n"


def write_report(report: RunReport, path: Path) -> None:
    """Write by extension: .json, .md/.markdown, .sarif. Raises ValueError for others."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = to_json(report)
    elif suffix in (".md", ".markdown"):
        text = to_markdown(report)
    elif suffix == ".sarif":
        text = to_sarif(report)
    else:
        raise ValueError(f"{path}: report format is chosen by extension: .md, .json or .sarif")
    atomic_write(path, text.encode("utf-8"))
