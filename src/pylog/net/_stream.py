"""The byte mover under ``BrokerConnection``: an asyncio ``BufferedProtocol`` that receives
straight into the frame being read.

Why not ``asyncio.StreamReader``: a stream copies every received byte three times before
the codec sees it (the transport's ``recv`` into a new ``bytes``, that appended to the
reader's ``bytearray``, ``read()`` copying it out again and shifting the rest), and the
codec's ``FrameReader`` copies large frames once more into the frame's own buffer. A
consumer reading 10 KiB records spent a fifth of its CPU in those ``memmove`` calls
(perf, benchmarks/RESULTS.md "Consume path cost"). Here the transport's ``recv_into``
writes a large frame (a fetch response) directly into the buffer ``FrameReader.receive_buffer``
hands out, where the records are then read in place; small frames and the head of a large
one go through a scratch buffer and ``receive_data`` (one copy, as before).

Writes go to the transport; ``drain()`` waits while the transport's write buffer is over
its high-water mark (``pause_writing``/``resume_writing``), as ``StreamWriter.drain`` does.

Event-loop affinity: the protocol and its owner belong to the loop that made the connection.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

__all__ = ["StreamOwner", "ResponseStream"]

#: Scratch receive size for frames not received in place and the heads of large ones: a
#: large frame's first bytes are copied twice (scratch, then its own buffer), so this stays
#: at FrameReader's DIRECT_MIN: the rest of any larger frame is received in place.
SCRATCH_SIZE = 16 * 1024


class StreamOwner(Protocol):
    """What the stream calls back (``BrokerConnection``)."""

    def receive_buffer(self) -> memoryview | None: ...

    def received_into(self, n: int) -> None: ...

    def receive_data(self, data: bytes) -> None: ...

    def connection_lost(self, exc: BaseException | None) -> None: ...


class ResponseStream(asyncio.BufferedProtocol):
    """Receives into the owner's frame buffers; flow control for the owner's writes."""

    def __init__(self, owner: StreamOwner) -> None:
        self._owner = owner
        # A memoryview, not the bytearray: the TLS transport fills what get_buffer returns
        # piecewise through slices of it, and a slice of a bytearray is a copy.
        self._scratch = memoryview(bytearray(SCRATCH_SIZE))
        self._in_place = False  # the last get_buffer handed out the owner's frame buffer
        self.transport: asyncio.Transport | None = None
        self._paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._lost = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- receiving ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> Any:
        view = self._owner.receive_buffer()
        if view is not None:
            self._in_place = True
            return view
        self._in_place = False
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        if self._in_place:
            self._owner.received_into(nbytes)
        else:
            self._owner.receive_data(self._scratch[:nbytes].tobytes())

    def eof_received(self) -> bool:
        self._owner.receive_data(b"")
        return False  # the transport closes itself

    def connection_lost(self, exc: BaseException | None) -> None:
        self._lost = True
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))
            waiter.exception()  # retrieved: nobody may be waiting any more
        if not self.closed.done():
            self.closed.set_result(None)
        self._owner.connection_lost(exc)

    # -- writing ------------------------------------------------------------------------

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drain(self) -> None:
        """Wait until the transport takes more writes.

        Raises:
            ConnectionResetError: the connection is closed or was lost.
        """
        if self._lost or self.transport is None or self.transport.is_closing():
            # Let the loop run once, as StreamWriter.drain does, so that a lost connection
            # is reported through connection_lost first.
            await asyncio.sleep(0)
            raise ConnectionResetError("connection lost")
        if not self._paused:
            return
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drain_waiter)
