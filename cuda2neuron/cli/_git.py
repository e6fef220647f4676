"""Git guards for in-place rewrites: there must be a way back (Cargo's `fix` policy)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["GitState", "git_state"]


class GitState:
    def __init__(self, outside: list[str], dirty: list[str]) -> None:
        self.outside = outside  # files not inside any git work tree
        self.dirty = dirty  # files with uncommitted changes (or untracked)


def _toplevel(folder: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # no git at all: nothing is under version control
        return None
    if out.returncode != 0:
        return None
    return Path(out.stdout.strip())


def git_state(files: Iterable[Path]) -> GitState:
    outside: list[str] = []
    dirty: list[str] = []
    by_repo: dict[Path, list[Path]] = {}
    for f in files:
        top = _toplevel(f.resolve().parent)
        if top is None:
            outside.append(str(f))
        else:
            by_repo.setdefault(top, []).append(f)
    for top, group in by_repo.items():
        rel = {str(f.resolve().relative_to(top.resolve())): f for f in group}
        out = subprocess.run(
            ["git", "-C", str(top), "status", "--porcelain", "-z", "--untracked-files=all", "--", *rel],
            capture_output=True,
            check=False,
        )
        entries = [e for e in out.stdout.decode("utf-8", "surrogateescape").split("\0") if e]
        changed = {e[3:] for e in entries if len(e) > 3}
        dirty += [str(f) for r, f in rel.items() if r in changed]
    return GitState(outside, dirty)
