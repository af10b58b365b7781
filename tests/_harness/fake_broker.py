"""A socket server that speaks just enough Kafka to open a client connection, then keeps
quiet: for tests of what a client does with a broker that stops answering.

It answers ApiVersions (unless ``answer_api_versions`` is False: a broker that accepts and
never answers) and nothing else; every other request waits for ever. ``ended`` counts the
connections the client closed (end of stream or reset seen), so that a test can wait until
every accepted socket was closed by the client: a socket left open is what Python reports
as an "unclosed transport".

Blocking sockets in threads of its own, so that it serves asyncio tests and the blocking
clients (whose loops run in their own threads) alike.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from pylog.protocol.connection import NEED_DATA, Request, ServerConnection
from pylog.protocol.messages import ApiVersionsResponse

__all__ = ["FakeBroker"]

#: What the fake broker advertises: ApiVersions, Metadata, FindCoordinator and the share
#: group APIs (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge).
ADVERTISED = {18: (0, 4), 3: (0, 12), 10: (0, 4), 76: (1, 1), 78: (1, 1), 79: (1, 1)}


class FakeBroker:
    """``with FakeBroker() as b:`` listens on ``b.host:b.port`` until the block ends."""

    def __init__(self, *, answer_api_versions: bool = True) -> None:
        self.answer_api_versions = answer_api_versions
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self.accepted = 0
        self.ended = 0
        self.requests: list[int] = []  # API keys received, in order
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stopping = False
        acceptor = threading.Thread(target=self._accept, name="fake-broker-accept", daemon=True)
        self._threads.append(acceptor)
        acceptor.start()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def open_connections(self) -> int:
        with self._lock:
            return self.accepted - self.ended

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._stopping:
                    sock.close()
                    return
                self.accepted += 1
                self._socks.append(sock)
                t = threading.Thread(target=self._serve, args=(sock,), name="fake-broker-conn",
                                     daemon=True)
                self._threads.append(t)
            t.start()

    def _serve(self, sock: socket.socket) -> None:
        conn = ServerConnection()
        try:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    return
                conn.receive_data(data)
                while True:
                    ev: Any = conn.next_event()
                    if ev is NEED_DATA or not isinstance(ev, Request):
                        break
                    with self._lock:
                        self.requests.append(ev.api_key)
                    if ev.api_key == 18 and self.answer_api_versions:
                        body = ApiVersionsResponse(api_keys=[
                            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                            for k, (lo, hi) in ADVERTISED.items()])
                        sock.sendall(b"".join(bytes(c) for c in conn.send(ev, body)))
        finally:
            with self._lock:
                self.ended += 1

    def close(self) -> None:
        with self._lock:
            self._stopping = True
            socks = list(self._socks)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (Linux)
        except OSError:
            pass
        self._listener.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in list(self._threads):
            t.join()
        for s in socks:
            s.close()

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
