"""Handlers for files read as plain text: YAML configs and CUDA C++ sources.

Neither is parsed beyond what its rules need (a line-based ``key: value`` reading of YAML keeps
every byte outside an edit, which a YAML library's round trip would not), so both kinds share
one handler shape: decode, run the rules of the kind, encode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cuda2neuron.engine import Config, Finding, rules_for
from cuda2neuron.engine._source import SourceError
from cuda2neuron.engine._triggers import may_trigger

from ._text import run_text_rules, to_finding

__all__ = [
    "ConfigEntry",
    "PlainText",
    "is_config_file",
    "is_cuda_source",
    "process_config_findings",
    "process_cuda_source_findings",
    "process_text_file",
]

CONFIG_SUFFIXES = frozenset({".yaml", ".yml"})
CUDA_SUFFIXES = frozenset({".cu", ".cuh"})

# `key: value  # comment`, in a mapping or a list item; flow style ({a: b}) and multi-line
# values are not read. The value group stops before a comment and trailing blanks.
_ENTRY_RE = re.compile(
    r"""^[ \t]*(?:-[ \t]+)?(?P<key>[A-Za-z_][\w.-]*)[ \t]*:[ \t]+
    (?P<value>"[^"\n]*"|'[^'\n]*'|[^\s#'"{\[|>&*!][^#\n]*?)[ \t]*(?:\#[^\n]*)?$""",
    re.MULTILINE | re.VERBOSE,
)


@dataclass(frozen=True)
class ConfigEntry:
    key: str
    value: str  # unquoted
    start: int  # offsets of the value as written (quotes included)
    end: int
    quote: str  # '"', "'" or ""


@dataclass(frozen=True)
class PlainText:
    """A file's text, with the YAML ``key: value`` entries read lazily."""

    text: str

    @cached_property
    def entries(self) -> tuple[ConfigEntry, ...]:
        out = []
        for m in _ENTRY_RE.finditer(self.text):
            raw = m.group("value")
            quote = raw[0] if raw[:1] in ("'", '"') else ""
            value = raw[1:-1] if quote else raw
            out.append(ConfigEntry(m.group("key"), value, m.start("value"), m.end("value"), quote))
        return tuple(out)


def is_config_file(path: Path) -> bool:
    return path.suffix.lower() in CONFIG_SUFFIXES


def is_cuda_source(path: Path) -> bool:
    return path.suffix.lower() in CUDA_SUFFIXES


def process_text_file(
    kind: str, kinds: frozenset[str], parse, path: str, data: bytes, config: Config, fix: bool
) -> tuple[bytes | None, list[Finding]]:
    """A file read as text: the rules reading any of ``kinds`` run over ``parse(text)``.

    ``kind`` names the file's own coarse prefilter words (engine/_triggers.py).
    """
    if b"\x00" in data:
        raise SourceError("decode", "file contains NUL bytes (binary file?)")
    # surrogateescape: bytes that are not UTF-8 (a Latin-1 comment) survive the round trip.
    text = data.decode("utf-8", "surrogateescape")
    if not may_trigger(text, kind):
        return None, []  # no rule of this kind can fire: the catalog stays unloaded
    rules = tuple(r for r in rules_for(config, path) if r.file_kinds & kinds)
    rules = tuple(r for r in rules if any(t in text for t in r.triggers))
    if not rules:
        return None, []
    new, items = run_text_rules(text, rules, parse, config.settings, fix=fix, unsafe=config.unsafe_fixes)
    findings = [to_finding(it, path, it.span) for it in items]
    return (None if new is None else new.encode("utf-8", "surrogateescape")), findings


def process_config_findings(path: str, data: bytes, config: Config, fix: bool) -> tuple[bytes | None, list[Finding]]:
    return process_text_file("config", frozenset({"config"}), PlainText, path, data, config, fix)


def process_cuda_source_findings(path: str, data: bytes, config: Config, fix: bool) -> tuple[bytes | None, list[Finding]]:
    return process_text_file("cuda-source", frozenset({"cuda-source"}), PlainText, path, data, config, fix)
