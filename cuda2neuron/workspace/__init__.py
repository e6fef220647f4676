"""A run over a project: find its files, process them (in parallel), write the results.

Also the entry points for one source text (``lint_source`` / ``fix_source``) that validate and
API callers use. Nothing in this package prints, and nothing imports torch.
"""

from __future__ import annotations

from pathlib import Path

from cuda2neuron.core import Config, FileError, FileResult, Finding, RunOptions
from cuda2neuron.kinds import kind_of, process_kind

from ._annotate import ANNOTATED_KINDS, Annotated, add_suppressions
from ._baseline import Baseline, BaselineError, apply_baseline, write_baseline
from ._cache import ResultCache, default_cache_root
from ._discover import PORT_MARKER, PRUNED_DIRS, Discovered, SkippedPath, SourceFile, discover
from ._output import InterruptedWriting, write_in_place
from ._port import PortError, PortState, check_out_dir, write_port
from ._project import project_facts, with_project_facts
from ._runner import process_file, process_files

__all__ = [
    "ANNOTATED_KINDS",
    "Annotated",
    "add_suppressions",
    "Baseline",
    "BaselineError",
    "apply_baseline",
    "check_out_dir",
    "write_baseline",
    "PORT_MARKER",
    "PRUNED_DIRS",
    "PortError",
    "PortState",
    "InterruptedWriting",
    "ResultCache",
    "Discovered",
    "SkippedPath",
    "SourceFailure",
    "SourceFile",
    "default_cache_root",
    "discover",
    "fix_source",
    "lint_source",
    "process_file",
    "process_files",
    "project_facts",
    "with_project_facts",
    "write_in_place",
    "write_port",
]


def lint_source(source: str | bytes, path: str = "<string>", config: Config | None = None) -> tuple[Finding, ...]:
    """Findings for one source text (positions refer to this text). Raises on unparsable input."""
    result = _run(source, path, config, RunOptions())
    return result.findings


def fix_source(
    source: str | bytes, path: str = "<string>", config: Config | None = None
) -> tuple[str, tuple[Finding, ...]]:
    """The migrated text and the findings (applied ones marked). Raises on unparsable input."""
    config = config or Config()
    result = _run(source, path, config, RunOptions.from_config(config, fix=True))
    data = source.encode("utf-8") if isinstance(source, str) else source
    new = result.new_bytes if result.new_bytes is not None else data
    return new.decode("utf-8") if isinstance(source, str) else new, result.findings  # type: ignore[return-value]


class SourceFailure(ValueError):
    def __init__(self, error: FileError) -> None:
        super().__init__(error.message)
        self.error = error


def _run(source: str | bytes, path: str, config: Config | None, options: RunOptions) -> FileResult:
    data = source.encode("utf-8") if isinstance(source, str) else source
    # Text with no file name of a known kind (stdin, an API caller) is Python source.
    kind = kind_of(Path(path)) or "python"
    result = process_kind(kind, path, data, config or Config(), options)
    if result.error is not None:
        raise SourceFailure(result.error)
    return result
