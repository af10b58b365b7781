"""Size-prefixed frames: Kafka's TCP framing, sans-IO.

Layout (https://kafka.apache.org/protocol.html#protocol_common)::

    offset 0   int32  size     bytes that follow (header + body), big-endian
    offset 4   size bytes      request or response header, then the body

A size below 0, or above ``max_frame_size`` (the broker's ``socket.request.max.bytes``,
100 MiB by default, as in Kafka's ``SocketServerConfigs``), is broken framing: there is no
way to find the next frame, so the connection must close. Kafka checks the size before
allocating anything (``NetworkReceive.readFrom``); so does ``FrameReader``: memory held is
bounded by the bytes actually received, never by a size a peer announces.

Zero copy where possible: when a whole frame sits inside one received chunk, the frame is
a ``memoryview`` slice of that (immutable) ``bytes`` chunk; only frames split across
chunks are joined, once.

Large frames (produce requests of up to a megabyte or more) skip that join: once the size
prefix of a frame with at least ``DIRECT_MIN`` bytes still to come is known,
``receive_buffer()`` hands out a writable view of a buffer of the frame's size (the bytes
already received copied in) for the caller to ``recv_into``, and ``received_into(n)``
records what arrived. The completed frame is then a *writable* view of that buffer, so a
consumer that rewrites the frame in place (``logcore.Log.append`` assigns offsets in the
record batch) needs no copy either. The buffer is allocated up front only up to
``DIRECT_MAX`` bytes (a peer that announces a large frame and stalls holds at most that
much); larger frames grow it as their bytes arrive, doubling. Once nothing refers to a
completed frame any more (its views are gone), its buffer is reused for the next large
frame: up to ``spares`` buffers of at most ``DIRECT_MAX`` bytes per reader (one by
default: the broker's produce requests), which saves zeroing and page-faulting a fresh
megabyte per frame. A consumer keeps a fetch's data while the next one (a prefetch) is
received, and columns may point into a response for as long as the application holds
them, so the client's connections keep a few (``ClientConnection``).

Admission (memory bounds, Kafka's ``MemoryPool``): with ``admission=True`` no frame is
buffered beyond what was received, or returned, before the caller admits it. Once a
frame's 4-byte size prefix is known, ``awaiting_admission`` gives its size; the caller
takes that many bytes from its memory pool (waiting, and not reading this peer, while the
pool or the connection's share is exhausted) and calls ``admit()``. Only then does
``receive_buffer`` allocate the frame's buffer and ``next_frame`` return it. The caller
must not read from the peer while a frame awaits admission, so what a peer can make the
reader hold before admission is one receive (the bytes already read with the prefix).
"""

from __future__ import annotations

import collections
import struct
import sys
from typing import Any

from pylog.errors import FrameTooLargeError, RemoteProtocolError

__all__ = ["MAX_FRAME_SIZE", "FrameReader", "frame"]

# socket.request.max.bytes default: 100 MiB.
MAX_FRAME_SIZE = 100 * 1024 * 1024

_size = struct.Struct(">i")

# Frames with at least this many bytes still to come are received in place.
DIRECT_MIN = 16 * 1024
# At most this much is allocated ahead of the bytes received.
DIRECT_MAX = 4 * 1024 * 1024


class FrameReader:
    """Reassembles frames from a byte stream (``feed`` chunks in, ``next_frame`` out).

    Not thread-safe: owned by one connection on one event loop.
    """

    __slots__ = ("max_frame_size", "_chunks", "_off", "_avail", "_direct", "_direct_size",
                 "_direct_filled", "_spares", "_max_spares", "_admission", "_admitted")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE, *, admission: bool = False,
                 spares: int = 1) -> None:
        self.max_frame_size = max_frame_size
        # With admission, the frame at the head of the stream is served only once admitted
        # (see the module docstring); without, every frame counts as admitted.
        self._admission = admission
        self._admitted = not admission
        self._chunks: collections.deque[Any] = collections.deque()
        self._off = 0  # read position inside _chunks[0]
        self._avail = 0  # bytes buffered and not yet returned
        # The frame being received in place (receive_buffer): buffer, whole frame size
        # (prefix included) and bytes in it so far. Nothing else is buffered meanwhile.
        self._direct: bytearray | None = None
        self._direct_size = 0
        self._direct_filled = 0
        # Buffers of the last in-place frames (oldest first, at most ``spares``), each
        # reused when nothing refers to it any more.
        self._spares: list[bytearray] = []
        self._max_spares = spares

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._avail

    @property
    def awaiting_admission(self) -> int:
        """The size of the next frame (without its prefix) when its size prefix has arrived,
        the size is valid and the frame is not admitted yet; else -1."""
        if self._admitted or self._avail < 4:
            return -1
        size = self._peek_size()
        if size < 0 or size > self.max_frame_size:
            return -1  # next_frame reports it
        return size

    def admit(self) -> None:
        """Admit the frame ``awaiting_admission`` names (its memory has been reserved).

        Raises:
            ValueError: no frame awaits admission.
        """
        if self.awaiting_admission < 0:
            raise ValueError("no frame awaits admission")
        self._admitted = True

    @property
    def spare_bytes(self) -> int:
        """Size of the buffer kept for reuse by the next large frame (0 when none); a
        caller that bounds memory counts it, or calls ``drop_spare``."""
        return sum(len(b) for b in self._spares)

    def drop_spare(self) -> None:
        """Forget the buffers kept for reuse (freed once no frame view refers to them)."""
        self._spares = []

    def feed(self, data: Any) -> None:
        """Append received bytes (``bytes`` is kept as is, other buffers are copied once)."""
        if not data:
            return
        if type(data) is not bytes:
            data = bytes(data)
        if self._direct is not None:
            self._fill_direct(memoryview(data))
            return
        self._chunks.append(data)
        self._avail += len(data)

    def receive_buffer(self) -> memoryview | None:
        """Where the next received bytes should go, or None (then ``feed`` them).

        Not None only while a large frame is incomplete (``DIRECT_MIN`` bytes or more still
        to come, a valid size prefix): a writable view, at most the rest of that frame, so
        a ``recv_into`` never reads past it. Fill it, release it, then call
        ``received_into(n)``.
        """
        if self._direct is None:
            if self._avail < 4 or not self._admitted:
                return None
            size = self._peek_size()
            if size < 0 or size > self.max_frame_size or 4 + size - self._avail < DIRECT_MIN:
                return None  # next_frame reports bad sizes; small frames take the feed path
            total = 4 + size
            alloc = min(total, max(DIRECT_MAX, self._avail))
            buf = None
            for i in range(len(self._spares)):  # (enumerate's reused tuple would hold a ref)
                spare = self._spares[i]
                # Free when only the list, ``spare`` and getrefcount's argument refer to it.
                if len(spare) >= alloc and sys.getrefcount(spare) == 3:
                    buf = self._spares.pop(i)
                    break
            if buf is None:
                buf = bytearray(alloc)
            pos = 0
            off = self._off
            for chunk in self._chunks:  # all of it belongs to this (incomplete) frame
                n = len(chunk) - off
                buf[pos : pos + n] = memoryview(chunk)[off:]
                pos += n
                off = 0
            self._chunks.clear()
            self._off = 0
            self._direct = buf
            self._direct_size = total
            self._direct_filled = pos
        buf = self._direct
        filled = self._direct_filled
        total = self._direct_size
        if filled == len(buf):  # a frame over DIRECT_MAX: grow as its bytes arrive
            buf.extend(bytes(min(total, 2 * len(buf)) - len(buf)))
        return memoryview(buf)[filled:total]

    def received_into(self, n: int) -> None:
        """Record ``n`` bytes written at the start of the last ``receive_buffer()`` view."""
        buf = self._direct
        if buf is None or n < 0 or self._direct_filled + n > min(len(buf), self._direct_size):
            raise ValueError(f"received_into({n}) does not match the receive buffer")
        self._direct_filled += n
        self._avail += n
        total = self._direct_size
        if self._direct_filled == total:
            # A reused spare may be longer than this frame: queue exactly the frame.
            self._chunks.append(buf if len(buf) == total else memoryview(buf)[:total])
            self._direct = None
            if len(buf) <= DIRECT_MAX and self._max_spares > 0:
                if len(self._spares) >= self._max_spares:
                    del self._spares[0]
                self._spares.append(buf)

    def _fill_direct(self, data: memoryview) -> None:
        """``feed`` while a frame is received in place: copy into it, queue the rest."""
        while data:
            view = self.receive_buffer()
            if view is None:  # the frame completed: the rest goes the usual way
                self.feed(bytes(data))
                return
            with view:
                n = min(len(view), len(data))
                view[:n] = data[:n]
            self.received_into(n)
            data = data[n:]

    def _take(self, n: int) -> memoryview:
        """Remove and return the next ``n`` buffered bytes (a view when in one chunk)."""
        first = self._chunks[0]
        off = self._off
        if len(first) - off >= n:
            view = memoryview(first)[off : off + n]
            off += n
            if off == len(first):
                self._chunks.popleft()
                off = 0
            self._off = off
            self._avail -= n
            return view
        parts = []
        need = n
        while need:
            chunk = self._chunks[0]
            take = min(len(chunk) - off, need)
            parts.append(memoryview(chunk)[off : off + take])
            need -= take
            if off + take == len(chunk):
                self._chunks.popleft()
                off = 0
            else:
                off += take
        self._off = off
        self._avail -= n
        # A bytearray: writable like an in-place frame (Log.append then needs no copy).
        return memoryview(bytearray().join(parts))

    def _peek_size(self) -> int:
        first = self._chunks[0]
        if len(first) - self._off >= 4:
            return _size.unpack_from(first, self._off)[0]
        head = bytearray()
        off = self._off
        for chunk in self._chunks:
            head += chunk[off : off + 4 - len(head)]
            off = 0
            if len(head) == 4:
                break
        return _size.unpack(head)[0]

    def next_frame(self) -> memoryview | None:
        """The next complete frame's payload (without its size prefix), or None.

        Raises:
            FrameTooLargeError: the size prefix exceeds ``max_frame_size``.
            RemoteProtocolError: the size prefix is negative.
        """
        if self._avail < 4 or self._direct is not None:
            return None
        size = self._peek_size()
        if not self._admitted and 0 <= size <= self.max_frame_size:
            return None  # awaiting admission
        if size < 0:
            raise RemoteProtocolError(f"frame size {size} is negative")
        if size > self.max_frame_size:
            raise FrameTooLargeError(
                f"frame size {size} exceeds the limit of {self.max_frame_size} bytes"
                " (socket.request.max.bytes)"
            )
        if self._avail < 4 + size:
            return None
        first = self._chunks[0]
        off = self._off
        if len(first) - off >= 4 + size:
            # Whole frame inside one chunk: a view, no copy.
            view = memoryview(first)[off + 4 : off + 4 + size]
            off += 4 + size
            if off == len(first):
                self._chunks.popleft()
                off = 0
            self._off = off
            self._avail -= 4 + size
            self._admitted = not self._admission
            return view
        self._admitted = not self._admission
        return self._take(4 + size)[4:]


def frame(payload: Any) -> bytes:
    """One frame: int32 size prefix then ``payload`` (a test and client convenience)."""
    return _size.pack(len(payload)) + bytes(payload)
