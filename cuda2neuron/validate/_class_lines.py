"""Where the tree under test defines a class: its file, first and last line, and its ``__init__``'s
lines. The recorder sends them for every module class of a run, so that a crash or a divergence
inside a class can name the migrate edits in it (the crash box's "edits on the crashing path").

One parse per file: `inspect.getsourcelines` parses the whole file again for every class, ~0.3 s
of CPU a run on RetinaNet, five runs a validate. `tests/validate/test_class_lines.py` holds it to
what inspect says.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import sys
from typing import Any

__all__ = ["class_lines"]


def class_lines(cls: type, tree_root: str, spans: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Where the tree defines ``cls`` (file, lines, its ``__init__``'s lines); None for a class
    outside the tree, whose file is then not read. ``spans`` caches each file's parse."""
    try:
        path = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None
    if not path:
        return None
    path = os.path.realpath(path)
    root = os.path.realpath(tree_root)
    if not path.startswith(root + os.sep):
        return None  # a library class (torch.nn.Linear ...): no migrate edits to point at
    if path not in spans:
        module = sys.modules.get(cls.__module__)
        # linecache with the module's globals: an overlay module's loader serves its own text.
        text = "".join(linecache.getlines(path, module.__dict__ if module is not None else None))
        try:
            spans[path] = _definition_spans(ast.parse(text))
        except (SyntaxError, ValueError):
            spans[path] = {}
    found = spans[path].get(cls.__qualname__)
    if found is None:
        return None  # made at run time (type(...), exec): no lines of its own in the file
    start, end = found
    init_lines: list[tuple[int, int]] = []
    init = cls.__dict__.get("__init__")
    try:
        init = inspect.unwrap(init) if init is not None else None  # functools.wraps: the decorated one
    except ValueError:
        init = None
    code = getattr(init, "__code__", None)
    if code is not None and os.path.realpath(code.co_filename) == path:
        span = spans[path].get(f"@{code.co_firstlineno}")
        if span is not None:
            init_lines.append(span)
    return {"file": os.path.relpath(path, root), "start": start, "end": end, "init": init_lines}


def _definition_spans(tree: ast.Module) -> dict[str, tuple[int, int]]:
    """First and last line of every class by qualified name, and of every function by the line
    its code object starts at (``@<line>``); decorators included, as `inspect` counts them."""
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                end = child.end_lineno or child.lineno
                if isinstance(child, ast.ClassDef):
                    spans.setdefault(prefix + child.name, (start, end))
                    visit(child, f"{prefix}{child.name}.")
                else:
                    spans.setdefault(f"@{start}", (start, end))
                    visit(child, f"{prefix}{child.name}.<locals>.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return spans
