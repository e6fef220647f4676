"""Processing files with a progress bar on stderr when a person is watching a long run."""

from __future__ import annotations

from cuda2neuron.core import RunOptions
from cuda2neuron.workspace import process_files

from ._common import err_console

__all__ = ["run_with_progress"]

# Below this many files a progress bar is noise.
_PROGRESS_MIN_FILES = 50


def run_with_progress(files, config, options: RunOptions, jobs: int | None, quiet: bool, verb: str, cache=None):
    results = _run(files, config, options, jobs, quiet, verb, cache)
    if cache is not None and cache.refused:
        # Said even with --quiet: a cache folder others can write to is a safety matter, and
        # its runs are slower for it.
        err_console.say(f"results cache not used: {cache.refused} (see CUDA2NEURON_CACHE_SHARED in docs/robustness.md)")
    return results


def _run(files, config, options: RunOptions, jobs: int | None, quiet: bool, verb: str, cache):
    if quiet or len(files) < _PROGRESS_MIN_FILES or not err_console.is_terminal:
        return process_files(files, config, options, jobs=jobs, cache=cache)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console.rich, transient=True) as progress:
        task = progress.add_task(verb, total=len(files))
        return process_files(files, config, options, jobs=jobs, progress=lambda _r: progress.advance(task), cache=cache)
