"""A Python file's text with its comments and docstrings blanked: what trigger words are looked for in.

"CUDA" in a comment or a docstring ("Moves the model to the CUDA device") cannot make a rule
fire, but it used to cost the file a parse. One regular-expression pass finds comments and
string literals; a string that stands alone as a statement (a docstring, or any other bare
string: it has no effect) is blanked with the comments, and so is a multi-line triple-quoted
string that is the whole value of an assignment (``EXAMPLE_DOC_STRING =`` a triple-quoted
``>>> pipe.to("cuda")`` session: diffusers keeps its usage examples in such constants, and about
250 of its files woke the device rules on them alone). No rule reads a multi-line value: a device name, a backend, a compile mode,
an environment variable or a kernel's repository id is one line. Every other string stays: device
names ("cuda:0"), backends ("nccl") and shell commands live in strings. f-strings are never
blanked: their placeholders are code.

A plain scan, not ``tokenize``: on CPython 3.11 the tokenize module costs about as much as a
libcst parse, which is what this saves. Its only risk is to treat too much as code (a file then
is parsed as before); it never blanks code, because every match starts at a ``#`` or a quote
outside a string, exactly where Python's tokenizer would start a comment or a string.
"""

from __future__ import annotations

import re

__all__ = ["code_text"]

_TOKEN_RE = re.compile(
    rb"""
    (?P<comment>\#[^\r\n]*)
  | (?P<string>
        (?<![A-Za-z0-9_])[rRbBuUfF]{0,2}
        (?: \"\"\"(?:\\.|[^\\])*?\"\"\"
          | '''(?:\\.|[^\\])*?'''
          | "(?:\\.|[^"\\\r\n])*"
          | '(?:\\.|[^'\\\r\n])*'
        )
    )
    """,
    re.VERBOSE | re.DOTALL,
)
_OPENERS = b"([{"
_CLOSERS = b")]}"
# What may follow a statement-level string on its line.
_STATEMENT_END = re.compile(rb"[ \t]*(?:#[^\r\n]*)?(?:[\r\n;]|$)")
# What may precede an assigned value on its line: ``NAME =``, ``self.NAME =``, ``NAME: str =``.
_ASSIGNED = re.compile(rb"[ \t]*[A-Za-z_][\w.]*[ \t]*(?::[^=\r\n]*)?=[ \t]*")


def _depth_change(chunk: bytes) -> int:
    return sum(chunk.count(bytes([c])) for c in _OPENERS) - sum(chunk.count(bytes([c])) for c in _CLOSERS)


def code_text(data: bytes) -> bytes:
    """``data`` with comments and statement-level strings replaced by spaces (offsets kept)."""
    if b"#" not in data and b'"""' not in data and b"'''" not in data:
        return data
    out = bytearray(data)
    depth = 0
    pos = 0
    for m in _TOKEN_RE.finditer(data):
        depth += _depth_change(data[pos : m.start()])
        pos = m.end()
        if m.lastgroup == "comment":
            out[m.start() : m.end()] = b" " * (m.end() - m.start())
            continue
        text = m.group()
        if depth > 0 or b"f" in text[: len(text) - len(text.lstrip(b"rRbBuUfF"))].lower():
            continue
        if not (_at_line_start(data, m.start()) or _assigned_text(data, m)):
            continue
        if not _STATEMENT_END.match(data, m.end()):
            continue  # "x".join(...), "a" + b: an expression that uses the string
        out[m.start() : m.end()] = b" " * (m.end() - m.start())
    return bytes(out)


def _assigned_text(data: bytes, m: re.Match[bytes]) -> bool:
    """A multi-line triple-quoted string right after ``NAME =`` at the start of its line."""
    body = m.group().lstrip(b"rRbBuU")
    if not body.startswith((b'"""', b"'''")) or b"\n" not in body:
        return False
    line_start = data.rfind(b"\n", 0, m.start()) + 1
    return _ASSIGNED.fullmatch(data, line_start, m.start()) is not None and _at_line_start(data, line_start)


def _at_line_start(data: bytes, i: int) -> bool:
    """Only blanks before ``i`` on its line, and the line above does not continue with ``\\``."""
    j = i - 1
    while j >= 0 and data[j] in b" \t":
        j -= 1
    if j >= 0 and data[j] not in b"\r\n":
        return False
    while j >= 0 and data[j] in b"\r\n":
        j -= 1
    return j < 0 or data[j] != 0x5C  # backslash
