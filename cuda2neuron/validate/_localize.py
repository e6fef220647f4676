"""Localisation: from the first diverging tensor to the migrate edits that may have caused it.

The diverging module's class source range is known from the reference run (file relative to the
original tree, first and last line); the migrate rules are re-run on that ORIGINAL file and the
findings inside the range are listed. A library module (nn.Linear) has no source of ours: the
walk goes up the module path to the nearest user-defined ancestor for the source range, and on
to the nearest one with findings for the edits. Edits made by hand after migrate have no
finding: `_hand_edits.py` names those lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda2neuron.validate._model import Divergence, EditFinding, TensorComparison

__all__ = ["localise"]


def _findings_in(original: Path, rel: str, start: int | None, end: int | None,
                 cache: dict[str, tuple[EditFinding, ...] | None]) -> tuple[EditFinding, ...] | None:
    if rel not in cache:
        try:
            from cuda2neuron.workspace import lint_source
        except ImportError:
            cache[rel] = None
            return None
        try:
            source = (original / rel).read_text(encoding="utf-8")
            found = lint_source(source, rel)
        except Exception:  # noqa: BLE001 - a rule crash must not hide the divergence itself
            cache[rel] = None
            return None
        cache[rel] = tuple(
            EditFinding(f.code, f.name, f.message, rel, f.span.start_line, f.span.start_col) for f in found
        )
    all_findings = cache[rel]
    if all_findings is None:
        return None
    if start is None or end is None:
        return all_findings
    return tuple(f for f in all_findings if start <= f.line <= end)


def _ancestors(path: str) -> list[str]:
    root, _, dotted = path.partition(":")
    parts = dotted.split(".") if dotted else []
    return [f"{root}:{'.'.join(parts[:i])}" for i in range(len(parts), -1, -1)]


def localise(
    comparison: TensorComparison,
    original: Path,
    classes: dict[str, dict[str, Any]],
    module_classes: dict[str, str],
    fallback_file: str | None,
) -> Divergence:
    """`classes`: class qualname -> {file, start, end}; `module_classes`: module path -> class."""
    cache: dict[str, tuple[EditFinding, ...] | None] = {}
    path = comparison.module_path
    klass = comparison.module_class if comparison.kind == "forward" else None
    first_user: tuple[str, str, dict[str, Any]] | None = None
    engine_missing = False
    if path and not path.startswith("?"):
        for candidate in _ancestors(path):
            cls = module_classes.get(candidate)
            if cls is None or cls not in classes:
                continue
            info = classes[cls]
            first_user = first_user or (candidate, cls, info)
            found = _findings_in(original, info["file"], info["start"], info["end"], cache)
            if found is None:
                engine_missing = True
                break
            if found:
                # The source shown is the nearest user class (where the diverging module lives);
                # the findings may come from an enclosing class further up.
                near = first_user[2]
                return Divergence(comparison.key, comparison.kind, comparison.step, path,
                                  klass or module_classes.get(path), near["file"], (near["start"], near["end"]), found,
                                  f"class {cls} ({candidate or 'model'})", comparison.reason)
    if fallback_file and not engine_missing:
        found = _findings_in(original, fallback_file, None, None, cache) or ()
        scope = f"{fallback_file} (the entry / training script)"
    else:
        found, scope = (), "migrate engine unavailable" if engine_missing else "no user-defined module"
    info = first_user[2] if first_user else None
    return Divergence(comparison.key, comparison.kind, comparison.step, path,
                      klass or (module_classes.get(path) if path else None),
                      info["file"] if info else None, (info["start"], info["end"]) if info else None,
                      tuple(found), scope, comparison.reason)
