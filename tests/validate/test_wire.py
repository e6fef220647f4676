"""Frames between validate and its runs (`_wire.py`): a frame comes back as it was sent, a clean
end of stream is None, and every torn or foreign stream is a FrameError naming what it saw."""

from __future__ import annotations

import io
import struct

import pytest

from cuda2neuron.validate._wire import FrameError, read_frame, write_frame


class _Trickle(io.RawIOBase):
    """A pipe that hands out at most ``step`` bytes per read, as a pipe under load does."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._at, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # noqa: ANN001 - a writable buffer
        n = min(len(b), self._step, len(self._data) - self._at)
        b[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n


def _frames(*objs) -> bytes:
    out = io.BytesIO()
    for obj in objs:
        write_frame(out, obj)
    return out.getvalue()


RECORD = {"type": "tensor", "key": "s0/grad/0:w", "data": bytearray(range(256)) * 1000, "shape": [256000]}
# A frame: header (12 bytes), one buffer length (8), the pickle, then the record's 256,000 bytes.
WHOLE = _frames(RECORD)


@pytest.mark.parametrize("step", [1, 7, 4096, 1 << 20], ids=["byte-by-byte", "odd-chunks", "page", "whole"])
def test_frames_come_back_as_sent_however_the_pipe_splits_them(step):
    stream = io.BufferedReader(_Trickle(_frames(RECORD, {"type": "done", "small": b"xy"}), step))
    assert read_frame(stream) == RECORD
    assert read_frame(stream) == {"type": "done", "small": b"xy"}
    assert read_frame(stream) is None  # a clean end of stream


def test_tensor_bytes_travel_out_of_band_and_arrive_writable():
    # not copied into the pickle: the frame is the bytes plus a few dozen of bookkeeping
    assert len(RECORD["data"]) < len(WHOLE) < len(RECORD["data"]) + 200
    got = read_frame(io.BufferedReader(io.BytesIO(WHOLE)))
    assert isinstance(got["data"], bytearray) and got["data"] == RECORD["data"]


def test_a_forwarded_record_travels_out_of_band_again():
    got = read_frame(io.BufferedReader(io.BytesIO(WHOLE)))
    again = _frames(got)
    assert len(again) < len(RECORD["data"]) + 200
    assert read_frame(io.BufferedReader(io.BytesIO(again))) == RECORD


# (id, the stream's bytes, the error's words)
TORN = [
    ("header-cut", WHOLE[:5], "pipe closed after 5 of 12 bytes"),
    ("buffer-cut", WHOLE[:-10], f"pipe closed after {len(RECORD['data']) - 10} of {len(RECORD['data'])} bytes"),
    ("header-only", WHOLE[:20], "between a frame header and its payload"),
    ("foreign-bytes", b"\xff" * 16, "corrupt record stream: a frame header announces"),
    ("not-a-pickle", struct.pack("!QI", 4, 0) + b"abcd", "corrupt record stream: UnpicklingError"),
]


@pytest.mark.parametrize(("data", "words"), [t[1:] for t in TORN], ids=[t[0] for t in TORN])
def test_a_torn_or_foreign_stream_is_a_frame_error(data, words):
    with pytest.raises(FrameError, match=words):
        read_frame(io.BufferedReader(_Trickle(data, 3)))


def test_large_bytes_come_back_as_bytes():
    frame = {"type": "note", "blob": bytes(10_000)}
    got = read_frame(io.BufferedReader(io.BytesIO(_frames(frame))))
    assert got == frame and type(got["blob"]) is bytes
