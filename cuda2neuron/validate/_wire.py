"""Length-prefixed pickle frames between the validate parent and its run subprocesses.

Records travel through a dedicated pipe (not stdout: user code prints there) one frame at a
time, so the parent compares tensors as they are produced and never holds a whole run on disk.

A frame is a header (the pickle's length, the number of out-of-band buffers and their lengths),
the pickle, then the buffers: the tensor bytes of a record (anything ``bytes``/``bytearray`` of
``_OUT_OF_BAND`` bytes or more) go out of band (pickle protocol 5), written from where they are
and read straight into the ``bytearray`` the unpickled record holds — no copy into or out of the
pickle. A real model's records are gigabytes per validate (RetinaNet: 5 runs, and the
original's weights and gradients forwarded to four others); each copy of them cost seconds.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, BinaryIO

__all__ = ["MAX_FRAME", "read_frame", "write_frame", "FrameError"]

_HEADER = struct.Struct("!QI")  # pickle length, number of out-of-band buffers
_LENGTH = struct.Struct("!Q")
# No record comes near this (a tensor record holds one tensor).
MAX_FRAME = 16 << 30
# Smaller byte strings stay in the pickle: a buffer of its own costs a header entry and a read.
_OUT_OF_BAND = 1 << 12


class FrameError(Exception):
    """The peer closed the pipe in the middle of a frame (it crashed or was killed)."""


def _walk(obj: Any, leaf: Any) -> Any:
    """``obj`` with ``leaf`` applied to every value that is not a dict, list or tuple (what
    frames are made of; a shallow copy of those)."""
    kind = type(obj)
    if kind is dict:
        return {k: _walk(v, leaf) for k, v in obj.items()}
    if kind is list:
        return [_walk(v, leaf) for v in obj]
    if kind is tuple:
        return tuple(_walk(v, leaf) for v in obj)
    return leaf(obj)


def _out_of_band(value: Any) -> Any:
    # The pickler writes bytes and bytearray in band itself, before any hook could say
    # otherwise: wrapped, they go out of band. A bytearray (a record's tensor bytes) comes back
    # as the reader's bytearray, writable; bytes come back as a read-only view (see read_frame).
    if type(value) in (bytes, bytearray) and len(value) >= _OUT_OF_BAND:
        return pickle.PickleBuffer(value)
    return value


def _as_sent(value: Any) -> Any:
    return bytes(value) if type(value) is memoryview else value


def write_frame(stream: BinaryIO, obj: Any) -> None:
    buffers: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(_walk(obj, _out_of_band), protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    stream.write(_HEADER.pack(len(meta), len(raws)) + b"".join(_LENGTH.pack(r.nbytes) for r in raws))
    stream.write(meta)
    for raw in raws:
        stream.write(raw)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytearray | None:
    # Straight into one buffer of the frame's size: collecting chunks and joining them copied
    # every byte twice more, and the records of a real model are gigabytes per validate.
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        count = stream.readinto(view[got:])  # type: ignore[attr-defined]
        if not count:
            if got == 0:
                return None
            raise FrameError(f"pipe closed after {got} of {n} bytes")
        got += count
    return buf


def read_frame(stream: BinaryIO) -> Any | None:
    """The next object, or None at a clean end of stream."""
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    size, count = _HEADER.unpack(header)
    lengths: list[int] = []
    if size <= MAX_FRAME and count:
        table = _read_exact(stream, _LENGTH.size * count) if count <= MAX_FRAME // _OUT_OF_BAND else None
        if table is None:
            raise FrameError(f"corrupt record stream: a frame header announces {count} buffers")
        lengths = [n for (n,) in _LENGTH.iter_unpack(table)]
    if size + sum(lengths) > MAX_FRAME:
        # Not a frame of ours: bytes from elsewhere in the stream (the worker's stdin was once
        # this pipe, and user code that read it ate frames: "MemoryError" on an 8-exabyte read).
        raise FrameError(f"corrupt record stream: a frame header announces {size + sum(lengths)} bytes")
    payload = _read_exact(stream, size)
    buffers = [_read_exact(stream, n) if n else bytearray() for n in lengths]
    if payload is None or any(b is None for b in buffers):
        raise FrameError("pipe closed between a frame header and its payload")
    try:
        obj = pickle.loads(payload, buffers=buffers)
    except Exception as exc:  # noqa: BLE001 - any undecodable frame is a broken stream
        raise FrameError(f"corrupt record stream: {type(exc).__name__}: {exc}") from None
    # bytes sent out of band arrive as read-only views: bytes again (a copy; records hold
    # bytearrays, which arrive as themselves).
    return _walk(obj, _as_sent) if _has_view(obj) else obj


def _has_view(obj: Any) -> bool:
    kind = type(obj)
    if kind is memoryview:
        return True
    if kind is dict:
        return any(_has_view(v) for v in obj.values())
    if kind in (list, tuple):
        return any(_has_view(v) for v in obj)
    return False
