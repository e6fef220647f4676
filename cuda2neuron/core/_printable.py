"""Text from the files we read, made safe to show: a file name may hold any byte but ``/``.

A name with ESC in it, printed raw, is a terminal escape sequence (it can move the cursor, retitle
the window, hide the lines above it); one with \\x01 makes JUnit XML that no parser reads (XML 1.0
forbids most control characters, even as character references). So every control character but
tab and newline is shown as Python writes it in a string (``\\x1b``), on the screen and in XML.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls but tab and newline, DEL, C1 controls; and what XML 1.0 never allows: the
# surrogates a name decoded with surrogateescape carries, and U+FFFE / U+FFFF.
_UNSHOWABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` with each control character written as its ``\\xNN`` / ``\\uNNNN`` escape."""
    if not _UNSHOWABLE.search(text):
        return text
    return _UNSHOWABLE.sub(lambda m: ascii(m.group())[1:-1], text)
