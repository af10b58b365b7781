"""pylog.protocol.framing: size-prefixed frame reassembly, limits, zero copy."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import FrameTooLargeError, RemoteProtocolError
from pylog.protocol.framing import MAX_FRAME_SIZE, FrameReader, frame


def test_max_frame_size_is_socket_request_max_bytes() -> None:
    assert MAX_FRAME_SIZE == 104857600


def test_whole_frames_in_one_chunk_are_views_without_copy() -> None:
    data = frame(b"first") + frame(b"") + frame(b"second")
    r = FrameReader()
    r.feed(data)
    a = r.next_frame()
    assert a == b"first" and a.obj is data
    assert r.next_frame() == b""
    assert r.next_frame() == b"second"
    assert r.next_frame() is None and r.buffered == 0


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 64])
def test_any_split_gives_the_same_frames(step: int) -> None:
    payloads = [b"a" * n for n in (0, 1, 3, 4, 5, 100)]
    data = b"".join(frame(p) for p in payloads)
    r = FrameReader()
    got = []
    for i in range(0, len(data), step):
        r.feed(data[i : i + step])
        while (f := r.next_frame()) is not None:
            got.append(bytes(f))
    assert got == payloads and r.buffered == 0


def test_feed_accepts_any_buffer_and_ignores_empty() -> None:
    r = FrameReader()
    r.feed(b"")
    r.feed(bytearray(frame(b"xy")))
    r.feed(memoryview(frame(b"z")))
    assert r.next_frame() == b"xy" and r.next_frame() == b"z"


def test_negative_size_is_broken_framing() -> None:
    r = FrameReader()
    r.feed(struct.pack(">i", -1))
    with pytest.raises(RemoteProtocolError, match="negative"):
        r.next_frame()


def test_oversized_frame_refused_from_the_prefix_alone() -> None:
    r = FrameReader(max_frame_size=1000)
    r.feed(struct.pack(">i", 1001)[:2])
    assert r.next_frame() is None
    r.feed(struct.pack(">i", 1001)[2:])  # nothing of the body has arrived
    with pytest.raises(FrameTooLargeError, match="socket.request.max.bytes"):
        r.next_frame()
    ok = FrameReader(max_frame_size=1000)
    ok.feed(frame(b"x" * 1000))
    assert len(ok.next_frame()) == 1000


def test_default_limit_allows_100_mib_and_refuses_more() -> None:
    r = FrameReader()
    r.feed(struct.pack(">i", MAX_FRAME_SIZE))
    assert r.next_frame() is None  # legal, waiting for the body
    r2 = FrameReader()
    r2.feed(struct.pack(">i", MAX_FRAME_SIZE + 1))
    with pytest.raises(FrameTooLargeError):
        r2.next_frame()


def test_partial_frame_waits_and_buffered_counts() -> None:
    r = FrameReader()
    data = frame(b"hello")
    r.feed(data[:6])
    assert r.next_frame() is None and r.buffered == 6
    r.feed(data[6:])
    assert r.next_frame() == b"hello"
