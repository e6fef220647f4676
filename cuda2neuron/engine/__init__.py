"""The codemod engine: rules report, the engine applies fixes to a fixed point and returns data.

Nothing in this package prints, and nothing imports torch.
"""

from __future__ import annotations

from pathlib import Path

from ._config import Config, ConfigError, find_pyproject, load_config
from ._files import Discovered, SkippedPath, discover
from ._model import Effort, FileError, FileResult, FileStatus, Finding, Fix, Safety, Span
from ._output import write_copy, write_in_place
from ._process import Handler, guarded, handler_for, process_bytes, register_handler, rules_for
from ._rule import Invalid, Rule, RuleDefinitionError, Valid, all_rules
from ._runner import process_file, process_files
from ._settings import Settings

__all__ = [
    "Config",
    "ConfigError",
    "Discovered",
    "Effort",
    "FileError",
    "FileResult",
    "FileStatus",
    "Finding",
    "Fix",
    "Handler",
    "Invalid",
    "Rule",
    "RuleDefinitionError",
    "Safety",
    "Settings",
    "SkippedPath",
    "SourceFailure",
    "Span",
    "Valid",
    "all_rules",
    "discover",
    "find_pyproject",
    "fix_source",
    "guarded",
    "handler_for",
    "lint_source",
    "load_config",
    "process_bytes",
    "process_file",
    "process_files",
    "register_handler",
    "rules_for",
    "write_copy",
    "write_in_place",
]


def lint_source(source: str | bytes, path: str = "<string>", config: Config | None = None) -> tuple[Finding, ...]:
    """Findings for one source text (positions refer to this text). Raises on unparsable input."""
    result = _run(source, path, config, fix=False)
    return result.findings


def fix_source(
    source: str | bytes, path: str = "<string>", config: Config | None = None
) -> tuple[str, tuple[Finding, ...]]:
    """The migrated text and the findings (applied ones marked). Raises on unparsable input."""
    result = _run(source, path, config, fix=True)
    data = source.encode("utf-8") if isinstance(source, str) else source
    new = result.new_bytes if result.new_bytes is not None else data
    return new.decode("utf-8") if isinstance(source, str) else new, result.findings  # type: ignore[return-value]


class SourceFailure(ValueError):
    def __init__(self, error: FileError) -> None:
        super().__init__(error.message)
        self.error = error


def _run(source: str | bytes, path: str, config: Config | None, fix: bool) -> FileResult:
    data = source.encode("utf-8") if isinstance(source, str) else source
    config = config or Config()
    if handler_for(Path(path)) is None:
        # Text with no file name (stdin, an API caller) is Python source.
        from ._process import process_python

        result = process_python(path, data, config, fix)
    else:
        result = process_bytes(path, data, config, fix)
    if result.error is not None:
        raise SourceFailure(result.error)
    return result
