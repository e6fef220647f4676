"""Run reports as data, and their renderings as text (no printing here): text, concise, JSON,
JSON Lines, SARIF, GitHub annotations, GitLab Code Quality, JUnit, Markdown and HTML."""

from __future__ import annotations

from ._ci import to_github, to_gitlab, to_junit
from ._docs import fix_kind, rule_help_uri, rules_reference, rules_table
from ._html import ValidationReportError, load_validation, to_html
from ._json import SCHEMA_VERSION, to_json, to_json_lines
from ._model import (
    CONSTRUCT_UNITS,
    EFFORT_BANDS,
    EFFORT_HOURS,
    EFFORT_RANGE,
    EFFORT_SCALE,
    REVIEW_HOURS,
    Construct,
    FileSummary,
    RunReport,
    build_report,
    constructs,
    describe_effort,
    effort_level,
    finding_hours,
    finding_status,
    is_manual,
)
from ._render import OUTPUT_FORMATS, REPORT_SUFFIXES, render, to_markdown, write_report
from ._sarif import to_sarif
from ._text import finding_header, fix_note, to_concise, to_text

__all__ = [
    "CONSTRUCT_UNITS",
    "EFFORT_BANDS",
    "EFFORT_HOURS",
    "EFFORT_RANGE",
    "EFFORT_SCALE",
    "REVIEW_HOURS",
    "OUTPUT_FORMATS",
    "REPORT_SUFFIXES",
    "SCHEMA_VERSION",
    "Construct",
    "FileSummary",
    "RunReport",
    "ValidationReportError",
    "build_report",
    "constructs",
    "describe_effort",
    "effort_level",
    "finding_header",
    "finding_hours",
    "fix_kind",
    "finding_status",
    "fix_note",
    "is_manual",
    "load_validation",
    "render",
    "rule_help_uri",
    "rules_reference",
    "rules_table",
    "to_concise",
    "to_github",
    "to_gitlab",
    "to_html",
    "to_json",
    "to_json_lines",
    "to_junit",
    "to_markdown",
    "to_sarif",
    "to_text",
    "write_report",
]
