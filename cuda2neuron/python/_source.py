"""Turning file bytes into a libcst module and back, keeping every byte outside an edit.

libcst keeps the PEP 263 cookie, a UTF-8 BOM (as the ``utf-8-sig`` encoding) and each line's own
ending (CRLF stays CRLF), so ``module.bytes`` round-trips the input exactly. What we add here is
typed errors: undecodable bytes, NUL bytes (a binary named .py) and syntax errors become
``SourceError`` with a location instead of exceptions from deep inside the parser.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

from cuda2neuron.core import SourceError

__all__ = ["parse_bytes"]


_LOCATION_RE = re.compile(r"error at (\d+):(\d+)")


def parse_bytes(data: bytes) -> cst.Module:
    # Imported here, not at the top: callers decide from the triggers whether a file is parsed
    # at all, and most files never are.
    import libcst as cst

    if b"\x00" in data:
        raise SourceError("decode", "file contains NUL bytes (binary file?)")
    try:
        return cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        # The message's "error at L:C" is the reliable location; libcst's raw_line is off by one
        # at end of file. C is already 1-based ("a b" fails at 1:3, the `b`), except at end of
        # file where libcst writes 0; FileError.col is 1-based.
        where = _LOCATION_RE.search(exc.message)
        line, col = (int(where.group(1)), max(1, int(where.group(2)))) if where else (exc.raw_line, exc.raw_column + 1)
        raise SourceError("parse", f"syntax error: {exc.message}", line, col) from None
    except (UnicodeDecodeError, LookupError, SyntaxError) as exc:
        # LookupError: an unknown encoding named in the PEP 263 cookie.
        raise SourceError("decode", f"cannot decode source: {exc}") from None
