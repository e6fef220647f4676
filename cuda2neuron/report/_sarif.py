"""SARIF 2.1.0 (code scanning): every rule's metadata, results with fixes, failed files.

Validated against the official 2.1.0 schema in tests/report/test_sarif.py. Columns are 1-based
and ``endColumn`` is the column just past the region, as the spec defines them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cuda2neuron import __version__
from cuda2neuron.core import FileResult, Finding

from ._docs import rule_help_uri
from ._model import RunReport, finding_status

__all__ = ["SARIF_SCHEMA", "artifact_uri", "to_sarif"]

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def artifact_uri(path: str) -> str:
    """A file's URI: relative paths stay relative (to the run's folder), absolute ones are file:."""
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    return quote(p.as_posix())


def _region(f: Finding) -> dict[str, int]:
    return {
        "startLine": f.span.start_line,
        "startColumn": f.span.start_col + 1,
        "endLine": f.span.end_line,
        "endColumn": f.span.end_col + 1,
    }


def _rule_descriptor(code: str, rule: type | None, name: str) -> dict[str, Any]:
    descriptor: dict[str, Any] = {"id": code, "name": getattr(rule, "name", name)}
    if rule is not None:
        docs = rule.docs()
        descriptor["shortDescription"] = {"text": rule.summary()}
        descriptor["fullDescription"] = {"text": docs.split("## Why", 1)[0].replace("## What it does", "").strip()}
        descriptor["help"] = {"text": docs, "markdown": docs}
        fixes = sorted(s.value for s in getattr(rule, "fixes", ()))
        descriptor["properties"] = {"fixes": fixes}
    else:
        descriptor["shortDescription"] = {"text": name}
    uri = rule_help_uri(code)
    if uri is not None:
        descriptor["helpUri"] = uri
    return descriptor


def _result(f: Finding, index: dict[str, int]) -> dict[str, Any]:
    status = finding_status(f)
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        # A fix already written is a note (what changed); anything left is a warning.
        "level": "note" if status == "fixed" else "warning",
        "message": {"text": f.message + (f" — {f.guidance}" if f.guidance else "")},
        "locations": [
            {"physicalLocation": {"artifactLocation": {"uri": artifact_uri(f.path)}, "region": _region(f)}}
        ],
        "properties": {"status": status, "effort": f.effort.value},
    }
    if status == "fixable" and f.fix is not None:
        result["fixes"] = [
            {
                "description": {"text": f.fix.description or f"{f.fix.safety.value} fix"},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": artifact_uri(f.path)},
                        "replacements": [
                            {"deletedRegion": _region(f), "insertedContent": {"text": f.fix.replacement}}
                        ],
                    }
                ],
                "properties": {"safety": f.fix.safety.value},
            }
        ]
    return result


def _notification(r: FileResult) -> dict[str, Any]:
    assert r.error is not None
    location: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(r.path)}}
    if r.error.line:
        location["region"] = {"startLine": r.error.line, **({"startColumn": r.error.col} if r.error.col else {})}
    return {
        "level": "error",
        "message": {"text": f"{r.path}: {r.error.kind}: {r.error.message}"},
        "descriptor": {"id": r.error.kind},
        "locations": [{"physicalLocation": location}],
    }


def to_sarif(report: RunReport, rules: dict[str, type] | None = None) -> str:
    """The run as SARIF; ``rules`` is the catalog the descriptors are taken from. Only the
    rules that fired are described (ruff's way): all of them made a 360 KB file for 42 results."""
    findings = [f for r in report.results for f in r.findings]
    fired = sorted({f.code for f in findings})
    if rules is None and fired:
        from cuda2neuron.kinds import catalog  # loads every rule: only machine formats need it

        rules = catalog()
    rules = rules or {}
    # Catalog order (by code); a finding from outside the catalog still needs a descriptor.
    codes = [c for c in rules if c in fired] + [c for c in fired if c not in rules]
    names = {f.code: f.name for f in findings}
    index = {code: i for i, code in enumerate(codes)}
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "cuda2neuron",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [_rule_descriptor(code, rules.get(code), names.get(code, code)) for code in codes],
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not report.failed,
                        "commandLine": f"cuda2neuron {report.command}",
                        "toolExecutionNotifications": [_notification(r) for r in report.failed],
                    }
                ],
                "results": [_result(f, index) for f in findings],
                # Lines that still mention CUDA and no specific rule covers (CN902 results).
                "properties": {"residualLines": len(report.residual)},
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"
