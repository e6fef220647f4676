"""Writing results in place: atomic (core.atomic_write), refusing read-only files and files
changed during the run; a migrated copy is `_port.py`'s."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cuda2neuron.core import FileError, FileResult, FileStatus, atomic_write, remove_stale_temps

__all__ = ["InterruptedWriting", "write_in_place"]


def _read_only(path: Path) -> bool:
    # os.access lies for root (always writable); the mode bits say what the user meant.
    return not (os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


class InterruptedWriting(KeyboardInterrupt):
    """Ctrl-C while files were being written: how many already were (each one whole)."""

    def __init__(self, written: int, total: int) -> None:
        super().__init__(written, total)
        self.written = written
        self.total = total


def write_in_place(results: Sequence[FileResult]) -> list[FileResult]:
    total = sum(1 for r in results if r.status is FileStatus.CHANGED and r.new_bytes is not None)
    out: list[FileResult] = []
    try:
        _write_all(results, out)
    except KeyboardInterrupt:
        # Each file is written whole or not at all; the user must know which happened to how many.
        written = sum(1 for r in out if r.status is FileStatus.CHANGED)
        raise InterruptedWriting(written, total) from None
    return out


def _write_all(results: Sequence[FileResult], out: list[FileResult]) -> None:
    cleaned: set[Path] = set()
    for r in results:
        if r.status is not FileStatus.CHANGED or r.new_bytes is None:
            out.append(r)
            continue
        path = Path(r.path)
        if path.parent not in cleaned:
            # The temp files a killed run left beside the files we write (only stale ones).
            cleaned.add(path.parent)
            remove_stale_temps(path.parent)
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


def _failed(r: FileResult, message: str) -> FileResult:
    return replace(r, status=FileStatus.FAILED, error=FileError("io", message), new_bytes=None)
