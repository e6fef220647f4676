"""The port run's view of files validate migrated itself (``_trees.py``): new since the
revision of an in-place migrate (the entry, written in CUDA terms after the migrate), migrated in
memory and kept in an overlay folder at the same relative paths as in the tree.

An import that resolves to such a file in the tree gets the overlay's text, compiled under the
tree file's own name: ``__file__``, tracebacks and the recorder's source locations stay the
user's paths, and files next to it (data, configs) are found as usual. Nothing is written into
the user's tree.

Trap: the loader compiles the text itself instead of going through ``SourceFileLoader``'s
bytecode cache, whose ``.pyc`` for the tree's file (if one exists) holds the unmigrated code.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ["install", "migrated_text", "run_script"]


class _Loader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, text: str) -> None:
        super().__init__(fullname, path)
        self._text = text

    def get_source(self, fullname: str) -> str:  # noqa: ARG002 - the loader protocol
        return self._text

    def get_code(self, fullname: str) -> types.CodeType:  # noqa: ARG002 - the loader protocol
        return compile(self._text, self.path, "exec", dont_inherit=True)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, tree: Path, overlay: Path) -> None:
        self._tree = tree.resolve()
        self._overlay = overlay

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:  # noqa: ARG002
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.has_location:
            return None
        text = migrated_text(self._tree, self._overlay, spec.origin)
        if text is None:
            return None
        spec.loader = _Loader(fullname, spec.origin, text)
        spec.cached = None
        return spec


def migrated_text(tree: Path, overlay: Path, file: str) -> str | None:
    """The overlay's text for ``file`` (a path in ``tree``), or None when it has none."""
    try:
        rel = Path(file).resolve().relative_to(tree.resolve())
    except ValueError:
        return None
    candidate = overlay / rel
    return candidate.read_text(encoding="utf-8") if candidate.is_file() else None


def install(tree: Path, overlay: Path) -> None:
    """Serve ``overlay``'s files for imports that resolve into ``tree`` (first on sys.meta_path)."""
    sys.meta_path.insert(0, _Finder(tree, overlay))


def run_script(path: str, text: str) -> None:
    """Run ``text`` as the script ``path`` (what ``runpy.run_path`` does with the file itself)."""
    import builtins

    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None, __loader__=None, __spec__=None,
                         __package__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(compile(text, path, "exec", dont_inherit=True), main.__dict__)  # noqa: S102 - the user's script
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
