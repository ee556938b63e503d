"""The splitter of the Kafka byte stream: frames whole, whatever the reads cut."""

from __future__ import annotations

import struct

import pytest

from protocol.framing import FrameError, FrameSplitter


def _framed(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(body)) + body for body in bodies)


def test_frames_cut_anywhere_come_out_whole_and_in_order() -> None:
    bodies = [b"a" * 70_000, b"", b"bc", b"d" * 300]
    stream = _framed(*bodies)
    for step in (1, 3, 4096, 65_536, len(stream)):
        splitter = FrameSplitter(max_frame_bytes=1 << 20)
        frames: list[bytes] = []
        for start in range(0, len(stream), step):
            frames += splitter.feed(stream[start : start + step])
        assert frames == bodies, step
        assert splitter.buffered == 0
        assert all(type(frame) is bytes for frame in frames)


def test_a_partial_frame_stays_buffered() -> None:
    splitter = FrameSplitter(max_frame_bytes=100)
    assert splitter.feed(_framed(b"one") + struct.pack(">i", 5) + b"tw") == [b"one"]
    assert splitter.buffered == 6
    assert splitter.feed(b"o!!") == [b"two!!"]


@pytest.mark.parametrize("size", [-1, 101])
def test_an_impossible_size_is_refused(size: int) -> None:
    with pytest.raises(FrameError, match=r"outside 0\.\.100"):
        FrameSplitter(max_frame_bytes=100).feed(struct.pack(">i", size))
