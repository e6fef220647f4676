"""Handlers for files read as plain text: YAML configs and CUDA C++ sources.

Neither is parsed beyond what its rules need (a line-based ``key: value`` reading of YAML keeps
every byte outside an edit, which a YAML library's round trip would not), so both kinds share
one handler shape: decode, run the rules of the kind, encode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property


__all__ = ["ConfigEntry", "PlainText"]


# `key: value  # comment`, in a mapping or a list item; flow style ({a: b}) and multi-line
# values are not read. The value group stops before a comment and trailing blanks.
_ENTRY_RE = re.compile(
    r"""^[ \t]*(?:-[ \t]+)?(?P<key>[A-Za-z_][\w./-]*)[ \t]*:[ \t]+
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
    key_start: int = -1
    key_end: int = -1


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
            out.append(ConfigEntry(
                m.group("key"), value, m.start("value"), m.end("value"), quote, m.start("key"), m.end("key"),
            ))
        return tuple(out)
