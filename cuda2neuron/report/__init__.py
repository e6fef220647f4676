"""Run reports as data, and their Markdown / JSON / SARIF renderings (no printing here)."""

from __future__ import annotations

from ._model import EFFORT_POINTS, FileSummary, RunReport, build_report
from ._render import to_json, to_markdown, to_sarif, write_report

__all__ = [
    "EFFORT_POINTS",
    "FileSummary",
    "RunReport",
    "build_report",
    "to_json",
    "to_markdown",
    "to_sarif",
    "write_report",
]
