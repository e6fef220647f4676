"""Process many files, in parallel when asked; each worker returns typed results only."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from cuda2neuron.core import Config, FileError, FileResult, FileStatus, RunOptions
from cuda2neuron.kinds import process_kind

from ._cache import ResultCache
from ._discover import SourceFile

__all__ = ["process_file", "process_files"]

# Below this many files a process pool costs more than it saves (start-up + catalog import).
_PARALLEL_THRESHOLD = 16


def process_file(
    source: SourceFile, config: Config, options: RunOptions, cache: ResultCache | None = None
) -> FileResult:
    shown = str(source.path)
    try:
        data = source.path.read_bytes()
    except OSError as exc:
        return FileResult(shown, FileStatus.FAILED, error=FileError("io", f"cannot read: {exc.strerror}"))
    if cache is None:
        return process_kind(source.kind, shown, data, config, options)
    key = cache.key(shown, source.kind, data, config, options)
    result = cache.get(key)
    if result is None:
        result = process_kind(source.kind, shown, data, config, options)
        cache.put(key, result)
    return result


def _worker(args: tuple[SourceFile, Config, RunOptions, ResultCache | None]) -> FileResult:
    return process_file(*args)


def process_files(
    files: Sequence[SourceFile],
    config: Config,
    options: RunOptions,
    jobs: int | None = None,
    progress: Callable[[FileResult], None] | None = None,
    cache: ResultCache | None = None,
) -> list[FileResult]:
    """Every file's result, in the order given; ``cache`` (optional) is consulted and filled.

    With a cache, the parent looks every file up first and only the misses are processed, so
    a warm run of an unchanged tree starts no process pool and loads no rule.
    """
    results: dict[int, FileResult] = {}
    todo = list(range(len(files)))
    if cache is not None:
        todo = []
        for i, source in enumerate(files):
            hit = _lookup(source, config, options, cache)
            if hit is None:
                todo.append(i)
            else:
                results[i] = hit
                if progress:
                    progress(hit)
    for i, result in zip(todo, _process(files, todo, config, options, jobs, progress, cache)):
        results[i] = result
    return [results[i] for i in range(len(files))]


def _lookup(source: SourceFile, config: Config, options: RunOptions, cache: ResultCache) -> FileResult | None:
    try:
        data = source.path.read_bytes()
    except OSError:
        return None  # processing reports it
    return cache.get(cache.key(str(source.path), source.kind, data, config, options))


def _process(files, todo, config, options, jobs, progress, cache) -> Iterator[FileResult]:
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or len(todo) < _PARALLEL_THRESHOLD:
        for i in todo:
            result = process_file(files[i], config, options, cache)
            if progress:
                progress(result)
            yield result
        return
    # Imported here: a one-file run (pre-commit, editors) never starts a pool.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if multiprocessing.get_start_method() == "fork":
        # Forked workers inherit what the parent has imported: the rule catalog (and libcst)
        # loaded once here spares each worker its own import (~0.5 s CPU apiece).
        from cuda2neuron.kinds import catalog

        catalog()

    chunk = max(1, min(64, len(todo) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(_worker, [(files[i], config, options, cache) for i in todo], chunksize=chunk):
            if progress:
                progress(result)
            yield result
