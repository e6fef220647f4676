"""JSON and JSON Lines renderings of a RunReport (documented in docs/output-formats.md).

The JSON document is versioned by ``schema_version``: a consumer checks it, and a change that
removes or renames a field bumps it. Lines and columns are 1-based, as in the text output;
``end_col`` is the column just past the finding (SARIF's ``endColumn``).
"""

from __future__ import annotations

import json
from typing import Any

from cuda2neuron import __version__
from cuda2neuron.core import Finding

from ._model import RunReport, finding_status

__all__ = ["SCHEMA_VERSION", "finding_record", "to_json", "to_json_lines"]

# Bump on any change that removes, renames or retypes a field (adding fields does not).
SCHEMA_VERSION = 1


def finding_record(f: Finding) -> dict[str, Any]:
    """One finding as JSON data: 1-based line and column, its status and its fix."""
    return {
        "code": f.code,
        "rule": f.name,
        "path": f.path,
        "line": f.span.start_line,
        "col": f.span.start_col + 1,
        "end_line": f.span.end_line,
        "end_col": f.span.end_col + 1,
        "message": f.message,
        "status": finding_status(f),
        "applied": f.applied,
        "fix": None
        if f.fix is None
        else {"safety": f.fix.safety.value, "replacement": f.fix.replacement, "description": f.fix.description},
        "guidance": f.guidance,
        "effort": f.effort.value,
    }


def _document(report: RunReport) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "cuda2neuron",
        "version": __version__,
        "command": report.command,
        "target": report.target,
        "summary": {
            "files_scanned": report.scanned,
            "files_changed": report.changed,
            "files_failed": len(report.failed),
            "edits": len(report.edits),
            "fixable": len(report.fixable),  # safe: --fix writes them
            "unsafe_fixable": len(report.unsafe_fixable),  # --fix --unsafe-fixes writes them
            "manual_actions": len(report.manual),
            # Of the manual actions: lines that still mention CUDA and no specific rule covers (CN902).
            "residual_lines": len(report.residual),
            "coverage": report.coverage,
            "effort": report.effort,  # the band (EFFORT_BANDS) of effort_hours
            "effort_hours": round(report.effort_hours, 2),
            "edits_per_rule": report.edits_per_rule,
        },
        "files": [
            {
                "path": s.path,
                "status": s.status,
                "edits": s.edits,
                "fixable": s.fixable,
                "manual": s.manual,
                "coverage": s.coverage,
                "effort": s.effort,
                "error": s.error or None,
            }
            for s in report.files
        ],
        "edits": [finding_record(f) for f in report.edits],
        # Not manual work: `--fix` writes these (`--unsafe-fixes` too for the unsafe ones).
        "fixable": [finding_record(f) for f in (*report.fixable, *report.unsafe_fixable)],
        "manual_actions": [finding_record(f) for f in report.manual],
        "failures": [
            {
                "path": r.path,
                "kind": r.error.kind,
                "message": r.error.message,
                "line": r.error.line,
                "col": r.error.col,  # FileError.col is 1-based already
            }
            for r in report.failed
            if r.error is not None
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
    }


def to_json(report: RunReport) -> str:
    return json.dumps(_document(report), indent=2) + "\n"


def to_json_lines(report: RunReport) -> str:
    """One finding per line (every status), then one ``"type": "failure"`` line per failed file.

    Each line is a whole JSON object, so a consumer can stream it; findings carry
    ``"type": "finding"`` and the fields of the JSON document's findings.
    """
    lines = [
        json.dumps({"type": "finding", **finding_record(f)})
        for r in report.results
        for f in r.findings
    ]
    lines += [
        json.dumps({"type": "failure", **failure})
        for failure in _document(report)["failures"]
    ]
    return "".join(line + "\n" for line in lines)
