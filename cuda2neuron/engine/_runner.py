"""Process many files, in parallel when asked; each worker returns typed results only."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ._config import Config
from ._model import FileError, FileResult, FileStatus
from ._process import process_bytes

__all__ = ["process_file", "process_files"]

# Below this many files a process pool costs more than it saves (start-up + catalog import).
_PARALLEL_THRESHOLD = 16


def process_file(path: Path, config: Config, fix: bool) -> FileResult:
    shown = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return FileResult(shown, FileStatus.FAILED, error=FileError("io", f"cannot read: {exc.strerror}"))
    return process_bytes(shown, data, config, fix)


def _worker(args: tuple[Path, Config, bool]) -> FileResult:
    return process_file(*args)


def process_files(
    files: Sequence[Path],
    config: Config,
    fix: bool,
    jobs: int | None = None,
    progress: Callable[[FileResult], None] | None = None,
) -> list[FileResult]:
    jobs = jobs or os.cpu_count() or 1
    results: list[FileResult] = []
    if jobs <= 1 or len(files) < _PARALLEL_THRESHOLD:
        for path in files:
            result = process_file(path, config, fix)
            results.append(result)
            if progress:
                progress(result)
        return results
    # Imported here: a one-file run (pre-commit, editors) never starts a pool.
    from concurrent.futures import ProcessPoolExecutor

    chunk = max(1, min(64, len(files) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(_worker, [(p, config, fix) for p in files], chunksize=chunk):
            results.append(result)
            if progress:
                progress(result)
    return results
