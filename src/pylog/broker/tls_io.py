"""TLS under the broker's raw-socket I/O (``net.py``): ``ssl.SSLObject`` over memory BIOs.

``net.py`` drives non-blocking sockets directly (``sock_recv``/``sock_sendall``/``sendfile``),
not asyncio transports, so TLS is layered by hand: bytes read from the socket go into the
incoming BIO and come out of ``SSLObject.read`` as plaintext; plaintext written with
``SSLObject.write`` comes out of the outgoing BIO as records, sent with ``sock_sendall``.

- Handshake: ``handshake()`` runs it to completion (bounded by ``HANDSHAKE_TIMEOUT_S``)
  before the connection reads its first request; a failure (a plaintext client on a TLS
  port, an untrusted or missing client certificate under ``ssl.client.auth=required``)
  raises ``ssl.SSLError`` / ``ConnectionError`` for ``net.py`` to log and close.
- Writes: one lock orders every flush of the outgoing BIO, so records written by the
  worker (responses) and by the reader (TLS 1.3 post-handshake messages) reach the socket
  in the order the TLS object produced them.
- File regions (fetch data) cannot be sendfile'd: their bytes must be encrypted in this
  process. ``write_chunks`` copies each region in ``COPY_CHUNK`` pieces (``os.pread``)
  through the TLS object; PLAINTEXT connections keep sendfile.

Event-loop affinity: the broker's loop; one object per connection.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from typing import Any

__all__ = ["COPY_CHUNK", "HANDSHAKE_TIMEOUT_S", "TlsStream"]

#: A client that has not completed its handshake by then is closed.
HANDSHAKE_TIMEOUT_S = 30.0
#: Bytes of a file region encrypted at a time (16 KiB TLS records; 1 MiB keeps the number
#: of socket writes per fetch response small without holding large copies).
COPY_CHUNK = 1 << 20
_RAW_READ = 1024 * 1024  # raw TLS bytes taken from the socket at a time


class TlsStream:
    """The TLS side of one server connection (see the module docstring)."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self._in, self._out, server_side=True)
        self._send_lock = asyncio.Lock()
        self._eof = False

    async def handshake(self) -> None:
        """Complete the server handshake.

        Raises:
            ssl.SSLError: the peer does not speak TLS or the handshake failed.
            ConnectionError: the peer closed the connection during the handshake.
            asyncio.TimeoutError: not done within ``HANDSHAKE_TIMEOUT_S``.
        """
        await asyncio.wait_for(self._handshake(), HANDSHAKE_TIMEOUT_S)

    async def _handshake(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                data = await loop.sock_recv(self.sock, _RAW_READ)
                if not data:
                    raise ConnectionError(
                        "the peer closed the connection during the TLS handshake"
                    ) from None
                self._in.write(data)
            except ssl.SSLError:
                # Send the alert OpenSSL prepared (the client learns why), then fail.
                try:
                    await self._flush()
                except OSError:
                    pass
                raise
        await self._flush()

    def peer_certificate(self) -> dict[str, Any] | None:
        """The verified client certificate, decoded (None without one)."""
        return self.obj.getpeercert() or None

    @property
    def version(self) -> str | None:
        return self.obj.version()

    # --- reading ---------------------------------------------------------------------------

    async def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes of plaintext; b"" at the end of the stream."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                return self.obj.read(size)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            if self._out.pending:
                await self._flush()
            if self._eof:
                return b""
            data = await loop.sock_recv(self.sock, _RAW_READ)
            if not data:
                self._eof = True
                self._in.write_eof()
            else:
                self._in.write(data)

    async def recv_into(self, view: memoryview) -> int:
        """Read plaintext into ``view``; 0 at the end of the stream. Takes every record
        already received (a large frame arrives as many 16 KiB records: one call, not one
        trip through the caller's read loop per record)."""
        loop = asyncio.get_running_loop()
        obj = self.obj
        n = len(view)
        got = 0
        while True:
            try:
                while got < n:
                    got += obj.read(n - got, view[got:])  # type: ignore[operator]
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return got
            if got:
                return got
            if self._out.pending:
                await self._flush()
            if self._eof:
                return 0
            data = await loop.sock_recv(self.sock, _RAW_READ)
            if not data:
                self._eof = True
                self._in.write_eof()
            else:
                self._in.write(data)

    # --- writing ---------------------------------------------------------------------------

    async def _flush(self) -> None:
        async with self._send_lock:
            data = self._out.read()
            if data:
                await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def write_chunks(self, chunks: list[Any]) -> None:
        """Encrypt and send a response: bytes-like chunks and file regions (copied)."""
        obj = self.obj
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                obj.write(chunk)
                continue
            size = chunk.size
            if not size:
                continue
            fd = chunk.fileno
            pos = chunk.position
            done = 0
            while done < size:
                piece = os.pread(fd, min(COPY_CHUNK, size - done), pos + done)
                if not piece:
                    raise OSError(
                        f"segment file shorter than the region being sent ({done} of {size} bytes)"
                    )
                obj.write(piece)
                done += len(piece)
                if self._out.pending >= COPY_CHUNK:
                    await self._flush()
        await self._flush()
