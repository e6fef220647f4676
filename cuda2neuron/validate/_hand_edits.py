"""Port lines that migrate did not write: where a port was edited by hand after `migrate`.

When a port diverges, the responsible change is either a migrate edit (a wrong rewrite: the
findings `_localize.py` lists) or a change made by hand afterwards (a completed TODO, a
"fix", a dropped line). The second kind has no finding to point at, so validate re-runs
migrate on the original file and diffs the result with the port's file: every differing line
is an edit migrate did not make. The engine is the same one `migrate` uses, so nothing here
imports torch.

Trap: a port written with `--unsafe-fixes` (or another target) differs from the default
output by those fixes; each file is compared with the candidate output that explains most of it.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from cuda2neuron.validate._model import HandEdit

__all__ = ["hand_edits"]

_MAX_FILES = 200
_MAX_BYTES = 1 << 20
_SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".tox", ".mypy_cache", ".pytest_cache"}
_MARKER = ".cuda2neuron-port.json"  # written by `migrate --out`: the target it ported to


def _python_files(root: Path) -> Iterator[str]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), root)


def _configs(original: Path, port: Path) -> list[object]:
    from cuda2neuron.core import ConfigError, find_pyproject, load_config

    try:
        base = load_config(find_pyproject(original))
    except ConfigError:
        from cuda2neuron.core import Config

        base = Config()
    try:
        target = json.loads((port / _MARKER).read_text(encoding="utf-8")).get("target")
    except (OSError, ValueError, AttributeError):
        target = None
    if target:
        base = base.with_overrides(target=target)
    return [base, base.with_overrides(unsafe_fixes=True)]


def _diff(expected: str, actual: str, rel: str) -> list[HandEdit]:
    want, have = expected.splitlines(), actual.splitlines()
    edits: list[HandEdit] = []
    matcher = difflib.SequenceMatcher(None, want, have, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if op == "delete":
            # Nothing left in the port: point at the line the removed text stood before.
            edits.append(HandEdit(rel, j1 + 1, "removed", want[i1].strip()))
            continue
        kind = "added" if op == "insert" else "changed"
        edits.extend(HandEdit(rel, j + 1, kind, have[j].strip()) for j in range(j1, j2))
    return edits


def _file_edits(original: Path, port: Path, rel: str, configs: list[object]) -> list[HandEdit]:
    from cuda2neuron.workspace import fix_source

    try:
        if (original / rel).stat().st_size > _MAX_BYTES or (port / rel).stat().st_size > _MAX_BYTES:
            return []
        source = (original / rel).read_text(encoding="utf-8")
        actual = (port / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    best: list[HandEdit] | None = None
    for config in configs:
        try:
            expected, _ = fix_source(source, rel, config)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - an unparsable file or a rule crash: no claim about it
            return []
        edits = _diff(expected, actual, rel)
        if best is None or len(edits) < len(best):
            best = edits
        if not best:
            break
    return best or []


def hand_edits(original: Path, port: Path, first: Iterable[str] = (), limit: int = 12,
               skip: frozenset[str] = frozenset()) -> tuple[HandEdit, ...]:
    """Lines of the port's Python files that differ from migrate's output for the original,
    the files in `first` (the diverging class's file, the entry or script) searched first;
    `skip`: files the port run read migrated by validate itself (validate/_trees.py)."""
    try:
        configs = _configs(original, port)
    except ImportError:  # the engine is not installed next to validate
        return ()
    ported = set(_python_files(port)) - skip
    order = [rel for rel in dict.fromkeys(first) if rel in ported]
    order += [rel for rel in _python_files(original) if rel in ported and rel not in order]
    found: list[HandEdit] = []
    for rel in order[:_MAX_FILES]:
        if not (original / rel).is_file():
            continue
        found.extend(_file_edits(original, port, rel, configs))
        if len(found) >= limit:
            break
    return tuple(found[:limit])
