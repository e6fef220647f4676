"""One file in, one typed ``FileResult`` out. Nothing here raises for a bad file.

Besides Python sources, other file kinds (notebooks, launch scripts, requirements) register a
handler with ``register_handler``; the python path is the default for ``*.py`` / ``*.pyi``.
"""

from __future__ import annotations

import ast
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ._config import Config
from ._convergence import ConvergenceError
from ._model import FileError, FileResult, FileStatus, Finding
from ._rule import Rule, all_rules
from ._source import SourceError, has_trigger, parse_bytes, trigger_words
from ._triggers import may_trigger

__all__ = [
    "Handler",
    "handler_for",
    "process_bytes",
    "process_python",
    "register_handler",
    "rules_for",
]

Processor = Callable[[str, bytes, Config, bool], FileResult]


@dataclass(frozen=True)
class Handler:
    name: str
    matches: Callable[[Path], bool]
    process: Processor


_HANDLERS: list[Handler] = []


def register_handler(handler: Handler) -> Handler:
    _HANDLERS.append(handler)
    return handler


def handler_for(path: Path) -> Handler | None:
    handler = _registered_handler(path)
    if handler is None and _load_file_kinds():
        handler = _registered_handler(path)
    return handler


def _registered_handler(path: Path) -> Handler | None:
    for handler in _HANDLERS:
        if handler.matches(path):
            return handler
    return None


_file_kinds_loaded = False


def _load_file_kinds() -> bool:
    """Import the other file kinds' handlers; True the first time (when there are new ones).

    They live outside the engine and register themselves on import. Only a path no handler yet
    claims loads them, so checking a ``.py`` file never does.
    """
    global _file_kinds_loaded
    if _file_kinds_loaded:
        return False
    _file_kinds_loaded = True
    try:
        import cuda2neuron.filekinds  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "cuda2neuron.filekinds":
            raise
    return True


def rules_for(config: Config, path: str | None = None) -> tuple[type[Rule], ...]:
    return tuple(
        rule
        for code, rule in all_rules().items()
        if config.selects(code, path) and config.settings.target in rule.targets
    )


@lru_cache(maxsize=64)
def _python_triggers(rule_types: tuple[type[Rule], ...]) -> tuple[bytes, ...]:
    return trigger_words({t for r in rule_types if "python" in r.file_kinds for t in r.triggers})


def process_python_findings(
    path: str, data: bytes, config: Config, fix: bool
) -> tuple[bytes | None, list[Finding]]:
    """Lint (and fix) Python source bytes; raises SourceError / ConvergenceError."""
    if not may_trigger(data, "python"):
        return None, []  # no rule can fire: the catalog and the parser stay unloaded
    rule_types = tuple(r for r in rules_for(config, path) if "python" in r.file_kinds)
    if not rule_types or not has_trigger(data, _python_triggers(rule_types)):
        return None, []
    # The libcst engine, imported only for files that need it.
    from ._lint import fix_module, lint_module

    module = parse_bytes(data)
    # libcst round-trips the bytes exactly, so this is the module's code without a generation.
    source = data.decode(module.encoding)
    if not fix:
        return None, lint_module(module, rule_types, path, config.settings, source)
    outcome = fix_module(
        module,
        rule_types,
        path,
        config.settings,
        unsafe=config.unsafe_fixes,
        may_suppress=b"cuda2neuron:" in data,
        source=source,
    )
    findings = outcome.applied + outcome.remaining
    if not outcome.applied:
        return None, findings
    new = outcome.bytes
    if new == data:
        return None, findings
    # Never hand back output that does not compile: that would be a rule bug written to disk.
    # CPython's parser checks this in a fraction of libcst's parse time.
    try:
        ast.parse(new, filename=path)
    except SyntaxError as exc:
        # Newer syntax than this interpreter knows is still fine if libcst reads it back.
        try:
            parse_bytes(new)
        except SourceError:
            raise RuntimeError(
                f"internal error: the rewrite does not parse ({exc.msg}, line {exc.lineno})"
            ) from None
    return new, findings


def process_python(path: str, data: bytes, config: Config, fix: bool) -> FileResult:
    return guarded(path, data, config, fix, process_python_findings)


def guarded(
    path: str,
    data: bytes,
    config: Config,
    fix: bool,
    body: Callable[[str, bytes, Config, bool], tuple[bytes | None, list[Finding]]],
) -> FileResult:
    """Run ``body`` turning every failure into a typed per-file error."""
    try:
        new, findings = body(path, data, config, fix)
    except SourceError as exc:
        return FileResult(path, FileStatus.FAILED, error=FileError(exc.kind, exc.message, exc.line, exc.col))
    except ConvergenceError as exc:
        return FileResult(path, FileStatus.FAILED, error=FileError("convergence", str(exc)))
    except RecursionError:
        return FileResult(path, FileStatus.FAILED, error=FileError("internal", "source nests too deeply"))
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


register_handler(Handler("python", lambda p: p.suffix in (".py", ".pyi"), process_python))


def process_bytes(path: str, data: bytes, config: Config, fix: bool) -> FileResult:
    handler = handler_for(Path(path))
    if handler is None:
        return FileResult(path, FileStatus.SKIPPED, skip_reason="not a file kind cuda2neuron handles")
    return handler.process(path, data, config, fix)

