"""Python sources (``*.py``, ``*.pyi``): the rule catalog's libcst visitors on one file."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from cuda2neuron.core import Config, Finding, ProjectFacts, Rule, RunOptions, SourceError, has_trigger, trigger_words

from ._catalog import rules_for
from ._code_text import code_text
from ._prefilter import may_trigger

__all__ = ["is_python_source", "process_python_findings", "python_triggers"]


def is_python_source(path: Path) -> bool:
    return path.suffix in (".py", ".pyi")


@lru_cache(maxsize=64)
def python_triggers(rule_types: tuple[type[Rule], ...]) -> tuple[bytes, ...]:
    return trigger_words({t for r in rule_types if "python" in r.file_kinds for t in r.triggers})


@lru_cache(maxsize=8)
def _project_words(facts: ProjectFacts) -> tuple[bytes, ...]:
    return facts.words()


def process_python_findings(
    path: str, data: bytes, config: Config, options: RunOptions
) -> tuple[bytes | None, list[Finding]]:
    """Lint (and fix) Python source bytes; raises SourceError / ConvergenceError."""
    # Names only the project sweep knows (``from .ops import layer_norm`` where that module
    # imports triton) wake the rules that use the sweep's facts.
    project = _project_words(config.settings.project)
    if not may_trigger(data, "python") and not (project and has_trigger(data, project)):
        return None, []  # no rule can fire: the catalog and the parser stay unloaded

    def fires(rule: type[Rule], text: bytes) -> bool:
        return has_trigger(text, python_triggers((rule,))) or bool(
            project and rule.project_triggers and has_trigger(text, project)
        )

    rule_types = tuple(r for r in rules_for(config, path) if "python" in r.file_kinds)
    if not rule_types or not (
        has_trigger(data, python_triggers(rule_types)) or any(fires(r, data) for r in rule_types if r.project_triggers)
    ):
        return None, []
    # Words in comments and docstrings cannot make a rule fire: look again in the code alone,
    # and run only the rules whose words are there and that say they can fire on it (most
    # files wake one or two families; the others are never instantiated).
    code = code_text(data)
    rule_types = tuple(r for r in rule_types if fires(r, code) and r.wakes(code))
    if not rule_types:
        return None, []
    # The libcst engine, imported only for files that need it.
    from cuda2neuron.python import fix_module, lint_module, parse_bytes

    module = parse_bytes(data)
    # libcst round-trips the bytes exactly, so this is the module's code without a generation.
    source = data.decode(module.encoding)
    if not options.fix:
        return None, lint_module(module, rule_types, path, config.settings, source)
    outcome = fix_module(
        module,
        rule_types,
        path,
        config.settings,
        unsafe=options.unsafe,
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
