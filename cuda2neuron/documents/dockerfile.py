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

__all__ = ["ApptainerFile", "Dockerfile", "parse_apptainer", "parse_dockerfile", "raw_instruction_spans", "shell_view"]

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
    # The legacy `ENV KEY value` form reads as the assignment `KEY=value` (one character changed,
    # offsets kept: a fix over it writes the `KEY=value` form, which Docker reads the same).
    for start, name, body_start, end in _instructions(text):
        if name == "ENV":
            m = _LEGACY_ENV_RE.match(text, body_start, end)
            if m is not None:
                out[m.end(1)] = "="
    return "".join(out)


_LEGACY_ENV_RE = re.compile(r"([A-Za-z_]\w*)[ \t]+(?=\S)(?![^\n]*=)")


def _in_comment_line(text: str, i: int) -> bool:
    line_start = text.rfind("\n", 0, i) + 1
    return text[line_start:i + 1].lstrip().startswith("#")


def parse_dockerfile(text: str) -> Dockerfile:
    return Dockerfile(shell_view(text), raw=text)


# -- Apptainer / Singularity definition files ----------------------------------------------------
# A header of `Keyword: value` lines (`Bootstrap: docker`, `From: nvcr.io/nvidia/pytorch:24.02-py3`),
# then `%section` blocks; %post, %environment, %runscript, %startscript and %test are shell.
_SECTION_RE = re.compile(r"^%([A-Za-z]+)[^\n]*$", re.MULTILINE)
_SHELL_SECTIONS = frozenset({"post", "environment", "runscript", "startscript", "test", "setup"})
_HEADER_RE = re.compile(r"^[ \t]*([A-Za-z]+)[ \t]*:[ \t]*(\S[^\n]*?)[ \t]*$", re.MULTILINE)


@dataclass
class ApptainerFile(Dockerfile):
    """A definition file read as a Dockerfile: its ``From:`` header is the ``FROM`` instruction,
    its shell sections are the shell view."""

    def instructions(self, keyword: str):
        """``FROM``: the ``From:`` header; ``LABEL`` / ``ENV``: each line of ``%labels`` /
        ``%environment``."""
        sections = list(_SECTION_RE.finditer(self.raw))
        header_end = sections[0].start() if sections else len(self.raw)
        for m in _HEADER_RE.finditer(self.raw, 0, header_end):
            if m.group(1).upper() == keyword:
                yield m.start(2), m.end(2)
        wanted = {"LABEL": "labels", "ENV": "environment"}.get(keyword)
        for i, m in enumerate(sections):
            if m.group(1).lower() != wanted:
                continue
            end = sections[i + 1].start() if i + 1 < len(sections) else len(self.raw)
            for line in re.finditer(r"[^\n]+", self.raw[m.end():end]):
                if line.group(0).strip() and not line.group(0).lstrip().startswith("#"):
                    yield m.end() + line.start(), m.end() + line.end()


def _apptainer_view(text: str) -> str:
    keep: list[tuple[int, int]] = []
    sections = list(_SECTION_RE.finditer(text))
    for i, m in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        if m.group(1).lower() in _SHELL_SECTIONS:
            keep.append((min(m.end() + 1, end), end))
    out = []
    pos = 0
    for start, end in keep:
        out.append(re.sub(r"[^\n]", " ", text[pos:start]))
        out.append(text[start:end])
        pos = end
    out.append(re.sub(r"[^\n]", " ", text[pos:]))
    return "".join(out)


def parse_apptainer(text: str) -> ApptainerFile:
    return ApptainerFile(_apptainer_view(text), raw=text)


# Apptainer sections that are text for people, not instructions.
_PROSE_SECTIONS = frozenset({"help"})


def raw_instruction_spans(doc: Dockerfile) -> list[tuple[int, int]]:
    """Where a Dockerfile's (or definition file's) instructions are written, shell or not:
    every instruction with its continuation lines; an Apptainer file's header and every section
    but ``%help``. Text outside them (a heredoc's body) is data."""
    raw = doc.raw
    if isinstance(doc, ApptainerFile):
        sections = list(_SECTION_RE.finditer(raw))
        spans = [(0, sections[0].start() if sections else len(raw))]
        for i, m in enumerate(sections):
            end = sections[i + 1].start() if i + 1 < len(sections) else len(raw)
            if m.group(1).lower() not in _PROSE_SECTIONS:
                spans.append((m.start(), end))
        return spans
    spans = []
    heredoc_end = -1
    for start, name, body_start, end in _instructions(raw):
        if start < heredoc_end or name not in _KEYWORDS:
            continue  # a heredoc's line that happens to start with a word (`import cuda`)
        spans.append((start, end))
        m = _HEREDOC_START.search(raw, body_start, end)
        if m is not None:
            close = re.compile(rf"^[ \t]*{re.escape(m.group(1))}[ \t]*$", re.MULTILINE).search(raw, end)
            heredoc_end = close.end() if close else len(raw)
    return spans


# Dockerfile instructions (a line starting with another word is inside a heredoc, or a mistake).
_KEYWORDS = frozenset({
    "FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
    "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
})
_HEREDOC_START = re.compile(r"<<-?[ \t]*['\"]?([A-Za-z_][\w]*)")
