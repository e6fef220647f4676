"""One file's processing turned into a typed result: nothing here raises for a bad file."""

from __future__ import annotations

import traceback
from collections.abc import Callable

from cuda2neuron.core import Config, ConvergenceError, FileError, FileResult, FileStatus, Finding, RunOptions, SourceError

__all__ = ["Body", "guarded"]

# A kind's processing: (shown path, bytes, config, options) -> (new bytes or None, findings).
Body = Callable[[str, bytes, Config, RunOptions], tuple[bytes | None, list[Finding]]]


def guarded(path: str, data: bytes, config: Config, options: RunOptions, body: Body) -> FileResult:
    """Run ``body`` turning every failure into a typed per-file error."""
    try:
        new, findings = body(path, data, config, options)
    except SourceError as exc:
        return FileResult(path, FileStatus.FAILED, error=FileError(exc.kind, exc.message, exc.line, exc.col))
    except ConvergenceError as exc:
        return FileResult(path, FileStatus.FAILED, error=FileError("convergence", str(exc)))
    except RecursionError:
        # What CPython accepts but nests past Python's recursion limit in libcst's tree walk (a
        # one-line `a and b and ...` of 30,000 terms): the input's depth, not a bug of ours.
        return FileResult(path, FileStatus.FAILED, error=FileError("nesting", "source nests too deeply for the parser"))
    except MemoryError:
        return FileResult(path, FileStatus.FAILED, error=FileError("too-large", "skipped: too large: ran out of memory"))
    except Exception as exc:  # a rule bug must cost one file, not the run
        return FileResult(
            path,
            FileStatus.FAILED,
            error=FileError("internal", f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()),
        )
    ordered = tuple(sorted(findings, key=lambda f: (not f.applied, f.span, f.code)))
    if new is None:
        return FileResult(path, FileStatus.UNCHANGED, findings=ordered)
    return FileResult(path, FileStatus.CHANGED, findings=ordered, new_bytes=new, old_bytes=data)
