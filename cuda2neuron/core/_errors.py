"""Typed failures of reading one file: each becomes that file's ``FileError``, never a crash."""

from __future__ import annotations

__all__ = ["SourceError"]


class SourceError(Exception):
    def __init__(self, kind: str, message: str, line: int | None = None, col: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line
        self.col = col
