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

The last texts' results are kept: the residual pass (``_residual``) reads the same unchanged
file after the rules did.

A plain scan, not ``tokenize``: on CPython 3.11 the tokenize module costs about as much as a
libcst parse, which is what this saves. Its only risk is to treat too much as code (a file then
is parsed as before); it never blanks code, because every match starts at a ``#`` or a quote
outside a string, exactly where Python's tokenizer would start a comment or a string.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cuda2neuron.core import WORD_BYTES

__all__ = ["code_text"]

_TOKEN_RE = re.compile(
    rb"""
    (?P<comment>\#[^\r\n]*)
  | (?P<string>
        # Bodies as runs of plain bytes between escapes (and, triple-quoted, lone quotes): the
        # ends "any escape or byte, as few as possible" finds, without a step per byte.
        \"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*\"\"\"
      | '''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''
      | "[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"
      | '[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'
    )
    """,
    re.VERBOSE | re.DOTALL,
)
# A string's prefix letters sit before its quote, and the token starts at a word boundary
# (``rb"..."``, not the ``in"..."`` of ``x in"abc"``: the scan never took that for a string).
# The pattern starts at a ``#`` or a quote, so the regular-expression engine skips straight to
# those bytes instead of trying every position with a look-behind (three times faster).
_PREFIX_LETTERS = frozenset(b"rRbBuUfF")
# What may follow a statement-level string on its line.
_STATEMENT_END = re.compile(rb"[ \t]*(?:#[^\r\n]*)?(?:[\r\n;]|$)")
# What may precede an assigned value on its line: ``NAME =``, ``self.NAME =``, ``NAME: str =``.
_ASSIGNED = re.compile(rb"[ \t]*[A-Za-z_][\w.]*[ \t]*(?::[^=\r\n]*)?=[ \t]*")


def _depth(skeleton: bytearray, start: int, end: int) -> int:
    """The bracket depth change over ``skeleton[start:end]`` (the file with every comment and
    string token zeroed: what is left there is code)."""
    count = skeleton.count
    return (
        count(b"(", start, end) + count(b"[", start, end) + count(b"{", start, end)
        - count(b")", start, end) - count(b"]", start, end) - count(b"}", start, end)
    )


def _string_start(data: bytes, quote: int) -> int | None:
    """Where a string whose quote is at ``quote`` starts with its prefix, or None when a word
    character runs into it (the same tokens a look-behind ``(?<![A-Za-z0-9_])[rRbBuUfF]{0,2}``
    before the quote finds, leftmost first)."""
    if quote == 0 or data[quote - 1] not in WORD_BYTES:
        return quote  # no prefix letter either: they are word bytes
    for letters in (2, 1):
        start = quote - letters
        if start < 0 or any(data[i] not in _PREFIX_LETTERS for i in range(start, quote)):
            continue
        if start == 0 or data[start - 1] not in WORD_BYTES:
            return start
    return None


@lru_cache(maxsize=2)
def code_text(data: bytes) -> bytes:
    """``data`` with comments and statement-level strings replaced by spaces (offsets kept)."""
    if b"#" not in data and b'"""' not in data and b"\'\'\'" not in data:
        return data
    out = bytearray(data)
    depth = 0
    # The file with every comment and string token zeroed as the scan passes it: the depth is
    # only needed for the few strings that could be statements, and then it is six counts in C
    # over the code since the last such string, not six per stretch of code between the tokens
    # in between (a Python loop over about eight stretches per such string on diffusers).
    skeleton = bytearray(data)
    counted = 0  # the skeleton is counted up to here
    pos = 0
    search = _TOKEN_RE.search
    while (m := search(data, pos)) is not None:
        end = m.end()
        if m.lastgroup == "comment":
            start = m.start()
            pos = end
            out[start:end] = b" " * (end - start)
            skeleton[start:end] = bytes(end - start)
            continue
        start = _string_start(data, m.start())
        if start is None:
            # Not a string token (a word runs into the quote): scan on from the next byte,
            # its bytes still count as code.
            pos = m.start() + 1
            continue
        pos = end
        skeleton[start:end] = bytes(end - start)
        text = data[start:end]
        if b"f" in text[: len(text) - len(text.lstrip(b"rRbBuUfF"))].lower():
            continue
        if not (_at_line_start(data, start) or _assigned_text(data, start, text)):
            continue
        if not _STATEMENT_END.match(data, end):
            continue  # "x".join(...), "a" + b: an expression that uses the string
        depth += _depth(skeleton, counted, start)
        counted = start
        if depth > 0:
            continue
        out[start:end] = b" " * (end - start)
    return bytes(out)


def _assigned_text(data: bytes, start: int, text: bytes) -> bool:
    """A multi-line triple-quoted string right after ``NAME =`` at the start of its line."""
    body = text.lstrip(b"rRbBuU")
    if not body.startswith((b'"""', b"'''")) or b"\n" not in body:
        return False
    line_start = data.rfind(b"\n", 0, start) + 1
    return _ASSIGNED.fullmatch(data, line_start, start) is not None and _at_line_start(data, line_start)


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
