"""Writing results: in place (atomic, refusing read-only files) or as a migrated copy."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cuda2neuron.core import FileError, FileResult, FileStatus, atomic_write

from ._discover import SourceFile

__all__ = ["write_copy", "write_in_place"]


def _read_only(path: Path) -> bool:
    # os.access lies for root (always writable); the mode bits say what the user meant.
    return not (os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def write_in_place(results: Sequence[FileResult]) -> list[FileResult]:
    out: list[FileResult] = []
    for r in results:
        if r.status is not FileStatus.CHANGED or r.new_bytes is None:
            out.append(r)
            continue
        path = Path(r.path)
        try:
            if _read_only(path):
                out.append(_failed(r, "file is read-only; not rewritten"))
                continue
            # Re-check the bytes: a file edited while we worked must not be clobbered.
            if path.read_bytes() != r.old_bytes:
                out.append(_failed(r, "file changed on disk during the run; not rewritten"))
                continue
            atomic_write(path, r.new_bytes)
        except OSError as exc:
            out.append(_failed(r, f"cannot write: {exc.strerror or exc}"))
            continue
        out.append(r)
    return out


def _failed(r: FileResult, message: str) -> FileResult:
    return replace(r, status=FileStatus.FAILED, error=FileError("io", message), new_bytes=None)


def _copy_ignore(out_dir: Path):
    out_abs = out_dir.resolve()

    def ignore(folder: str, names: list[str]) -> list[str]:
        skipped = [n for n in names if n in (".git", ".hg", ".svn")]
        skipped += [n for n in names if (Path(folder) / n).resolve() == out_abs]
        return skipped

    return ignore


def write_copy(results: Sequence[FileResult], files: Sequence[SourceFile], out_dir: Path) -> list[FileResult]:
    """Mirror the root of each of ``files`` into ``out_dir`` and put the rewritten files there.

    Every file not rewritten is copied byte for byte (symlinks stay links), so the copy is a
    complete project that can be run and validated. A result finds its file by its path.
    """
    import shutil  # only `migrate --out` copies a tree; check and diff never load it

    root_of = {str(f.path): f.root for f in files}
    out: list[FileResult] = []
    distinct_roots = list(dict.fromkeys(f.root.resolve() for f in files))
    single = len(distinct_roots) == 1
    for root in distinct_roots:
        dest = out_dir if single else out_dir / root.name
        shutil.copytree(root, dest, symlinks=True, ignore=_copy_ignore(out_dir), dirs_exist_ok=True)
    for r in results:
        if r.status is not FileStatus.CHANGED or r.new_bytes is None:
            out.append(r)
            continue
        root = root_of[r.path]
        rel = Path(r.path).resolve().relative_to(root.resolve())
        dest = (out_dir if single else out_dir / root.resolve().name) / rel
        try:
            atomic_write(dest, r.new_bytes, mode_from=Path(r.path))
        except OSError as exc:
            out.append(_failed(r, f"cannot write {dest}: {exc.strerror or exc}"))
            continue
        out.append(r)
    return out
