"""Writing a file so that no interruption leaves it torn, and so that it stays the same file.

The usual way is a temp file in the same folder (``.NAME.XXXXXXXX.c2n-tmp``), fsync, rename:
an interrupt leaves either the old file or the new one. A rename makes a new inode, though, and
two things belong to the inode rather than to the name (vim's ``backupcopy=auto`` weighs the
same two):

* **hard links** — the other names of the file would keep the old text (a rewrite silently
  splits the file in two);
* **the owner** — a file of another user (or group) that we may write to would become ours.

The owner is copied onto the temp file first (``fchown``; root can always, a user can for the
group they are in). Where that fails, or where the file has hard links, the bytes are written
*through* the existing inode instead — deliberately trading the rename's atomicity for the
file's identity, with a safety copy: the old bytes go to ``.NAME.XXXXXXXX.c2n-backup`` (fsync)
before the file is overwritten, and the backup is removed once the new bytes are on disk. A
failed write (a full disk) puts the old bytes back. If the process is killed in between, the
backup stays, and a later write of that file refuses until a person has looked (the file may
be torn; the backup is the file as it was).

Temp files of a killed run are removed by later runs (``remove_stale_temps``): only names of
our own pattern, only when older than a minute, and only when no process holds them — a writer
keeps an exclusive ``flock`` on its temp file until the rename.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["StaleBackupError", "atomic_write", "remove_stale_temps"]

_TEMP_SUFFIX = ".c2n-tmp"
_BACKUP_SUFFIX = ".c2n-backup"
# tempfile.mkstemp's names: the prefix we give, 8 characters of its alphabet, our suffix.
_TEMP_RE = re.compile(r"^\..+\.[a-z0-9_]{8}\.c2n-tmp$")
# A temp file younger than this may belong to a run that is writing it right now.
_STALE_SECONDS = 60.0


class StaleBackupError(OSError):
    """A killed write-through left a backup of this file: it may be torn, a person must look."""


def atomic_write(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    mode_src = mode_from if mode_from is not None else path
    try:
        mode = stat.S_IMODE(os.stat(mode_src).st_mode)
    except FileNotFoundError:
        mode = 0o644
    if st is not None and st.st_nlink > 1:
        _write_through(path, data, st)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # Imported here: a check that writes nothing (the common case) skips tempfile's import.
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            _lock(fh.fileno())
            if st is not None and not _same_owner(fh.fileno(), st):
                # Not ours to give away: keep the inode (and so the owner) instead.
                fh.close()
                os.unlink(tmp)
                _write_through(path, data, st)
                return
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), mode)
            os.replace(tmp, path)  # while the lock is held: a cleaner never sees it unlocked
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _lock(fd: int) -> None:
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):
        pass  # no flock here (Windows, some network file systems): age alone decides staleness


def _same_owner(fd: int, st: os.stat_result) -> bool:
    """Give the temp file ``st``'s owner and group; False when that is not allowed."""
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (st.st_uid, st.st_gid):
        return True
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except (PermissionError, AttributeError):
        return False
    return True


def _write_through(path: Path, data: bytes, st: os.stat_result) -> None:
    """Overwrite ``path``'s own inode, keeping a backup of the old bytes until it is done."""
    import tempfile

    stale = sorted(p.name for p in path.parent.glob(f".{_glob_escape(path.name)}.*{_BACKUP_SUFFIX}"))
    if stale:
        raise StaleBackupError(
            f"an interrupted rewrite left {stale[0]} beside it (the file as it was before): compare the two, "
            "keep the right one and delete the backup"
        )
    with open(path, "r+b") as fh:
        old = fh.read()
        fd, backup = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_BACKUP_SUFFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as bh:
                bh.write(old)
                bh.flush()
                os.fsync(bh.fileno())
        except BaseException:
            os.unlink(backup)
            raise
        try:
            _overwrite(fh, data)
        except OSError:
            # A full disk, a quota: put the old bytes back (their blocks are still ours). If
            # that fails too, the backup stays: it is the file as it was.
            _overwrite(fh, old)
            os.unlink(backup)
            raise
    os.unlink(backup)


def _overwrite(fh: BinaryIO, data: bytes) -> None:
    """Make the open file's content ``data``, on disk before returning."""
    fh.seek(0)
    fh.write(data)
    fh.truncate()
    fh.flush()
    os.fsync(fh.fileno())


def _glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def remove_stale_temps(folder: Path, now: float | None = None) -> list[Path]:
    """Remove the ``.NAME.XXXXXXXX.c2n-tmp`` files a killed run left in ``folder``; the removed.

    Only regular files of exactly our pattern, older than a minute, that no process holds
    locked. Never a backup (``.c2n-backup``): that one may be the only good copy of a file.
    """
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.endswith(_TEMP_SUFFIX) or not _TEMP_RE.match(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < _STALE_SECONDS:
                continue
            if _held(entry.path):
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def _held(path: str) -> bool:
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
