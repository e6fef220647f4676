"""Git guards for in-place rewrites: there must be a way back (Cargo's `fix` policy).

The guard fails closed. A file counts as clean only when git positively says so: it is
tracked, has no change in the index or the work tree, and git is not told to look away from it
(``--skip-worktree``, ``--assume-unchanged``: git status never reports changes in such a file,
so "clean" would be a guess). Any error of git — a corrupt index, a repository git refuses to
read ("dubious ownership"), a missing object — means "cannot tell", and the file is refused
with git's own message; only "not a git repository" means the file is outside version
control. git runs with ``LC_ALL=C`` so that its messages can be read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["GitState", "git_state"]


class GitState:
    def __init__(self, outside: list[str], dirty: list[str], unknown: list[tuple[str, str]] | None = None) -> None:
        self.outside = outside  # files not inside any git work tree
        self.dirty = dirty  # files with uncommitted changes, untracked, or hidden from git status
        self.unknown = unknown or []  # (file, git's message): git failed, so nobody can tell


def _git(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "LC_ALL": "C", "LANGUAGE": "C", "GIT_OPTIONAL_LOCKS": "0"}
    # core.fsmonitor names a program git runs on `status`: a repository's own config (a cloned
    # project's, or one a hostile tree planted) must not make the guard run it.
    return subprocess.run(["git", "-c", "core.fsmonitor=false", *args], capture_output=True, check=False, env=env)


def _message(out: subprocess.CompletedProcess[bytes]) -> str:
    text = out.stderr.decode("utf-8", "replace").strip() or out.stdout.decode("utf-8", "replace").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else f"git exited with status {out.returncode}")[:300]


def _toplevel(folder: Path) -> tuple[Path | None, str | None]:
    """(work tree root, None), (None, None) outside git, or (None, git's error)."""
    try:
        out = _git(["-C", str(folder), "rev-parse", "--show-toplevel"])
    except FileNotFoundError:  # no git at all: nothing is under version control
        return None, None
    except OSError as exc:
        return None, f"cannot run git: {exc.strerror or exc}"
    if out.returncode != 0:
        message = _message(out)
        if "not a git repository" in message:
            return None, None
        return None, message
    return Path(os.fsdecode(out.stdout.strip())), None


def git_state(files: Iterable[Path]) -> GitState:
    outside: list[str] = []
    dirty: list[str] = []
    unknown: list[tuple[str, str]] = []
    by_repo: dict[Path, list[Path]] = {}
    tops: dict[Path, tuple[Path | None, str | None]] = {}
    for f in files:
        folder = f.resolve().parent
        if folder not in tops:
            tops[folder] = _toplevel(folder)
        top, error = tops[folder]
        if error is not None:
            unknown.append((str(f), error))
        elif top is None:
            outside.append(str(f))
        else:
            by_repo.setdefault(top, []).append(f)
    for top, group in by_repo.items():
        rel = {os.fsdecode(f.resolve().relative_to(top.resolve())): f for f in group}
        problems = _repo_problems(top, list(rel))
        if isinstance(problems, str):
            unknown += [(str(f), problems) for f in group]
            continue
        dirty += [str(f) for r, f in rel.items() if r in problems]
    return GitState(outside, dirty, unknown)


def _repo_problems(top: Path, rels: list[str]) -> set[str] | str:
    """The files of ``rels`` that are not clean and tracked, or git's message when it failed."""
    try:
        status = _git(["-C", str(top), "status", "--porcelain", "-z", "--untracked-files=all", "--ignored=matching",
                       "--", *rels])
        listed = _git(["-C", str(top), "ls-files", "-v", "-z", "--", *rels])
    except OSError as exc:
        return f"cannot run git: {exc.strerror or exc}"
    for out in (status, listed):
        if out.returncode != 0:
            return _message(out)
    problems: set[str] = set()
    entries = [e for e in os.fsdecode(status.stdout).split("\0") if e]
    skip_next = False
    for e in entries:
        if skip_next:  # the source path of a rename
            skip_next = False
            continue
        if len(e) > 3:
            problems.add(e[3:])
            skip_next = e[0] in "RC"
    tracked: set[str] = set()
    for e in (e for e in os.fsdecode(listed.stdout).split("\0") if e):
        tag, name = e[:1], e[2:]
        tracked.add(name)
        # Lower case: assume-unchanged; S: skip-worktree; M: unmerged. git status cannot see a
        # change in the first two, and the third is a conflict in progress.
        if tag.islower() or tag in ("S", "M"):
            problems.add(name)
    problems.update(r for r in rels if r not in tracked)  # untracked, or ignored and given by name
    return problems
