"""Length-prefixed pickle frames between the validate parent and its run subprocesses.

Records travel through a dedicated pipe (not stdout: user code prints there) one frame at a
time, so the parent compares tensors as they are produced and never holds a whole run on disk.
"""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any, BinaryIO

__all__ = ["MAX_FRAME", "read_frame", "write_frame", "FrameError"]

_HEADER = struct.Struct("!Q")
# No record comes near this (a tensor record holds one tensor).
MAX_FRAME = 16 << 30


class FrameError(Exception):
    """The peer closed the pipe in the middle of a frame (it crashed or was killed)."""


def write_frame(stream: BinaryIO, obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    buf = io.BytesIO()
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            if remaining == n:
                return None
            raise FrameError(f"pipe closed after {n - remaining} of {n} bytes")
        buf.write(chunk)
        remaining -= len(chunk)
    return buf.getvalue()


def read_frame(stream: BinaryIO) -> Any | None:
    """The next object, or None at a clean end of stream."""
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        # Not a frame of ours: bytes from elsewhere in the stream (the worker's stdin was once
        # this pipe, and user code that read it ate frames: "MemoryError" on an 8-exabyte read).
        raise FrameError(f"corrupt record stream: a frame header announces {size} bytes")
    payload = _read_exact(stream, size)
    if payload is None:
        raise FrameError("pipe closed between a frame header and its payload")
    try:
        return pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001 - any undecodable frame is a broken stream
        raise FrameError(f"corrupt record stream: {type(exc).__name__}: {exc}") from None
