"""Run reports as data, and their Markdown / JSON / SARIF renderings (no printing here)."""

from __future__ import annotations

from ._model import EFFORT_POINTS, EFFORT_SCALE, FileSummary, RunReport, build_report, is_manual
from ._render import to_json, to_markdown, to_sarif, write_report

__all__ = [
    "EFFORT_POINTS",
    "EFFORT_SCALE",
    "FileSummary",
    "RunReport",
    "build_report",
    "is_manual",
    "to_json",
    "to_markdown",
    "to_sarif",
    "write_report",
]
