"""Shell launch scripts: a small lexer that knows what is code, and the shell file handler.

We do not need a full shell parser, only to tell code from text: ``CUDA_VISIBLE_DEVICES=0,1``
in a command is a device selection, the same words in a comment, in single quotes, in an
``echo "..."`` message or in a heredoc are text and stay untouched (trap 6). Inside double quotes
``$(...)`` and backticks are code again (``echo "$(nvidia-smi -L | wc -l) GPUs"`` runs
nvidia-smi).

Edits are plain text splices, so every other byte — quoting, ``\\`` continuations, comments, CRLF
line endings, non-UTF-8 bytes (kept through surrogateescape) — is preserved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

__all__ = [
    "CODE", "ShellScript", "command_end", "is_gpu_count", "scan", "scan_full", "scan_spans", "unquote", "word_end",
]

# Per-character states.
CODE, COMMENT, SQUOTE, DQUOTE, HEREDOC = "c", "k", "s", "d", "h"

_HEREDOC_RE = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][\w.-]*)\2")
_WORD_START_BEFORE = " \t\r\n;&|()`"
_ASSIGN_RE = re.compile(r"(?<![\w$])([A-Za-z_]\w*)=")


def scan(text: str) -> str:
    """One state letter per character of ``text``."""
    return scan_full(text)[0]


def scan_full(text: str) -> tuple[str, list[bool]]:
    """States, and for each character whether it sits inside ``$(...)`` or backticks."""
    n = len(text)
    out = [CODE] * n
    nested = [False] * n
    # Contexts: "top" (script level), "sub" ($( or a paren inside one), "bt" (backticks), "dq".
    stack = ["top"]
    heredocs: list[tuple[str, bool]] = []
    i = 0
    while i < n:
        ch = text[i]
        ctx = stack[-1]
        if len(stack) > 1 and any(c != "dq" for c in stack[1:]):
            nested[i] = True
        if ctx == "dq":
            out[i] = DQUOTE
            if ch == "\\" and i + 1 < n:
                out[i + 1] = DQUOTE
                i += 2
                continue
            if ch == '"':
                stack.pop()
            elif ch == "$" and text.startswith("$(", i):
                out[i] = out[i + 1] = CODE
                stack.append("sub")
                i += 2
                continue
            elif ch == "`":
                out[i] = CODE
                stack.append("bt")
            i += 1
            continue
        # code contexts
        if ch == "\\":
            i += 2
            continue
        if ch == "#" and (i == 0 or text[i - 1] in _WORD_START_BEFORE):
            end = text.find("\n", i)
            end = n if end == -1 else end
            for j in range(i, end):
                out[j] = COMMENT
            i = end
            continue
        if ch == "'":
            end = text.find("'", i + 1)
            end = n - 1 if end == -1 else end
            for j in range(i, end + 1):
                out[j] = SQUOTE
            i = end + 1
            continue
        if ch == '"':
            out[i] = DQUOTE
            stack.append("dq")
            i += 1
            continue
        if ch == "`":
            if ctx == "bt":
                stack.pop()
            else:
                stack.append("bt")
            i += 1
            continue
        if ch == "$" and text.startswith("$(", i):
            stack.append("sub")
            i += 2
            continue
        if ch == "(" and ctx == "sub":
            stack.append("sub")
        elif ch == ")" and ctx == "sub":
            stack.pop()
        elif ch == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            m = _HEREDOC_RE.match(text, i)
            if m:
                heredocs.append((m.group(3), m.group(1) == "-"))
                i = m.end()
                continue
        elif ch == "\n" and heredocs:
            i = _skip_heredocs(text, i + 1, heredocs, out)
            heredocs = []
            continue
        i += 1
    return "".join(out), nested


def scan_spans(text: str, spans: tuple[tuple[int, int], ...]) -> tuple[str, list[bool]]:
    """``scan_full`` of a text made of separate commands (a YAML file's shell view): each span is
    lexed on its own, the blanks between them are code. The trap: lexed as one text, a quote left
    open in one value (``args: ["What's this?"]``, an argv item, not shell) ran on through every
    later value, and their commands read as quoted text."""
    out = [CODE] * len(text)
    nested = [False] * len(text)
    for start, end in spans:
        states, inside = scan_full(text[start:end])
        out[start:end] = states
        nested[start:end] = inside
    return "".join(out), nested


def _skip_heredocs(text: str, i: int, heredocs: list[tuple[str, bool]], out: list[str]) -> int:
    # Heredoc bodies are data (often Python or config text): never rewritten here.
    n = len(text)
    for delimiter, dash in heredocs:
        while i < n:
            end = text.find("\n", i)
            end = n if end == -1 else end
            line = text[i:end].rstrip("\r")
            for j in range(i, min(end + 1, n)):
                out[j] = HEREDOC
            i = end + 1
            if (line.lstrip("\t") if dash else line) == delimiter:
                break
    return min(i, n)


def command_end(text: str, start: int) -> int:
    """The end of the simple command that runs on from ``start``: its line (a ``\\`` at the end
    continues it), or ``;``, ``|`` or ``&`` (also of ``&&`` and ``||``)."""
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            continue
        if ch in "\n;|&":
            return i
        i += 1
    return n


def word_end(text: str, i: int) -> int:
    """End of the shell word starting at ``i`` (quotes, ``$(...)``, ``${...}``, backticks)."""
    n = len(text)
    depth = 0
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "'\"":
            end = i + 1
            while end < n and text[end] != ch:
                end += 2 if (ch == '"' and text[end] == "\\") else 1
            i = end + 1
            continue
        if ch == "`":
            end = text.find("`", i + 1)
            i = n if end == -1 else end + 1
            continue
        if ch == "$" and i + 1 < n and text[i + 1] in "({":
            depth += 1
            i += 2
            continue
        if depth and ch in "({":
            depth += 1
        elif depth and ch in ")}":
            depth -= 1
        elif not depth and (ch in " \t\r\n;&|<>" or ch == ")"):
            return i
        i += 1
    return min(i, n)


def unquote(word: str) -> str | None:
    """The literal value of a word, or None when it expands something at run time."""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        inner = word[1:-1]
        if word[0] == "'":
            return inner
        # Inside double quotes only `$`, backquotes and `\` expand: a glob or a brace is literal
        # there (DiffSynth's --quant_options "Org/Model:transformer/*.safetensors:bitsandbytes_nf4").
        return None if any(c in inner for c in "$`\\\"") else inner
    if any(c in word for c in "$`\\'\"*?[{"):
        return None
    return word


@dataclass
class ShellScript:
    """A script's text and its per-character states; what shell rules look at."""

    text: str

    @cached_property
    def _scanned(self) -> tuple[str, list[bool]]:
        return scan_full(self.text)

    @property
    def states(self) -> str:
        return self._scanned[0]

    def in_substitution(self, i: int) -> bool:
        """Inside ``$(...)`` or backticks: the value is computed with, not just passed on."""
        return self._scanned[1][i]

    def is_code(self, i: int) -> bool:
        return self.states[i] == CODE

    def at_word_start(self, i: int) -> bool:
        return i == 0 or self.text[i - 1] in _WORD_START_BEFORE

    def code_matches(self, pattern: re.Pattern[str]):
        """Matches of ``pattern`` that start in code (not comments, quotes or heredocs)."""
        for m in pattern.finditer(self.text):
            if self.is_code(m.start()):
                yield m

    def assignments(self, name_re: re.Pattern[str]):
        """``(name_start, name_end, value_start, value_end)`` of ``NAME=value`` words in code."""
        for m in _ASSIGN_RE.finditer(self.text):
            if not (self.is_code(m.start()) and self.at_word_start(m.start())):
                continue
            if not name_re.fullmatch(m.group(1)):
                continue
            value_start = m.end()
            yield m.start(), m.start() + len(m.group(1)), value_start, word_end(self.text, value_start)

    def line_bounds(self, i: int) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, i) + 1
        end = self.text.find("\n", i)
        return start, (len(self.text) if end == -1 else end)

    @cached_property
    def gpu_count_vars(self) -> frozenset[str]:
        """Variables assigned a GPU count: ``NGPUS=$(nvidia-smi -L | wc -l)`` and the like."""
        names = set()
        for ns, ne, vs, ve in self.assignments(re.compile(r"[A-Za-z_]\w*")):
            if is_gpu_count(self.text[vs:ve]):
                names.add(self.text[ns:ne])
        return frozenset(names)


_GPU_COUNT_RE = re.compile(r"nvidia-smi|cuda\.device_count|CUDA_VISIBLE_DEVICES|\bnvidia\b")


def is_gpu_count(value: str) -> bool:
    """A command substitution that counts GPUs (nvidia-smi, torch.cuda.device_count, ...)."""
    return ("$(" in value or "`" in value) and _GPU_COUNT_RE.search(value) is not None
