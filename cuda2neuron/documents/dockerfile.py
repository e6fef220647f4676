"""Dockerfiles as the rules read them: their shell commands for the shell rules, the file itself
for the Dockerfile rules.

The shell rules read a copy of the file in which everything that is not shell is blanked out:
instruction keywords, ``FROM`` / ``COPY`` / exec-form (JSON) lines. ``RUN`` and shell-form
``CMD`` / ``ENTRYPOINT`` bodies stay as commands, and ``ENV`` / ``ARG`` become the assignments
they are (``ENV CUDA_VISIBLE_DEVICES=0,1`` reads as ``CUDA_VISIBLE_DEVICES=0,1``). Blanking
keeps every offset, so a shell fix lands on the same characters of the real file and the rest
stays byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shell import ShellScript

__all__ = ["Dockerfile", "parse_dockerfile", "shell_view"]

# An instruction: its keyword at the start of a line (continuation lines belong to the one above).
_INSTRUCTION_RE = re.compile(r"^([ \t]*)([A-Za-z]+)([ \t]+|$)", re.MULTILINE)
_SHELL_BODIES = frozenset({"RUN", "CMD", "ENTRYPOINT"})
_ASSIGNMENTS = frozenset({"ENV", "ARG"})


@dataclass
class Dockerfile(ShellScript):
    """``text`` is the blanked shell view the shell rules read; ``raw`` the file itself."""

    raw: str = ""

    def instructions(self, keyword: str):
        """``(body_start, body_end)`` of each instruction named ``keyword`` (continuations included)."""
        for start, name, body_start, end in _instructions(self.raw):
            if name == keyword:
                yield body_start, end


def _instructions(text: str):
    """``(start, KEYWORD, body_start, end)`` for each instruction; ``end`` after its last line."""
    found = []
    pos = 0
    while pos < len(text):
        line_end = text.find("\n", pos)
        line_end = len(text) if line_end == -1 else line_end
        m = _INSTRUCTION_RE.match(text, pos, line_end)
        if m is None or text[pos:line_end].lstrip().startswith("#"):
            pos = line_end + 1
            continue
        end = line_end
        # A trailing backslash continues the instruction on the next line.
        while text[pos:end].rstrip(" \t\r").endswith("\\") and end < len(text):
            nxt = text.find("\n", end + 1)
            end = len(text) if nxt == -1 else nxt
        found.append((pos, m.group(2).upper(), m.end(), end))
        pos = end + 1
    return found


def _blank(text: str, start: int, end: int, out: list[str]) -> None:
    for i in range(start, end):
        if out[i] != "\n":
            out[i] = " "


def shell_view(text: str) -> str:
    out = list(text)
    kept = [False] * len(text)
    for start, name, body_start, end in _instructions(text):
        shell = name in _ASSIGNMENTS or (name in _SHELL_BODIES and not text[body_start:end].lstrip().startswith("["))
        if shell:
            for i in range(body_start, end):
                kept[i] = True
    for i, ch in enumerate(text):
        if not kept[i] and ch != "\n" and not _in_comment_line(text, i):
            out[i] = " "
    return "".join(out)


def _in_comment_line(text: str, i: int) -> bool:
    line_start = text.rfind("\n", 0, i) + 1
    return text[line_start:i + 1].lstrip().startswith("#")


def parse_dockerfile(text: str) -> Dockerfile:
    return Dockerfile(shell_view(text), raw=text)
