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


def test_frames_joined_from_several_chunks_are_writable() -> None:
    r = FrameReader()
    data = frame(b"abcdef")
    r.feed(data[:5])
    r.feed(data[5:])
    f = r.next_frame()
    assert f == b"abcdef" and not f.readonly  # Log.append may assign offsets in place


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


# --- large frames received in place (receive_buffer / received_into) -------------------


def _recv_into(r: FrameReader, data: bytes, step: int) -> list[memoryview]:
    """Deliver ``data`` as a socket would: into receive_buffer() when offered, else feed()."""
    frames = []
    pos = 0
    while pos < len(data):
        view = r.receive_buffer()
        if view is None:
            r.feed(data[pos : pos + step])
            pos += step
        else:
            with view:
                n = min(step, len(view), len(data) - pos)
                view[:n] = data[pos : pos + n]
            r.received_into(n)
            pos += n
        while (f := r.next_frame()) is not None:
            frames.append(f)
    return frames


@pytest.mark.parametrize("step", [3, 1000, 65536, 2_000_000])
def test_large_frames_are_received_in_place_and_writable(step: int) -> None:
    from pylog.protocol.framing import DIRECT_MIN

    payloads = [b"s" * 10, bytes(range(256)) * (5 * DIRECT_MIN // 256 + 7), b"", b"m" * 200_000, b"t"]
    data = b"".join(frame(p) for p in payloads)
    r = FrameReader()
    got = _recv_into(r, data, step)
    assert [bytes(f) for f in got] == payloads and r.buffered == 0
    big = got[1]
    if step >= len(data):  # all in one received chunk: a view of it, no copy either
        assert big.obj is not None and len(big.obj) == len(data)
        return
    assert type(big.obj) is bytearray and not big.readonly  # no join, no copy
    big[0:2] = b"ok"  # a consumer may rewrite it in place (Log.append assigns offsets)
    assert bytes(big[:2]) == b"ok"


def test_frame_over_direct_max_grows_as_bytes_arrive() -> None:
    from pylog.protocol import framing

    payload = bytes(range(256)) * ((framing.DIRECT_MAX * 2 + 12345) // 256)
    r = FrameReader()
    r.feed(frame(payload)[:10])
    view = r.receive_buffer()
    assert view is not None and len(view) <= framing.DIRECT_MAX  # not the announced size
    view.release()
    got = _recv_into(r, frame(payload)[10:], 1 << 20)
    assert len(got) == 1 and got[0] == payload


def test_announced_size_alone_allocates_at_most_direct_max() -> None:
    from pylog.protocol import framing

    r = FrameReader()
    r.feed(struct.pack(">i", MAX_FRAME_SIZE))
    view = r.receive_buffer()
    assert view is not None and len(view) == framing.DIRECT_MAX - 4
    view.release()
    assert r.next_frame() is None and r.buffered == 4


def test_feed_during_an_in_place_frame_completes_it_and_keeps_the_rest() -> None:
    from pylog.protocol.framing import DIRECT_MIN

    big = b"b" * (DIRECT_MIN * 2)
    data = frame(big) + frame(b"next") + frame(b"last")
    r = FrameReader()
    r.feed(data[:100])
    assert r.receive_buffer() is not None
    r.feed(data[100:])  # e.g. a caller that ignores receive_buffer
    assert r.next_frame() == big
    assert r.next_frame() == b"next" and r.next_frame() == b"last" and r.buffered == 0


def test_small_and_invalid_sizes_take_the_feed_path() -> None:
    r = FrameReader()
    assert r.receive_buffer() is None
    r.feed(frame(b"x" * 1000)[:10])
    assert r.receive_buffer() is None  # small: joined as before
    r2 = FrameReader(max_frame_size=1 << 20)
    r2.feed(struct.pack(">i", (1 << 20) + 1))
    assert r2.receive_buffer() is None
    with pytest.raises(FrameTooLargeError):
        r2.next_frame()
    r3 = FrameReader()
    r3.feed(struct.pack(">i", -5))
    assert r3.receive_buffer() is None
    with pytest.raises(RemoteProtocolError):
        r3.next_frame()


def test_received_into_must_match_the_buffer() -> None:
    from pylog.protocol.framing import DIRECT_MIN

    r = FrameReader()
    with pytest.raises(ValueError):
        r.received_into(1)  # no buffer handed out
    r.feed(struct.pack(">i", DIRECT_MIN * 2))
    view = r.receive_buffer()
    assert view is not None
    n = len(view)
    view.release()
    with pytest.raises(ValueError):
        r.received_into(n + 1)
    with pytest.raises(ValueError):
        r.received_into(-1)


def test_the_buffer_of_a_released_frame_is_reused_and_a_held_one_is_not() -> None:
    from pylog.protocol.framing import DIRECT_MIN

    big1, big2, big3 = (bytes([i]) * (12 * DIRECT_MIN + i) for i in (1, 3, 2))  # big3 fits in big2
    r = FrameReader()
    (f1,) = _recv_into(r, frame(big1), 50_000)
    (f2,) = _recv_into(r, frame(big2), 50_000)
    assert f2.obj is not f1.obj and f1 == big1  # f1 still alive: its buffer is left alone
    id2 = id(f2.obj)
    del f1, f2
    (f3,) = _recv_into(r, frame(big3), 50_000)
    assert f3 == big3 and len(f3) == len(big3)
    assert id(f3.obj) == id2  # released, long enough: reused
    f3[0:1] = b"!"  # still writable
    small = b"s" * (DIRECT_MIN + 10)
    got = _recv_into(r, frame(small) + frame(b"tail"), 1000)
    assert [bytes(g) for g in got] == [small, b"tail"] and r.buffered == 0


def test_admission_holds_each_frame_until_admitted() -> None:
    r = FrameReader(admission=True)
    assert r.awaiting_admission == -1
    r.feed(frame(b"one") + frame(b"two!")[:3])
    assert r.awaiting_admission == 3
    assert r.next_frame() is None  # not admitted yet
    r.admit()
    assert r.awaiting_admission == -1
    assert r.next_frame() == b"one"
    assert r.awaiting_admission == -1  # the next prefix is incomplete
    r.feed(frame(b"two!")[3:])
    assert r.awaiting_admission == 4 and r.next_frame() is None
    with pytest.raises(ValueError):
        FrameReader(admission=True).admit()
    r.admit()
    assert r.next_frame() == b"two!" and r.awaiting_admission == -1


def test_admission_comes_before_the_large_frame_buffer() -> None:
    payload = bytes(range(256)) * 1024  # 256 KiB: received in place
    data = frame(payload)
    r = FrameReader(admission=True)
    r.feed(data[:10])
    assert r.receive_buffer() is None  # no buffer before admission
    assert r.awaiting_admission == len(payload)
    r.admit()
    view = r.receive_buffer()
    assert view is not None and len(view) == len(data) - 10
    with view:
        view[:] = data[10:]
    r.received_into(len(data) - 10)
    assert r.next_frame() == payload


def test_bad_sizes_are_not_offered_for_admission() -> None:
    r = FrameReader(max_frame_size=100, admission=True)
    r.feed(struct.pack(">i", 101))
    assert r.awaiting_admission == -1
    with pytest.raises(FrameTooLargeError):
        r.next_frame()


def test_several_spares_reuse_whichever_buffer_is_released_and_never_a_held_one() -> None:
    """``spares=3`` (a client connection): buffers of held frames stay untouched; the first
    released one long enough is reused; at most three are kept (the oldest is dropped)."""
    from pylog.protocol.framing import DIRECT_MIN

    size = 12 * DIRECT_MIN
    r = FrameReader(spares=3)
    frames = [_recv_into(r, frame(bytes([i]) * size), 50_000)[0] for i in range(3)]
    buffers = [f.obj for f in frames]
    assert len({id(b) for b in buffers}) == 3 and r.spare_bytes == 3 * (4 + size)
    held = frames[1]
    ids = [id(b) for b in buffers]
    del frames, buffers
    (f,) = _recv_into(r, frame(b"\x07" * size), 50_000)
    assert id(f.obj) == ids[0] and held == b"\x01" * size  # the oldest released one
    (g,) = _recv_into(r, frame(b"\x08" * size), 50_000)
    assert id(g.obj) == ids[2] and held == b"\x01" * size  # not the held one
    (h,) = _recv_into(r, frame(b"\x09" * size), 50_000)
    assert id(h.obj) not in ids and held == b"\x01" * size  # all three spares held: a new one
    assert f == b"\x07" * size and g == b"\x08" * size
    r.drop_spare()
    assert r.spare_bytes == 0
