"""A baseline: the findings a project accepted when it adopted cuda2neuron (`check --baseline`).

A large repository cannot fix every finding in the commit that adds the pre-commit hook. The
baseline lists the findings of that commit; later checks report only findings that are not in
it, so new CUDA-isms fail while the old ones are worked off.

A finding is known by where it is and what it says, not by its line number: the file (relative
to the baseline's folder, so the baseline means the same from any working folder), the rule
code and the text of the line it starts on, whitespace-normalised. Lines added or removed above
it do not change that; editing the line itself does (then it is new, which is right: somebody
touched CUDA-specific code). Identical lines with the same finding are counted, so a second
copy of a known line is still new.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cuda2neuron.core import FileResult, Finding, atomic_write

__all__ = ["BASELINE_VERSION", "Baseline", "BaselineError", "apply_baseline", "fingerprint", "write_baseline"]

BASELINE_VERSION = 1


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file: a FIFO would block the run forever."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError("not a regular file")
        return fh.read()


class BaselineError(ValueError):
    """The baseline file is missing, unreadable or not a baseline (the message names it)."""


@dataclass(frozen=True)
class Baseline:
    path: Path
    # (file relative to the baseline's folder, code, line fingerprint) -> how many are known
    known: tuple[tuple[tuple[str, str, str], int], ...]

    @classmethod
    def load(cls, path: Path) -> Baseline:
        try:
            data = json.loads(_read_regular(path).decode("utf-8"))
        except RecursionError:
            raise BaselineError(f"{path}: not a cuda2neuron baseline (JSON nested too deeply)") from None
        except FileNotFoundError:
            raise BaselineError(f"{path}: baseline file does not exist (write one with --write-baseline)") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineError(f"{path}: cannot read: {exc}") from None
        except json.JSONDecodeError as exc:
            raise BaselineError(f"{path}: not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("tool") != "cuda2neuron" or "findings" not in data:
            raise BaselineError(f"{path}: not a cuda2neuron baseline (write one with --write-baseline)")
        if data.get("version") != BASELINE_VERSION:
            raise BaselineError(f"{path}: baseline version {data.get('version')!r}, expected {BASELINE_VERSION}")
        counts: Counter[tuple[str, str, str]] = Counter()
        for i, entry in enumerate(data["findings"]):
            try:
                counts[(entry["path"], entry["code"], entry["fingerprint"])] += int(entry.get("count", 1))
            except (KeyError, TypeError, ValueError):
                raise BaselineError(f"{path}: entry {i} lacks path, code or fingerprint") from None
        return cls(path, tuple(sorted(counts.items())))


def _line_of(finding: Finding, lines: Sequence[bytes]) -> bytes:
    i = finding.span.start_line - 1
    return lines[i] if 0 <= i < len(lines) else b""


def fingerprint(finding: Finding, lines: Sequence[bytes]) -> str:
    """The finding's code and its line's text, whitespace-normalised, hashed."""
    text = b" ".join(_line_of(finding, lines).split())
    return hashlib.sha256(finding.code.encode() + b"\0" + text).hexdigest()[:16]


def _relative(path: str, folder: Path) -> str:
    full = os.path.abspath(path)
    try:
        return Path(full).relative_to(folder.resolve()).as_posix()
    except ValueError:
        return Path(full).as_posix()


def _lines(result: FileResult) -> list[bytes]:
    # With --fix the remaining findings refer to the rewritten text.
    data = result.new_bytes
    if data is None:
        try:
            data = Path(result.path).read_bytes()
        except OSError:
            data = b""
    return data.splitlines()


def _keys(results: Sequence[FileResult], folder: Path):
    """(result index, finding index, finding, key) of every finding not applied."""
    for i, r in enumerate(results):
        if all(f.applied for f in r.findings):
            continue
        lines = _lines(r)
        rel = _relative(r.path, folder)
        for j, f in enumerate(r.findings):
            if not f.applied:
                yield i, j, f, (rel, f.code, fingerprint(f, lines))


def write_baseline(results: Sequence[FileResult], path: Path) -> int:
    """Write every finding not applied in ``results`` as the baseline at ``path``; their number."""
    counts: Counter[tuple[str, str, str]] = Counter()
    lines_of: dict[tuple[str, str, str], tuple[int, str]] = {}
    for _i, _j, f, key in _keys(results, path.parent):
        counts[key] += 1
        lines_of.setdefault(key, (f.span.start_line, f.message))
    findings = [
        # line and message are for the people reading the file in review; matching ignores them
        {"path": k[0], "code": k[1], "fingerprint": k[2], "count": n, "line": lines_of[k][0], "message": lines_of[k][1]}
        for k, n in sorted(counts.items(), key=lambda kv: (kv[0][0], lines_of[kv[0]][0], kv[0][1]))
    ]
    data = {"tool": "cuda2neuron", "version": BASELINE_VERSION, "findings": findings}
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
    return sum(counts.values())


def apply_baseline(results: Sequence[FileResult], baseline: Baseline) -> tuple[list[FileResult], int]:
    """``results`` without the findings the baseline knows, and how many were left out."""
    budget = Counter(dict(baseline.known))
    dropped: dict[int, set[int]] = {}
    n = 0
    for i, j, _f, key in _keys(results, baseline.path.parent):
        if budget[key] > 0:
            budget[key] -= 1
            dropped.setdefault(i, set()).add(j)
            n += 1
    out = [
        replace(r, findings=tuple(f for j, f in enumerate(r.findings) if j not in dropped[i])) if i in dropped else r
        for i, r in enumerate(results)
    ]
    return out, n
