"""Which two trees to compare: an explicit (original, port) pair, or a path in a git repository
after an in-place migrate, whose original is a git revision extracted to a temporary folder.

The user's work tree is never touched: the revision is read with `git archive`.
"""

from __future__ import annotations

import io
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
        tar.extractall(tmp.name, filter="data")
    original = Path(tmp.name) / rel
    if not original.is_dir():
        tmp.cleanup()
        raise TreeError(f"{port}: does not exist at git revision {rev}")
    return Trees(original, port, f"{rel} at {rev}", str(port), tmp)


def _refuse_same_tree(root: Path, rel: Path, rev: str, port: Path) -> None:
    """Refuse a port that is its own original: the port was committed, so `rev` (HEAD by
    default) already holds migrated code, which would run as the "original" on the CUDA shim
    (and fail there with "Unknown backend type neuron")."""
    spec = str(rel) if str(rel) != "." else "."
    if _git(["diff", "--quiet", rev, "--", spec], root).returncode != 0:
        return  # the work tree differs from rev (or git cannot tell): a real pair
    untracked = _git(["ls-files", "--others", "--exclude-standard", "--", spec], root)
    if untracked.returncode != 0 or untracked.stdout.strip():
        return
    last = _git(["log", "-1", "--format=%h %s", rev, "--", spec], root).stdout.decode(errors="replace").strip()
    hint = ""
    if last:
        sha, _, subject = last.partition(" ")
        hint = (f" The last commit that changed it is {sha} ({subject!r}); if that commit is the port, "
                f"run: cuda2neuron validate {port} --rev {sha}~1")
    raise TreeError(f"{port}: identical to git revision {rev}, so the original and the port would be the same code "
                    f"(a committed port would run as the original and fail on the CUDA shim with \"Unknown backend "
                    f"type neuron\"). Give the commit before the port with --rev <pre-port commit>.{hint}")
