"""Which two trees to compare: an explicit (original, port) pair, or a path in a git repository
after an in-place migrate, whose original is a git revision extracted to a temporary folder.

The user's work tree is never touched: the revision is read with `git archive`.

Files written after the migrate (the entry `validate` needs, in CUDA terms as docs/validate.md
asks, and anything else new) are in the work tree but not in the revision. They are new to
both sides: the original run gets them as written (copied into the extracted revision), the
port run gets their Python files migrated in memory with the project's own configuration (the
rules `migrate` ran), served from an overlay folder the port's worker imports them from; the
work tree keeps them as written. Before this, such an entry was "not found in
/tmp/cuda2neuron-validate-..." and nothing said that it had to be committed before the migrate.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Trees", "TreeError", "resolve_trees"]


class TreeError(Exception):
    """A bad tree argument; the message names the path and the problem."""


@dataclass(frozen=True)
class Trees:
    original: Path
    port: Path
    original_label: str
    port_label: str
    tempdir: tempfile.TemporaryDirectory | None = None
    # In-place only: files of the work tree the revision lacks (relative to ``port``), and the
    # folder holding the migrated text of their Python files at the same relative paths.
    new_files: tuple[str, ...] = ()
    port_overlay: Path | None = None
    # For people, printed before the runs start: what was done with the new files.
    notes: tuple[str, ...] = ()

    def cleanup(self) -> None:
        if self.tempdir is not None:
            self.tempdir.cleanup()


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)


def resolve_trees(paths: tuple[Path, ...], revision: str | None = None) -> Trees:
    if len(paths) == 2:
        original, port = (p.resolve() for p in paths)
        for p in (original, port):
            if not p.is_dir():
                raise TreeError(f"{p}: not a directory")
        if revision is not None:
            raise TreeError("--rev only applies to a single path inside a git repository")
        return Trees(original, port, str(original), str(port))
    if len(paths) != 1:
        raise TreeError("give ORIGINAL PORT (the migrate --out pair) or one PATH inside a git repository")
    port = paths[0].resolve()
    if not port.is_dir():
        raise TreeError(f"{port}: not a directory")
    rev = revision or "HEAD"
    top = _git(["rev-parse", "--show-toplevel"], port)
    if top.returncode != 0:
        raise TreeError(f"{port}: not inside a git repository; give the original tree as a second path "
                        "(cuda2neuron validate ORIGINAL PORT)")
    root = Path(top.stdout.decode().strip()).resolve()
    if _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], root).returncode != 0:
        raise TreeError(f"{root}: git revision {rev!r} not found")
    rel = port.relative_to(root)
    _refuse_same_tree(root, rel, rev, port)
    archive = _git(["archive", "--format=tar", rev, "--", str(rel) if str(rel) != "." else "."], root)
    if archive.returncode != 0:
        raise TreeError(f"{root}: git archive {rev} failed: {archive.stderr.decode(errors='replace').strip()}")
    tmp = tempfile.TemporaryDirectory(prefix="cuda2neuron-validate-")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(Path(tmp.name) / "original", filter="data")
    original = Path(tmp.name) / "original" / rel
    if not original.is_dir():
        tmp.cleanup()
        raise TreeError(f"{port}: does not exist at git revision {rev}")
    label = f"{rel} at {rev}"
    try:
        new = _new_files(root, rel, rev, port)
        if not new:
            return Trees(original, port, label, str(port), tmp)
        overlay = Path(tmp.name) / "port-overlay"
        notes = _carry_new_files(new, port, original, overlay, rev)
    except BaseException:
        tmp.cleanup()
        raise
    return Trees(original, port, label, str(port), tmp, new, overlay, notes)


def _new_files(root: Path, rel: Path, rev: str, port: Path) -> tuple[str, ...]:
    """Files under ``port`` in the work tree (tracked, or untracked and not ignored) that
    ``rev`` does not have, relative to ``port``."""
    spec = str(rel) if str(rel) != "." else "."
    listed = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", spec], root)
    at_rev = _git(["ls-tree", "-r", "-z", "--name-only", rev, "--", spec], root)
    if listed.returncode != 0 or at_rev.returncode != 0:
        return ()
    old = set(at_rev.stdout.decode(errors="surrogateescape").split("\0"))
    out = []
    for name in listed.stdout.decode(errors="surrogateescape").split("\0"):
        if name and name not in old and (root / name).is_file() and not (root / name).is_symlink():
            out.append((root / name).relative_to(port).as_posix())
    return tuple(sorted(set(out)))


def _carry_new_files(new: tuple[str, ...], port: Path, original: Path, overlay: Path, rev: str) -> tuple[str, ...]:
    """Copy ``new`` into ``original`` as written, write the migrated text of the Python ones
    into ``overlay``; returns the notes that say so. A file that cannot be migrated is a
    TreeError that says what to do."""
    from cuda2neuron.core import ConfigError, FileStatus, RunOptions, find_pyproject, load_config
    from cuda2neuron.kinds import kind_of, process_kind
    from cuda2neuron.workspace import discover, with_project_facts

    for name in new:
        (original / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(port / name, original / name)
    python = [n for n in new if kind_of(Path(n)) == "python"]
    edits: dict[str, int] = {}
    if python:
        try:
            config = load_config(find_pyproject(port))
        except ConfigError as exc:
            raise TreeError(str(exc)) from None
        found = discover([port], exclude=config.exclude, exclude_root=config.root)
        config = with_project_facts(config, found.files)
        options = RunOptions.from_config(config, fix=True)
        for name in python:
            path = port / name
            result = process_kind("python", str(path), path.read_bytes(), config, options)
            if result.status is FileStatus.FAILED:
                assert result.error is not None
                where = f"{path}:{result.error.line}" if result.error.line else str(path)
                raise TreeError(
                    f"{where}: not at git revision {rev}, so validate migrates it for the port run, and that failed "
                    f"({result.error.kind}: {result.error.message}). Fix the file, or commit it before migrating "
                    f"and give that commit with --rev.")
            target = overlay / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(result.new_bytes if result.new_bytes is not None else path.read_bytes())
            edits[name] = sum(1 for f in result.findings if f.applied)
    shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
    notes = [f"not at git revision {rev}: {shown}; the original run uses the work tree's copy as written"]
    if python:
        migrated = ", ".join(f"{n} ({edits[n]} edit{'' if edits[n] == 1 else 's'})" for n in python[:5])
        notes.append(f"the port run uses {'it' if len(python) == 1 else 'them'} migrated in memory with the "
                     f"project's rules: {migrated}; the files on disk are unchanged")
    return tuple(notes)


def _refuse_same_tree(root: Path, rel: Path, rev: str, port: Path) -> None:
    """Refuse a port that is its own original: the port was committed, so `rev` (HEAD by
    default) already holds migrated code, which would run as the "original" on the CUDA shim
    (and fail there with "Unknown backend type neuron")."""
    spec = str(rel) if str(rel) != "." else "."
    # Files the work tree adds (untracked, or added after rev) are new to both runs
    # (_carry_new_files): only a changed or removed file makes the work tree a port of rev.
    if _git(["diff", "--quiet", "--diff-filter=a", rev, "--", spec], root).returncode != 0:
        return  # the work tree differs from rev (or git cannot tell): a real pair
    last = _git(["log", "-1", "--format=%h %s", rev, "--", spec], root).stdout.decode(errors="replace").strip()
    hint = ""
    if last:
        sha, _, subject = last.partition(" ")
        hint = (f" The last commit that changed it is {sha} ({subject!r}); if that commit is the port, "
                f"run: cuda2neuron validate {port} --rev {sha}~1")
    raise TreeError(f"{port}: identical to git revision {rev} (apart from files it adds, which both runs get), so the "
                    f"original and the port would be the same code "
                    f"(a committed port would run as the original and fail on the CUDA shim with \"Unknown backend "
                    f"type neuron\"). Give the commit before the port with --rev <pre-port commit>.{hint}")
