"""The handler for shell launch scripts (``*.sh``, ``*.bash``)."""

from __future__ import annotations

import re
from pathlib import Path

from cuda2neuron.engine import Config, Finding, Rule, rules_for
from cuda2neuron.engine._source import SourceError
from cuda2neuron.engine._triggers import may_trigger

from ._shell import ShellScript
from ._text import TextItem, run_text_rules, to_finding

__all__ = ["is_shell_script", "process_shell_findings", "shell_items", "shell_rules"]

SHELL_SUFFIXES = frozenset({".sh", ".bash"})
_SHEBANG_RE = re.compile(rb"#![ \t]*\S*/(?:env[ \t]+(?:-\S+[ \t]+)*)?(?:ba)?sh(?:[ \t]|\r?$)")


def is_shell_script(path: Path) -> bool:
    """``*.sh`` / ``*.bash``, or an extensionless file whose shebang runs sh or bash.

    Discovery asks this of every file in a tree, so only files without a suffix (bin/train,
    scripts/launch) are opened, and only their first line is read. ``zsh``, ``python`` and
    other interpreters do not count.
    """
    if path.suffix in SHELL_SUFFIXES:
        return True
    if path.suffix or path.name.startswith("."):
        return False
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return _SHEBANG_RE.match(first.rstrip(b"\n")) is not None


def shell_rules(config: Config, path: str) -> tuple[type[Rule], ...]:
    return tuple(r for r in rules_for(config, path) if "shell" in r.file_kinds)


def shell_items(
    text: str, config: Config, path: str, fix: bool
) -> tuple[str | None, list[TextItem]]:
    if not may_trigger(text, "shell"):
        return None, []  # no shell rule can fire: the catalog stays unloaded
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
