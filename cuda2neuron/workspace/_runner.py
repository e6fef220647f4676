"""Process many files, in parallel when asked; each worker returns typed results only."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from cuda2neuron.core import Config, FileError, FileResult, FileStatus, RunOptions
from cuda2neuron.kinds import may_trigger, process_kind, verify_rewrite

from ._cache import ResultCache
from ._discover import SourceFile
from ._pool import Budget, FilePool

__all__ = ["Budget", "process_file", "process_files"]

# Below this many files a process pool costs more than it saves (start-up + catalog import).
_PARALLEL_THRESHOLD = 16
# A file this big is processed in a worker even when the run is in one process: its budgets
# (seconds, memory) hold only there. Few source files come near it (their parse takes a second).
_IN_PROCESS_MAX_BYTES = 256 << 10


def _size(source: SourceFile) -> int:
    try:
        return source.path.stat().st_size
    except OSError:
        return 0  # processing reports it


def process_file(
    source: SourceFile, config: Config, options: RunOptions, cache: ResultCache | None = None,
    budget: Budget | None = None,
) -> FileResult:
    shown = str(source.path)
    try:
        data = source.path.read_bytes()
    except OSError as exc:
        return FileResult(shown, FileStatus.FAILED, error=FileError("io", f"cannot read: {exc.strerror}"))
    too_large = _too_large(source.kind, data, budget or _DEFAULT_BUDGET)
    if too_large is not None:
        return FileResult(shown, FileStatus.FAILED, error=too_large)
    if cache is None:
        return process_kind(source.kind, shown, data, config, options)
    key = cache.key(shown, source.kind, data, config, options)
    result = _cached(cache, key, source.kind, shown, data)
    if result is None:
        result = process_kind(source.kind, shown, data, config, options)
        cache.put(key, result, source.kind, data)
    return result


_DEFAULT_BUDGET = Budget()


def _too_large(kind: str | None, data: bytes, budget: Budget) -> FileError | None:
    """A Python file too big to parse within the budget (libcst needs ~750 MB per MB of
    CUDA-dense code): refused before the parse, where it could still be (words in it)."""
    if kind != "python" or len(data) <= budget.max_bytes or not may_trigger(data, kind):
        return None
    return FileError("too-large", f"skipped: too large ({len(data) / (1 << 20):.1f} MiB; a Python file over "
                                  f"{budget.max_bytes / (1 << 20):g} MiB is not parsed; CUDA2NEURON_FILE_MAX_SIZE raises the limit)")


def _cached(cache: ResultCache, key: str, kind: str | None, shown: str, data: bytes) -> FileResult | None:
    """A cache hit, only if it is one a fresh run could have made: a cached rewrite is checked
    as a fresh one is (it compiles) before anyone writes it."""
    hit = cache.get(key, shown, data)
    if hit is not None and hit.new_bytes is not None and not verify_rewrite(kind, shown, hit.new_bytes):
        return None
    return hit


def process_files(
    files: Sequence[SourceFile],
    config: Config,
    options: RunOptions,
    jobs: int | None = None,
    progress: Callable[[FileResult], None] | None = None,
    cache: ResultCache | None = None,
    budget: Budget | None = None,
) -> list[FileResult]:
    """Every file's result, in the order given; ``cache`` (optional) is consulted and filled.

    With a cache, the parent looks every file up first and only the misses are processed, so
    a warm run of an unchanged tree starts no process pool and loads no rule. ``progress`` is
    told of each result as its file finishes.
    """
    budget = budget or Budget.from_env()
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
    for i, result in _process(files, todo, config, options, jobs, cache, budget):
        results[i] = result
        if progress:
            progress(result)
    return [results[i] for i in range(len(files))]


def _lookup(source: SourceFile, config: Config, options: RunOptions, cache: ResultCache) -> FileResult | None:
    try:
        data = source.path.read_bytes()
    except OSError:
        return None  # processing reports it
    shown = str(source.path)
    return _cached(cache, cache.key(shown, source.kind, data, config, options), source.kind, shown, data)


def _process(files, todo, config, options, jobs, cache, budget) -> Iterator[tuple[int, FileResult]]:
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or len(todo) < _PARALLEL_THRESHOLD:
        # In this process no budget but the size limit could hold, and a thread cannot stop a
        # native parse: a file big enough to run long goes to one worker, where time and memory
        # budgets hold as in the pool (`check FILE`, `--jobs 1`, every pre-commit call).
        big = {i for i in todo if _size(files[i]) >= _IN_PROCESS_MAX_BYTES}
        for i in todo:
            if i not in big:
                yield i, process_file(files[i], config, options, cache, budget)
        if big:
            yield from FilePool(1, process_file, files, (config, options, cache, budget), budget).run(sorted(big), lambda i: str(files[i].path))
        return
    # Imported here: a one-file run (pre-commit, editors) never starts a pool.
    import multiprocessing

    if multiprocessing.get_start_method() == "fork":
        # Forked workers inherit what the parent has imported: the rule catalog (and libcst)
        # loaded once here spares each worker its own import (~0.5 s CPU apiece).
        from cuda2neuron.kinds import catalog

        catalog()

    # process_file looked up now, not bound at import: a test's stand-in reaches forked workers.
    pool = FilePool(min(jobs, len(todo)), process_file, files, (config, options, cache, budget), budget)
    yield from pool.run(todo, lambda i: str(files[i].path))
