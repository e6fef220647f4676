"""Localisation: from the first diverging tensor to the migrate edits that may have caused it.

The diverging module's class source range is known from the reference run (file relative to the
original tree, first and last line); the migrate rules are re-run on that ORIGINAL file and the
findings inside the range are listed. A library module (nn.Linear) has no source of ours: the
walk goes up the module path to the nearest user-defined ancestor for the source range, and on
to the nearest one with findings for the edits. Edits made by hand after migrate have no
finding: `_hand_edits.py` names those lines.

Only edits that can have caused the divergence are listed: before the first optimizer step, a
forward output, loss or gradient depends on the class's forward code (and what it calls through
`self.`), its `__init__` (buffers, device placement) and its class body, never on
`configure_optimizers` or `generate` (nanoGPT's GPT listed its fused-AdamW edit at a divergence
in attention). From the first step on, the optimizer's setup matters: the whole class.

A port that raised where the original ran through: the edits on the crashing path — the
functions of the tree on its traceback, and the classes of the objects the raising line uses
(a scaler turned off for bf16 in another module, whose empty `state_dict()` the loop reads).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from cuda2neuron.validate._model import Divergence, EditFinding, TensorComparison

# Where a module's forward starts; with __init__ the roots of the code a step-0 tensor depends on.
_ROOTS = ("forward", "__call__", "_forward", "__init__")

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


def _parse(original: Path, rel: str, trees: dict[str, ast.Module | None]) -> ast.Module | None:
    if rel not in trees:
        try:
            trees[rel] = ast.parse((original / rel).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            trees[rel] = None
    return trees[rel]


def _span(node: ast.AST) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def _class_at(tree: ast.Module, start: int, end: int) -> ast.ClassDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and start <= node.lineno <= end:
            return node
    return None


def _self_calls(fn: ast.AST) -> set[str]:
    """Names reached through ``self.NAME`` in a method (calls and callbacks alike)."""
    return {n.attr for n in ast.walk(fn)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}


def _unrelated_methods(klass: ast.ClassDef) -> list[tuple[int, int]]:
    """Line spans of the methods a step-0 forward cannot reach: not a root, not reached from one
    through ``self.`` (``configure_optimizers``, ``generate``, ``from_pretrained``)."""
    methods = {n.name: n for n in klass.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    reached: set[str] = set()
    todo = [m for m in _ROOTS if m in methods]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += [m for m in _self_calls(methods[name]) if m in methods and m not in reached]
    return [_span(fn) for name, fn in methods.items() if name not in reached]


def _related(found: tuple[EditFinding, ...], original: Path, info: dict[str, Any], comparison: TensorComparison,
             trees: dict[str, ast.Module | None]) -> tuple[EditFinding, ...]:
    """The class's findings that can have caused ``comparison`` (module docstring)."""
    if comparison.step >= 1 or comparison.kind not in ("forward", "output", "loss", "grad"):
        return found
    tree = _parse(original, info["file"], trees)
    klass = _class_at(tree, info["start"], info["end"]) if tree is not None else None
    if klass is None:
        return found
    unrelated = _unrelated_methods(klass)
    return tuple(f for f in found if not any(a <= f.line <= b for a, b in unrelated))


def _function_span(tree: ast.Module, qualname: str) -> tuple[int, int] | None:
    """Lines of the function or class ``qualname`` (``Trainer.step``, ``main.<locals>.inner``)."""
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in parts:
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            return None
        body = node.body  # type: ignore[attr-defined]
    return _span(node) if node is not None else None


def crash_findings(original: Path, crash_path: tuple[tuple[str, str, int], ...]) -> tuple[tuple[EditFinding, ...], str]:
    """Migrate edits on a crash's path (module docstring) and how to name that scope: the classes
    the raising line uses first (the most specific: the scaler whose state is read), then the
    raising function, then its callers outwards."""
    cache: dict[str, tuple[EditFinding, ...] | None] = {}
    trees: dict[str, ast.Module | None] = {}
    frames = [p for p in crash_path if p[2]]
    classes = [p for p in crash_path if not p[2]]
    ordered = [*classes, *reversed(frames)]
    found: list[EditFinding] = []
    where: list[str] = []
    for rel, name, _line in ordered:
        if name == "<module>" and any(w == rel or w.startswith(rel + " (") for w in where):
            continue  # the file's own frames are listed already
        tree = _parse(original, rel, trees)
        if tree is None:
            continue  # a file the original does not have (added in the port)
        span = None if name == "<module>" else _function_span(tree, name)
        if span is None and name != "<module>":
            continue
        here = _findings_in(original, rel, *(span or (None, None)), cache) or ()
        label = f"{rel} ({'class ' if not _line else ''}{name})" if name != "<module>" else rel
        where.append(label)
        found += [f for f in here if f not in found]
    scope = f"the crashing path: {', '.join(where)}" if where else "the crashing path (outside the original's files)"
    return tuple(found), scope


def localise(
    comparison: TensorComparison,
    original: Path,
    classes: dict[str, dict[str, Any]],
    module_classes: dict[str, str],
    fallback_file: str | None,
    crash_path: tuple[tuple[str, str, int], ...] = (),
) -> Divergence:
    """`classes`: class qualname -> {file, start, end}; `module_classes`: module path -> class;
    `crash_path`: where a port that raised went through its tree (RunFailure.crash_path)."""
    cache: dict[str, tuple[EditFinding, ...] | None] = {}
    trees: dict[str, ast.Module | None] = {}
    path = comparison.module_path
    klass = comparison.module_class if comparison.kind == "forward" else None
    first_user: tuple[str, str, dict[str, Any]] | None = None
    engine_missing = False
    if comparison.kind == "crash" and crash_path:
        try:
            from cuda2neuron.workspace import lint_source  # noqa: F401 - the engine is there
        except ImportError:
            engine_missing = True
        if not engine_missing:
            found, scope = crash_findings(original, crash_path)
            if found:
                return Divergence(comparison.key, comparison.kind, comparison.step, path, None, None, None, found, scope,
                                  comparison.reason)
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
            found = _related(found, original, info, comparison, trees)
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
