"""Process many files, in parallel when asked; each worker returns typed results only."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from cuda2neuron.core import Config, FileError, FileResult, FileStatus, RunOptions
from cuda2neuron.kinds import process_kind

from ._discover import SourceFile

__all__ = ["process_file", "process_files"]

# Below this many files a process pool costs more than it saves (start-up + catalog import).
_PARALLEL_THRESHOLD = 16


def process_file(source: SourceFile, config: Config, options: RunOptions) -> FileResult:
    shown = str(source.path)
    try:
        data = source.path.read_bytes()
    except OSError as exc:
        return FileResult(shown, FileStatus.FAILED, error=FileError("io", f"cannot read: {exc.strerror}"))
    return process_kind(source.kind, shown, data, config, options)


def _worker(args: tuple[SourceFile, Config, RunOptions]) -> FileResult:
    return process_file(*args)


def process_files(
    files: Sequence[SourceFile],
    config: Config,
    options: RunOptions,
    jobs: int | None = None,
    progress: Callable[[FileResult], None] | None = None,
) -> list[FileResult]:
    jobs = jobs or os.cpu_count() or 1
    results: list[FileResult] = []
    if jobs <= 1 or len(files) < _PARALLEL_THRESHOLD:
        for source in files:
            result = process_file(source, config, options)
            results.append(result)
            if progress:
                progress(result)
        return results
    # Imported here: a one-file run (pre-commit, editors) never starts a pool.
    from concurrent.futures import ProcessPoolExecutor

    chunk = max(1, min(64, len(files) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(_worker, [(f, config, options) for f in files], chunksize=chunk):
            results.append(result)
            if progress:
                progress(result)
    return results
