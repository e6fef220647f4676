"""The oldest torch a project supports, read from its requirements (default for ``--min-torch``)."""

from __future__ import annotations

import re
from pathlib import Path

from cuda2neuron.core import SourceError

from .requirements import parse_pyproject, parse_requirements

__all__ = ["min_torch_from_requirements", "min_torch_neuronx_from_requirements", "neuronx_lower_bound", "torch_lower_bound"]

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


_NEURONX_CLAUSE_RE = re.compile(r"(>=|~=|==|>)\s*(\d+(?:\.\d+)+)")


def neuronx_lower_bound(spec: str) -> tuple[int, ...] | None:
    """``torch-neuronx>=2.14.3.1`` -> (2, 14, 3, 1); ``torch-neuronx==2.14.*`` -> (2, 14); else None."""
    m = re.match(r"\s*torch[-_.]neuronx(?![\w.-])(?:\[[^\]]*\])?\s*(.*)", spec, re.IGNORECASE)
    if not m:
        return None
    rest = m.group(1).split(";", 1)[0]
    bounds = [tuple(int(p) for p in c.group(2).split(".")) for c in _NEURONX_CLAUSE_RE.finditer(rest)]
    return max(bounds) if bounds else None


def min_torch_from_requirements(root: Path) -> tuple[int, int] | None:
    """The highest lower bound on ``torch`` declared in ``root``'s requirements*.txt and
    pyproject.toml (several files must all hold, so the strictest bound is the oldest torch the
    code has to run on), or None when none is declared. Unreadable files are skipped: this only
    picks a default."""
    return _highest_bound(root, torch_lower_bound)  # type: ignore[return-value]


def _highest_bound(root: Path, bound) -> tuple[int, ...] | None:  # noqa: ANN001 - spec -> bound or None
    # `bound` reads the package's name from the spec itself (torch's never matches torch-neuronx).
    bounds: list[tuple[int, ...]] = []
    candidates = sorted(root.glob("requirements*.txt")) + sorted(root.glob("requirements/*.txt"))
    for path in candidates:
        try:
            doc = parse_requirements(path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError):
            continue
        bounds += [b for d in doc.dependencies if (b := bound(d.spec))]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            doc = parse_pyproject(pyproject.read_text(encoding="utf-8-sig"), str(pyproject))
        except SourceError:  # invalid TOML is reported by the config loader, not here
            doc = None
        if doc is not None:
            bounds += [b for d in doc.dependencies if (b := bound(d.spec))]
    return max(bounds) if bounds else None


def min_torch_neuronx_from_requirements(root: Path) -> tuple[int, ...] | None:
    """The highest lower bound on ``torch-neuronx`` in ``root``'s requirements*.txt and
    pyproject.toml, as ``min_torch_from_requirements`` reads torch's; None when none is declared."""
    return _highest_bound(root, neuronx_lower_bound)
