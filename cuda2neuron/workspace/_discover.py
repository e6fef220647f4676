"""Which files a run looks at: walk the given paths, honour .gitignore and `exclude`, skip
virtualenvs and build folders, never follow symlinks.

A symlink is reported as skipped rather than followed: following it could leave the project root
and writing through it would modify a file elsewhere.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

from cuda2neuron.kinds import kind_of

__all__ = ["Discovered", "PORT_MARKER", "PRUNED_DIRS", "SkippedPath", "SourceFile", "discover"]

# Marks a folder written by `migrate --out` (the CLI writes it; discovery never walks into one
# unless it is the path given).
PORT_MARKER = ".cuda2neuron-port.json"

PRUNED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", "node_modules", ".tox", ".nox", ".venv", "venv",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "site-packages",
        "build", "dist", ".eggs",
    }
)
# Build outputs are pruned by name, but a package may own a module of that name
# (`mmengine/dist/`, a `build/` subpackage of registries): one with an `__init__.py` is source.
_OUTPUT_DIRS = frozenset({"build", "dist"})


@dataclass(frozen=True)
class SkippedPath:
    path: str
    reason: str
    # True when the user named this path and it cannot be used: a usage error, not a skip.
    error: bool = False


@dataclass(frozen=True)
class SourceFile:
    """One file a run reads: where it is, the root it was found under (``--out`` mirrors the
    tree below it), and its kind, decided once when it is found."""

    path: Path
    root: Path
    # None for a file the user named that no kind reads: its result says it was skipped.
    kind: str | None

    @classmethod
    def at(cls, path: Path, root: Path | None = None) -> SourceFile:
        return cls(path, path.parent if root is None else root, kind_of(path))


@dataclass(frozen=True)
class Discovered:
    files: tuple[SourceFile, ...]
    skipped: tuple[SkippedPath, ...]


def _is_venv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()


def _gitignore_spec(folder: Path) -> pathspec.PathSpec | None:
    f = folder / ".gitignore"
    if not f.is_file():
        return None
    try:
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def discover(
    paths: Iterable[Path],
    exclude: Iterable[str] = (),
    extra_pruned: Iterable[Path] = (),
    exclude_root: Path | None = None,
) -> Discovered:
    """The files under ``paths`` that some kind reads (``cuda2neuron.kinds``).

    ``exclude`` holds gitignore-style patterns relative to ``exclude_root`` (the folder of the
    config file that declares them), so that they mean the same from any working folder; for a
    tree outside that folder (or with no root) they are relative to the path walked.
    """
    exclude_spec = None
    pruned_abs = {p.resolve() for p in extra_pruned}
    files: list[SourceFile] = []
    skipped: list[SkippedPath] = []
    seen: set[Path] = set()
    for given in paths:
        if given.is_symlink():
            # Named, it is what the user asked for: doing nothing with exit 0 read as "clean".
            skipped.append(SkippedPath(str(given), f"a symlink (to {os.readlink(given)}): links are never followed; "
                                                   "name the file or folder it points to", error=True))
            continue
        if not given.exists():
            skipped.append(SkippedPath(str(given), "path does not exist", error=True))
            continue
        if not (given.is_file() or given.is_dir()):
            skipped.append(SkippedPath(str(given), "not a regular file or folder (a FIFO, socket or device is never "
                                                   "read: opening a FIFO waits for a writer forever)", error=True))
            continue
        if given.is_file():
            # An explicitly named file is processed whatever the ignore files say (ruff does
            # the same); pre-commit passes exactly the files it wants checked.
            if given.resolve() not in seen:
                seen.add(given.resolve())
                files.append(SourceFile.at(given))
            continue
        if exclude_spec is None:
            # pathspec is imported only here: pre-commit and editors name files, and a named
            # file is never matched against ignore patterns.
            import pathspec

            exclude_spec = pathspec.GitIgnoreSpec.from_lines(list(exclude))
        _walk(given, exclude_spec, _base_in(given, exclude_root), pruned_abs, files, skipped, seen)
    return Discovered(tuple(files), tuple(skipped))


def _port_marker(marker: Path) -> str | None:
    """None when ``marker`` is not there; "" for a port's marker; else what is wrong with it."""
    try:
        st = marker.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "not a port marker of `migrate --out` (not a regular file): its folder is neither read nor skipped"
    try:
        with open(marker, "rb") as fh:
            record = json.loads(fh.read())
        if not isinstance(record, dict):  # an older version's marker has no hashes, but is one
            raise ValueError
    except (OSError, ValueError, RecursionError):
        # The folder is neither read as source nor silently skipped: a person decides.
        return ("not a port marker of `migrate --out` (empty or garbled): remove it to have its folder "
                "checked, or exclude the folder")
    return ""


def _base_in(folder: Path, root: Path | None) -> str:
    """``folder`` relative to ``root`` as a pattern prefix ("" at the root or outside it)."""
    if root is None:
        return ""
    try:
        rel = folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return ""
    return "" if rel == "." else rel + "/"


def _walk(root, exclude_spec, base, pruned_abs, files, skipped, seen) -> None:
    # (folder, [(base folder of a .gitignore, its spec), ...])
    stack: list[tuple[Path, list[tuple[Path, pathspec.PathSpec]]]] = [(root, [])]
    while stack:
        folder, specs = stack.pop()
        own = _gitignore_spec(folder)
        if own is not None:
            specs = [*specs, (folder, own)]
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedPath(str(folder), f"cannot list folder: {exc.strerror}"))
            continue
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            rel_root = base + path.relative_to(root).as_posix()
            is_dir = entry.is_dir(follow_symlinks=False)
            if _ignored(path, is_dir, specs) or exclude_spec.match_file(rel_root + ("/" if is_dir else "")):
                continue
            if entry.is_symlink():
                if kind_of(path) is not None:
                    skipped.append(SkippedPath(str(path), "symlink: not followed"))
                continue
            if is_dir:
                if _pruned(entry.name, path):
                    continue
                if path.resolve() in pruned_abs:
                    continue
                marker = _port_marker(path / PORT_MARKER)
                if marker is not None:
                    # A copy written by `migrate --out` is a port, not more source: a later
                    # `check .` / `migrate .` over the tree that holds it must not read it.
                    # A file of that name that is no marker of ours (empty, garbled, a FIFO)
                    # must not hide its folder: that is an error naming it.
                    if marker:
                        skipped.append(SkippedPath(str(path / PORT_MARKER), marker, error=True))
                    continue
                subdirs.append(path)
            elif entry.is_file(follow_symlinks=False) and (kind := kind_of(path)) is not None:
                resolved = path.resolve()
                if resolved not in seen:
                    seen.add(resolved)
                    files.append(SourceFile(path, root, kind))
        for sub in reversed(subdirs):
            stack.append((sub, specs))


def _pruned(name: str, path: Path) -> bool:
    if name in _OUTPUT_DIRS:
        return not (path / "__init__.py").is_file()
    return name in PRUNED_DIRS or name.endswith(".egg-info") or _is_venv(path)


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.PathSpec]]) -> bool:
    ignored = False
    for base, spec in specs:
        rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        result = spec.check_file(rel)
        if result.include is not None:
            ignored = result.include
    return ignored
