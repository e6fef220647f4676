"""Formats CI systems read: GitHub workflow annotations, GitLab Code Quality, JUnit XML."""

from __future__ import annotations

# hashlib and xml.etree are imported by the renderers that use them: `check` imports this
# module on every run, and a pre-commit run is a fresh process each time.
import json
from collections import Counter

from cuda2neuron.core import Effort, Finding, printable

from ._model import RunReport, finding_status

__all__ = ["to_github", "to_gitlab", "to_junit"]


# -- GitHub Actions: https://docs.github.com/actions (workflow commands, "error" / "notice") ---

def _gh_data(text: str) -> str:
    # The message part of a workflow command: %, CR and LF are escaped, nothing else.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    # A property value also ends at ',' and the message starts at '::'.
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(report: RunReport) -> str:
    """``::error file=…,line=…,col=…,endLine=…,endColumn=…,title=…::CODE message`` per finding.

    A fix already written is a ``notice``; a failed file is an ``error`` on its first line.
    """
    out = []
    for r in report.results:
        for f in r.findings:
            command = "notice" if f.applied else "error"
            props = ",".join(
                [
                    f"file={_gh_property(f.path)}",
                    f"line={f.span.start_line}",
                    f"col={f.span.start_col + 1}",
                    f"endLine={f.span.end_line}",
                    f"endColumn={f.span.end_col + 1}",
                    f"title={_gh_property(f'cuda2neuron ({f.code} {f.name})')}",
                ]
            )
            message = f"{f.code} {f.message}" + (f" — {f.guidance}" if f.guidance and not f.applied else "")
            out.append(f"::{command} {props}::{_gh_data(message)}")
    for r in report.failed:
        assert r.error is not None
        props = f"file={_gh_property(r.path)},line={r.error.line or 1}"
        if r.error.col:
            props += f",col={r.error.col}"
        props += f",title={_gh_property('cuda2neuron: file failed')}"
        out.append(f"::error {props}::{_gh_data(f'{r.error.kind}: {r.error.message}')}")
    return "".join(line + "\n" for line in out)


# -- GitLab Code Quality (a JSON array; docs.gitlab.com "Code Quality" report format) --------

_SEVERITY = {Effort.NONE: "info", Effort.LOW: "minor", Effort.MEDIUM: "major", Effort.HIGH: "critical"}


def _fingerprint(f: Finding, occurrence: int) -> str:
    import hashlib

    # Stable when lines move: the rule, the file, the message and which occurrence of that
    # message in the file it is -- not the line number (GitLab compares fingerprints across
    # merge requests to tell new findings from old ones).
    key = "\x00".join([f.code, f.path, f.message, str(occurrence)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def to_gitlab(report: RunReport) -> str:
    seen: Counter[tuple[str, str, str]] = Counter()
    issues = []
    for r in report.results:
        for f in r.findings:
            if f.applied:
                continue  # written already: nothing left to review
            seen[(f.code, f.path, f.message)] += 1
            issues.append(
                {
                    "type": "issue",
                    "check_name": f.code,
                    "description": f"{f.code} {f.message}",
                    "content": {"body": f.guidance} if f.guidance else {"body": f.message},
                    "categories": ["Compatibility"],
                    "severity": _SEVERITY[f.effort] if finding_status(f) == "manual" else "minor",
                    "fingerprint": _fingerprint(f, seen[(f.code, f.path, f.message)]),
                    "location": {"path": f.path, "lines": {"begin": f.span.start_line, "end": f.span.end_line}},
                }
            )
    import hashlib

    for r in report.failed:
        assert r.error is not None
        issues.append(
            {
                "type": "issue",
                "check_name": f"cuda2neuron/{r.error.kind}",
                "description": f"{r.error.kind}: {r.error.message}",
                "categories": ["Bug Risk"],
                "severity": "blocker",
                "fingerprint": hashlib.sha256(f"failed\x00{r.path}".encode()).hexdigest()[:32],
                "location": {"path": r.path, "lines": {"begin": r.error.line or 1}},
            }
        )
    return json.dumps(issues, indent=2) + "\n"


# -- JUnit XML: a test suite per file, a test case per rule that fired in it -------------------

def to_junit(report: RunReport) -> str:
    """One ``testsuite`` per scanned file; in it one ``testcase`` per rule code found there (a
    ``failure`` listing every location), or one passing case for a clean file, or an ``error``
    case for a file that failed."""
    from xml.etree import ElementTree as ET

    root = ET.Element("testsuites", name="cuda2neuron")
    totals = Counter[str]()
    for r in report.results:
        if r.status.value == "skipped":
            continue
        path = printable(r.path)
        suite = ET.SubElement(root, "testsuite", name=path)
        counts = Counter[str]()
        left = [f for f in r.findings if not f.applied]
        if r.error is not None:
            case = ET.SubElement(suite, "testcase", name="cuda2neuron", classname=path)
            error = ET.SubElement(case, "error", message=printable(f"{r.error.kind}: {r.error.message}"), type=r.error.kind)
            error.text = printable(r.error.traceback or r.error.message)
            counts["tests"] += 1
            counts["errors"] += 1
        by_rule: dict[str, list[Finding]] = {}
        for f in left:
            by_rule.setdefault(f.code, []).append(f)
        for code, found in sorted(by_rule.items()):
            case = ET.SubElement(suite, "testcase", name=f"{code} {found[0].name}", classname=path)
            failure = ET.SubElement(
                case, "failure", message=printable(f"{len(found)} finding(s): {found[0].message}"), type=code
            )
            failure.text = printable("\n".join(
                f"{f.path}:{f.span.start_line}:{f.span.start_col + 1}: {f.code} {f.message}" for f in found
            ))
            counts["tests"] += 1
            counts["failures"] += 1
        if r.error is None and not by_rule:
            ET.SubElement(suite, "testcase", name="cuda2neuron", classname=path)
            counts["tests"] += 1
        for key in ("tests", "failures", "errors"):
            suite.set(key, str(counts[key]))
            totals[key] += counts[key]
    for key in ("tests", "failures", "errors"):
        root.set(key, str(totals[key]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
