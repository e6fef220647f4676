"""Byte-level searches the cheap tests before a parse share (prefilter, wake tests, the sweep).

Trap they exist for: a pattern that starts with ``\\b`` or a look-behind makes the regular-expression
engine try every byte of a file; a pattern that starts with a literal lets it skip to that literal,
and the boundary before the match is then read back by hand, here.
"""

from __future__ import annotations

import re

__all__ = ["WORD_BYTES", "search_unjoined"]

# ``\w`` of a bytes pattern.
WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def search_unjoined(pattern: re.Pattern[bytes], data: bytes, word_bytes: frozenset[int] = WORD_BYTES) -> bool:
    """Does ``pattern`` match in ``data`` where no byte of ``word_bytes`` comes right before the
    match (what a leading ``\\b`` before a word would ask)?"""
    found = pattern.search(data)
    while found is not None:
        start = found.start()
        if start == 0 or data[start - 1] not in word_bytes:
            return True
        found = pattern.search(data, start + 1)
    return False
