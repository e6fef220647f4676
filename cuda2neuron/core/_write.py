"""Atomic file writes: a temp file in the same folder, fsync, rename. An interrupt leaves
either the old file or the new one, never a torn one; permission bits are kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    mode_src = mode_from if mode_from is not None else path
    try:
        mode = stat.S_IMODE(os.stat(mode_src).st_mode)
    except FileNotFoundError:
        mode = 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    # Imported here: a check that writes nothing (the common case) skips tempfile's import.
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".c2n-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
