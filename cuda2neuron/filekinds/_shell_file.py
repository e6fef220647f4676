"""The handler for shell launch scripts (``*.sh``, ``*.bash``)."""

from __future__ import annotations

from pathlib import Path

from cuda2neuron.engine import Config, Finding, Rule, rules_for
from cuda2neuron.engine._source import SourceError

from ._shell import ShellScript
from ._text import TextItem, run_text_rules, to_finding

__all__ = ["is_shell_script", "process_shell_findings", "shell_items", "shell_rules"]

# Only suffixes: discovery calls this for every file of a tree, so it must not open files
# (extensionless scripts with a shebang are not picked up; name them on the command line as
# *.sh or rename them).
SHELL_SUFFIXES = frozenset({".sh", ".bash"})


def is_shell_script(path: Path) -> bool:
    return path.suffix in SHELL_SUFFIXES


def shell_rules(config: Config, path: str) -> tuple[type[Rule], ...]:
    return tuple(r for r in rules_for(config, path) if "shell" in r.file_kinds)


def shell_items(
    text: str, config: Config, path: str, fix: bool
) -> tuple[str | None, list[TextItem]]:
    rules = shell_rules(config, path)
    # The cheap pre-check Python files get from triggers: most scripts mention none of them.
    rules = tuple(r for r in rules if any(t in text for t in r.triggers))
    if not rules:
        return None, []
    return run_text_rules(text, rules, ShellScript, config.settings, fix=fix, unsafe=config.unsafe_fixes)


def process_shell_findings(
    path: str, data: bytes, config: Config, fix: bool
) -> tuple[bytes | None, list[Finding]]:
    if b"\x00" in data:
        raise SourceError("decode", "file contains NUL bytes (binary file?)")
    # surrogateescape: a Latin-1 comment in a script must survive the round trip byte for byte.
    text = data.decode("utf-8", "surrogateescape")
    new, items = shell_items(text, config, path, fix)
    findings = [to_finding(it, path, it.span) for it in items]
    return (None if new is None else new.encode("utf-8", "surrogateescape")), findings
