"""The oldest torch a project supports, read from its requirements (default for ``--min-torch``)."""

from __future__ import annotations

import re
from pathlib import Path

from cuda2neuron.core import SourceError

from .requirements import parse_pyproject, parse_requirements

__all__ = ["min_torch_from_requirements", "torch_lower_bound"]

_CLAUSE_RE = re.compile(r"(>=|~=|==|>)\s*(\d+)\.(\d+)")


def torch_lower_bound(spec: str) -> tuple[int, int] | None:
    """``torch>=2.7,<3`` -> (2, 7); ``torch==2.6.*`` -> (2, 6); ``torch`` -> None."""
    m = re.match(r"\s*torch(?![\w.-])(?:\[[^\]]*\])?\s*(.*)", spec, re.IGNORECASE)
    if not m:
        return None
    rest = m.group(1).split(";", 1)[0]  # environment markers are not bounds
    bounds = [(int(c.group(2)), int(c.group(3))) for c in _CLAUSE_RE.finditer(rest)]
    # `>2.6` admits 2.6.1, still in the 2.6 series: the minor version is the bound either way.
    return max(bounds) if bounds else None


def min_torch_from_requirements(root: Path) -> tuple[int, int] | None:
    """The highest lower bound on ``torch`` declared in ``root``'s requirements*.txt and
    pyproject.toml (several files must all hold, so the strictest bound is the oldest torch the
    code has to run on), or None when none is declared. Unreadable files are skipped: this only
    picks a default."""
    bounds: list[tuple[int, int]] = []
    candidates = sorted(root.glob("requirements*.txt")) + sorted(root.glob("requirements/*.txt"))
    for path in candidates:
        try:
            doc = parse_requirements(path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError):
            continue
        bounds += [b for d in doc.dependencies if d.name == "torch" and (b := torch_lower_bound(d.spec))]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            doc = parse_pyproject(pyproject.read_text(encoding="utf-8-sig"), str(pyproject))
        except SourceError:  # invalid TOML is reported by the config loader, not here
            doc = None
        if doc is not None:
            bounds += [b for d in doc.dependencies if d.name == "torch" and (b := torch_lower_bound(d.spec))]
    return max(bounds) if bounds else None
