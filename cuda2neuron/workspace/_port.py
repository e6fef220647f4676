"""`migrate --out DIR`: a migrated copy of a tree that never costs the user a file.

The rules, in the order they are checked:

* DIR is a folder, never a file and never a symlink (writing through a link would write
  somewhere the user did not name); no source lies inside DIR, and DIR is not a source — a copy
  must not overwrite what it copies. All of this is refused before anything is read or written.
* A DIR that does not exist, or is empty, is written fresh. A DIR that holds files must be a port
  this tool wrote, unchanged since: its marker (``.cuda2neuron-port.json``) records the hash of
  every file and link it wrote, and every one must still match, with nothing added. Otherwise
  it is refused with the paths that differ — hand edits in a port are the user's work. Python's
  ``__pycache__`` folders are neither copied nor counted (Python writes them when the port runs).
* The copy is complete with its marker, or it is not there:
  - a DIR that does not exist is built in a hidden sibling (``.DIR.XXXXXXXX.c2n-tmp``) and
    renamed into place at the end; any failure (a full or read-only disk, an unreadable file)
    removes the sibling, so nothing is left;
  - an existing DIR (empty, or a port being updated) is written in two phases: first every new
    file is staged inside DIR (``.c2n-staging.XXXXXXXX.c2n-tmp``) — a failure here removes the
    staging folder and leaves DIR exactly as it was — then the marker is rewritten in the
    *writing* state (each file may hold its old or its new bytes), the staged files are renamed
    into place, files the new copy no longer has are removed (they were verified as ours), and
    the marker is written *complete*. A run killed during the second phase leaves a marker that
    the next run accepts (and completes); it never leaves files the marker does not know.
* Only regular files, folders and symlinks (kept as links) are copied. Anything else in the
  tree — a FIFO, a socket, a device — is skipped and reported: opening a FIFO to copy it blocks
  forever.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda2neuron.core import FileResult, FileStatus, atomic_write

from ._discover import PORT_MARKER, SkippedPath, SourceFile

__all__ = ["PortError", "PortState", "check_out_dir", "write_port"]

_VERSION = 2
_VCS_DIRS = frozenset({".git", ".hg", ".svn"})
_PYCACHE = "__pycache__"
_STAGING_PREFIX = ".c2n-staging."
_TMP_SUFFIX = ".c2n-tmp"
_CHUNK = 1 << 20


class PortError(Exception):
    """The copy cannot be made (or kept): one line naming the path and the problem."""


@dataclass(frozen=True)
class PortState:
    """What DIR holds before this run: nothing (``exists`` False), nothing yet, or our port."""

    out_dir: Path
    exists: bool
    # The marker's record of a port written earlier: relative path -> "sha256:..." / "link:...",
    # and the folders it made.
    files: dict[str, str] = field(default_factory=dict)
    dirs: tuple[str, ...] = ()


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _hash_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_out_dir(out_dir: Path, sources: Sequence[Path]) -> PortState:
    """Refuse an --out folder that could cost the user data; what it holds when accepted."""
    if out_dir.is_symlink():
        raise PortError(f"{out_dir}: --out is a symlink; name the folder itself (a port is never written through a link)")
    if out_dir.exists() and not out_dir.is_dir():
        raise PortError(f"{out_dir}: --out must be a folder, and this is a file")
    out_abs = out_dir.resolve()
    for source in sources:
        src = source.resolve()
        if _inside(src, out_abs):
            what = "is the --out folder" if src == out_abs else f"lies inside the --out folder {out_dir}"
            raise PortError(f"{source}: this source {what}; a copy must not overwrite what it copies — choose another --out")
    if not out_dir.exists():
        return PortState(out_dir, exists=False)
    try:
        entries = [e for e in os.listdir(out_dir) if not _is_staging(e)]
    except OSError as exc:
        raise PortError(f"{out_dir}: cannot read the --out folder: {exc.strerror}") from None
    if not entries:
        return PortState(out_dir, exists=True)
    marker = out_dir / PORT_MARKER
    if not marker.is_file() or marker.is_symlink():
        raise PortError(f"{out_dir}: --out folder exists, is not empty and was not written by `migrate --out`")
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or record.get("version") != _VERSION:
            raise ValueError
        files, dirs, pending = _record_entries(record)
    except (OSError, ValueError, TypeError, UnicodeDecodeError):
        raise PortError(
            f"{marker}: does not record which files `migrate --out` wrote (empty, garbled, an older cuda2neuron, "
            "or edited), so nothing in it can be replaced safely: remove the folder yourself or choose another --out"
        ) from None
    _confined(out_dir, marker, files, pending, dirs)
    differ = _differences(out_dir, files, pending)
    if differ:
        listed = ", ".join(differ[:8]) + (f" and {len(differ) - 8} more" if len(differ) > 8 else "")
        raise PortError(
            f"{out_dir}: the port changed since `migrate --out` wrote it ({listed}); it is left as it is — keep your "
            "edits, and write the new copy to another --out folder (or remove this one yourself)"
        )
    # After an interrupted update a file may hold its old or its new bytes: record what it holds.
    current = {rel: _entry_hash(out_dir / rel) for rel in {*files, *pending}}
    return PortState(out_dir, exists=True, files={r: h for r, h in current.items() if h is not None}, dirs=dirs)


def _record_entries(record: dict) -> tuple[dict[str, str], tuple[str, ...], dict[str, list[str]]]:
    files = record["files"]
    dirs = record.get("dirs", [])
    pending = record.get("pending", {})
    if record.get("state") not in ("complete", "writing"):
        raise ValueError
    if not (isinstance(files, dict) and isinstance(dirs, list) and isinstance(pending, dict)):
        raise ValueError
    for rel, value in files.items():
        _safe_rel(rel)
        if not isinstance(value, str):
            raise ValueError
    for rel, values in pending.items():
        _safe_rel(rel)
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError
    for rel in dirs:
        _safe_rel(rel)
    return dict(files), tuple(dirs), {k: list(v) for k, v in pending.items()}


def _confined(out_dir: Path, marker: Path, files: dict[str, str], pending: dict[str, list[str]],
              dirs: tuple[str, ...]) -> None:
    """Refuse a marker that names anything outside ``out_dir`` once symlinks are resolved.

    ``_safe_rel`` keeps the names below the folder as text; a folder on the way may still be a
    symlink out of it. A forged marker in state *writing* with a pending "absent" entry under
    such a link (``link/victim``, ``link`` recorded as the port's own link) had the update delete
    a file outside DIR, exit 0. The marker is trusted only for paths whose every folder below
    DIR is a real folder of DIR."""
    for rel in sorted({*files, *pending}) + [f"{d}/." for d in dirs]:
        here = out_dir
        for part in rel.split("/")[:-1]:
            here = here / part
            try:
                st = here.lstat()
            except OSError:
                break  # not there (yet): nothing to follow
            if stat.S_ISLNK(st.st_mode):
                name = rel.removesuffix("/.")
                raise PortError(
                    f"{marker}: names {name}, reached through the symlink {here} (to {os.readlink(here)}): a marker "
                    f"is trusted only for paths inside {out_dir}; refused, nothing was written"
                )
            if not stat.S_ISDIR(st.st_mode):
                break


def _safe_rel(rel: object) -> None:
    """A marker names paths below its folder only: an edited marker must not reach elsewhere."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
        raise ValueError
    if any(part in ("", ".", "..") for part in rel.split("/")):
        raise ValueError


def _entry_hash(path: Path) -> str | None:
    """What the marker would record for ``path``; None when it is absent."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISREG(st.st_mode):
        return _hash_file(path)
    return "other"


def _differences(out_dir: Path, files: dict[str, str], pending: dict[str, list[str]]) -> list[str]:
    differ: list[str] = []
    present = _walk_port(out_dir)
    for rel in sorted(set(files) | set(pending)):
        allowed = set(pending.get(rel, ()))
        if rel in files:
            allowed.add(files[rel])
        have = _entry_hash(out_dir / rel) if rel in present else None
        if have is None:
            if "absent" not in allowed:
                differ.append(f"{rel} deleted")
        elif have not in allowed:
            differ.append(f"{rel} changed")
    differ += [f"{rel} added" for rel in sorted(present - set(files) - set(pending))]
    return differ


def _is_staging(name: str) -> bool:
    return name.startswith(_STAGING_PREFIX) and name.endswith(_TMP_SUFFIX)


def _walk_port(out_dir: Path) -> set[str]:
    """Every file, link and special file below ``out_dir`` (relative, with /), but the marker,
    Python's caches and our own staging folders."""
    found: set[str] = set()
    stack = [out_dir]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if folder == out_dir and (entry.name == PORT_MARKER or _is_staging(entry.name)
                                      or (entry.name.startswith(f".{PORT_MARKER}.") and _is_tmp(entry.name))):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name == _PYCACHE:
                    continue
                stack.append(Path(entry.path))
                continue
            found.add(Path(entry.path).relative_to(out_dir).as_posix())
    return found


@dataclass
class _Plan:
    """What the new copy holds: relative path -> (source file or None, new bytes or None, link)."""

    files: dict[str, tuple[Path | None, bytes | None]] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)


def _plan(results: Sequence[FileResult], files: Sequence[SourceFile], out_dir: Path, avoid: set[Path]) -> _Plan:
    roots = list(dict.fromkeys(f.root.resolve() for f in files))
    single = len(roots) == 1
    names = [r.name for r in roots]
    if not single and len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise PortError(f"{out_dir}: two sources are both named {dup!r}; their copies would overwrite each other")
    plan = _Plan()
    for root in roots:
        base = "" if single else root.name + "/"
        if base:
            plan.dirs.append(base.rstrip("/"))
        _plan_tree(root, base, avoid, plan)
    new_bytes = {}
    for r in results:
        if r.status is FileStatus.CHANGED and r.new_bytes is not None:
            new_bytes[str(Path(r.path).resolve())] = r.new_bytes
    for rel, (src, _none) in list(plan.files.items()):
        if src is not None and str(src) in new_bytes:
            plan.files[rel] = (src, new_bytes[str(src)])
    return plan


def _plan_tree(root: Path, base: str, avoid: set[Path], plan: _Plan) -> None:
    stack = [(root, base)]
    while stack:
        folder, rel_folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise PortError(f"{folder}: cannot read the folder to copy it: {exc.strerror}") from None
        for entry in entries:
            path = Path(entry.path)
            rel = rel_folder + entry.name
            if entry.is_symlink():
                plan.links[rel] = os.readlink(path)
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name in _VCS_DIRS or entry.name == _PYCACHE or path.resolve() in avoid or _is_tmp(entry.name):
                    continue
                plan.dirs.append(rel)
                stack.append((path, rel + "/"))
                continue
            if entry.is_file(follow_symlinks=False):
                if _is_tmp(entry.name):
                    continue  # another writer's temp file (or a stale one): not the user's source
                plan.files[rel] = (path.resolve(), None)
                continue
            kind = _special_kind(entry)
            plan.skipped.append(SkippedPath(str(path), f"{kind}: not copied (only files, folders and symlinks are)"))


def _is_tmp(name: str) -> bool:
    return name.endswith(_TMP_SUFFIX) and name.startswith(".")


def _special_kind(entry: os.DirEntry) -> str:
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return "unreadable entry"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def write_port(
    results: Sequence[FileResult],
    files: Sequence[SourceFile],
    state: PortState,
    sources: Sequence[Path],
    target: str,
) -> list[SkippedPath]:
    """Write the copy (see the module's rules); the paths skipped. Raises PortError."""
    out_dir = state.out_dir
    _remove_stale_builds(out_dir)
    # Checked again: the run took a while, and the port may have been edited meanwhile.
    state = check_out_dir(out_dir, sources)
    if not state.exists:
        return _write_fresh(results, files, state, sources, target)
    try:
        stage = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, suffix=_TMP_SUFFIX, dir=out_dir))
    except OSError as exc:
        raise PortError(f"{out_dir}: cannot write into the --out folder: {exc.strerror}; nothing was written") from None
    lock = _lock_dir(stage)
    try:
        plan = _plan(results, files, out_dir, {out_dir.resolve(), stage.resolve()})
        return _update(plan, state, stage, sources, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _unlock(lock)


def _lock_dir(folder: Path) -> int | None:
    """An exclusive flock on ``folder`` while we build in it: a later run's cleanup leaves it be."""
    try:
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def _remove_stale_builds(out_dir: Path) -> None:
    """Remove what a killed `migrate --out` left: its hidden sibling being built, its staging
    folders in DIR. Only our own names, only older than a minute, only when unlocked."""
    import time

    now = time.time()
    candidates: list[Path] = []
    for folder, test in ((out_dir.parent, lambda n: n.startswith(f".{out_dir.name}.") and n.endswith(_TMP_SUFFIX)),
                         (out_dir, _is_staging)):
        try:
            candidates += [folder / n for n in os.listdir(folder) if test(n)]
        except OSError:
            continue
    for path in candidates:
        try:
            st = path.lstat()
            if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < 60:
                continue
            import fcntl

            fd = os.open(path, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live run holds it
            finally:
                os.close(fd)
            shutil.rmtree(path)
        except (OSError, ImportError):
            continue


def _write_fresh(results, files, state: PortState, sources, target) -> list[SkippedPath]:
    out_dir = state.out_dir
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=_TMP_SUFFIX, dir=parent))
    except OSError as exc:
        raise PortError(f"{out_dir}: cannot create the --out folder: {exc.strerror}; nothing was written") from None
    lock = _lock_dir(building)
    try:
        plan = _plan(results, files, out_dir, {out_dir.resolve(), building.resolve()})
        record: dict[str, str] = {}
        for rel in plan.dirs:
            (building / rel).mkdir(parents=True, exist_ok=True)
        for rel, (src, data) in plan.files.items():
            record[rel] = _named(out_dir / rel, _put, building / rel, src, data)
        for rel, link in plan.links.items():
            dest = building / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(link, dest)
            record[rel] = "link:" + link
        _write_marker(building, "complete", sources, target, record, plan.dirs)
        os.chmod(building, 0o777 & ~_umask())
        os.rename(building, out_dir)
    except PortError:
        shutil.rmtree(building, ignore_errors=True)
        raise
    except OSError as exc:
        shutil.rmtree(building, ignore_errors=True)
        where = exc.filename or out_dir
        raise PortError(f"{where}: cannot write the migrated copy: {exc.strerror or exc}; nothing was written to {out_dir}") from None
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        _unlock(lock)
    return plan.skipped


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _put(dest: Path, src: Path | None, data: bytes | None) -> str:
    """Write one file of the copy at ``dest`` (a new name): the hash the marker records."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        with open(dest, "xb") as fh:
            fh.write(data)
        if src is not None:
            shutil.copymode(src, dest)
        return _hash_bytes(data)
    assert src is not None
    h = hashlib.sha256()
    with open(src, "rb") as fin, open(dest, "xb") as fout:
        while chunk := fin.read(_CHUNK):
            h.update(chunk)
            fout.write(chunk)
    shutil.copystat(src, dest)
    return "sha256:" + h.hexdigest()


def _named(shown: Path, fn, *args):  # noqa: ANN001, ANN202
    """``fn(*args)``, an OSError about a file we write named by its place in the port (not by
    the hidden folder it is staged in); one about the source file keeps the source's name."""
    try:
        return fn(*args)
    except OSError as exc:
        if exc.filename is not None and str(exc.filename) == str(args[0]):
            raise OSError(exc.errno, exc.strerror, str(shown)) from None
        raise


def _write_marker(folder: Path, state: str, sources, target: str, files: dict[str, str], dirs,
                  pending: dict[str, list[str]] | None = None) -> None:
    record = {
        "version": _VERSION,
        "state": state,
        "source": [str(p.resolve()) for p in sources],
        "target": target,
        "files": dict(sorted(files.items())),
        "dirs": sorted(set(dirs)),
    }
    if pending:
        record["pending"] = dict(sorted(pending.items()))
    atomic_write(folder / PORT_MARKER, (json.dumps(record, indent=1) + "\n").encode())


def _update(plan: _Plan, state: PortState, stage: Path, sources, target) -> list[SkippedPath]:
    out_dir = state.out_dir
    old = state.files
    # Phase 1: stage every file whose bytes change; DIR itself is not touched yet.
    staged: dict[str, Path] = {}
    new: dict[str, str] = {}
    try:
        for i, (rel, (src, data)) in enumerate(plan.files.items()):
            tmp = stage / str(i)
            new[rel] = _named(out_dir / rel, _put, tmp, src, data)
            if old.get(rel) == new[rel] and (out_dir / rel).is_file() and not (out_dir / rel).is_symlink():
                tmp.unlink()
                continue
            staged[rel] = tmp
    except OSError as exc:
        where = exc.filename or out_dir
        raise PortError(f"{where}: cannot write the migrated copy: {exc.strerror or exc}; {out_dir} was left as it was") from None
    for rel, link in plan.links.items():
        new[rel] = "link:" + link
    # Phase 2: the marker says "writing" (old or new bytes), then the files move into place.
    pending = {rel: [h for h in (old.get(rel), new.get(rel)) if h] or ["absent"] for rel in {*old, *new}}
    for rel, hashes in pending.items():
        if rel not in old or rel not in new:
            hashes.append("absent")
    try:
        _write_marker(out_dir, "writing", sources, target, {}, [*state.dirs, *plan.dirs], pending)
        for rel in sorted(set(old) - set(new), reverse=True):
            _remove(out_dir / rel)
        for rel in plan.dirs:
            dest = out_dir / rel
            if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
                _remove(dest)  # a file of the old copy where the new one has a folder
            dest.mkdir(parents=True, exist_ok=True)
        for rel, tmp in staged.items():
            dest = out_dir / rel
            if dest.is_symlink() or dest.is_dir():
                _remove(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, dest)
        for rel, link in plan.links.items():
            dest = out_dir / rel
            if old.get(rel) == "link:" + link and dest.is_symlink():
                continue
            if dest.is_symlink() or dest.exists():
                _remove(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(link, dest)
        kept_dirs = set(plan.dirs)
        for rel in sorted(set(state.dirs) - kept_dirs, key=lambda r: r.count("/"), reverse=True):
            try:
                (out_dir / rel).rmdir()  # only when empty: what is left in it is not ours
            except OSError:
                kept_dirs.add(rel)
        _write_marker(out_dir, "complete", sources, target, new, kept_dirs)
    except OSError as exc:
        where = exc.filename or out_dir
        raise PortError(
            f"{where}: cannot finish updating the migrated copy: {exc.strerror or exc}; {out_dir} is marked "
            "incomplete — run the same command again once this is fixed"
        ) from None
    return plan.skipped


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    else:
        try:
            path.rmdir()
        except OSError:
            pass
