"""Findings in colour on a terminal, as ruff prints them: the path bold, the rule code red, the
source gutter blue, the carets red, the help and suggestion lines cyan.

The text itself is the report's (``report.to_text`` / ``to_concise``: one wording for every
output); this module only styles its lines. Colour is for people: only when the stream is a
terminal or ``FORCE_COLOR`` asks for it (force-color.org), never with ``NO_COLOR`` set
(no-color.org), never into a pipe or an ``--output-file``.
"""

from __future__ import annotations

import re
from typing import Any

from ._console import Console

__all__ = ["colour_allowed", "coloured_findings"]

_HEADER_RE = re.compile(r"^(?P<path>.+?):(?P<pos>\d+:\d+):(?P<sp> )(?P<code>CN\d{3})(?P<rest> .*?)(?P<note> \[[^\]]+\])?$")
_GUTTER_RE = re.compile(r"^(?P<num> *\d* )\|(?P<text>.*)$")
_CARETS_RE = re.compile(r"^(?P<pad> *)(?P<carets>\^+)(?P<code> CN\d{3})$")
_NOTE_RE = re.compile(r"^(?P<lead>  = )(?P<label>help|suggested, to apply by hand|fix \([a-z-]+\))(?P<rest>:.*)$")


def colour_allowed(console: Console) -> bool:
    return console.styled


def coloured_findings(text: str) -> Any:
    """A rich ``Text`` of the report's findings ``text`` with ruff's colours."""
    from rich.text import Text

    out = Text()
    header_next = True
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        end = line[len(body):]
        if not body:
            header_next = True
            out.append(end)
            continue
        m = _HEADER_RE.match(body) if header_next or not body.startswith(" ") else None
        if m is not None:
            header_next = False
            out.append(m["path"], style="bold")
            out.append(":", style="cyan")
            out.append(m["pos"])
            out.append(":", style="cyan")
            out.append(m["sp"])
            out.append(m["code"], style="bold red")
            out.append(m["rest"])
            if m["note"]:
                out.append(m["note"], style="cyan")
        elif (g := _GUTTER_RE.match(body)) is not None:
            out.append(g["num"] + "|", style="bold blue")
            c = _CARETS_RE.match(g["text"][1:]) if g["text"].startswith(" ") else None
            if c is not None:
                out.append(" " + c["pad"])
                out.append(c["carets"] + c["code"], style="bold red")
            else:
                out.append(g["text"])
        elif (n := _NOTE_RE.match(body)) is not None:
            out.append(n["lead"], style="bold blue")
            out.append(n["label"], style="bold cyan")
            out.append(n["rest"])
        else:
            out.append(body)
        out.append(end)
    return out
