"""A blocking, one-request-at-a-time Kafka wire connection for tests that talk to the
broker below any client: hand-built requests, raw frames, sockets left idle or closed.

It speaks the protocol through ``pylog.protocol.ClientConnection`` over a plain socket:
versions are negotiated with ApiVersions (KIP-511: a broker that does not know our
ApiVersions version answers in the v0 layout and we retry) and each request uses the highest
version both sides implement, capped where a newer version needs features the tests do not
fill in (topic ids in Fetch). ``sock`` is the socket, for tests that write raw bytes.

(The command-line tools used this before they moved onto ``pylog.client``.)
"""

from __future__ import annotations

import socket
import time
from typing import Any

from pylog import errors
from pylog.protocol.connection import NEED_DATA, ClientConnection, ConnectionClosed, Response
from pylog.protocol.messages import ApiVersionsRequest

# The newest version of each API these tests know how to fill in.
MAX_VERSIONS = {
    0: 11,  # Produce
    1: 12,  # Fetch (13+ names topics by ID)
    2: 7,  # ListOffsets
    3: 12,  # Metadata
    18: 4,  # ApiVersions
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    32: 4,  # DescribeConfigs
    44: 1,  # IncrementalAlterConfigs
}


class WireError(Exception):
    """The connection failed, timed out or the broker refused the negotiation."""


class BrokerConnection:
    """One TCP connection to one broker, with its negotiated API versions."""

    def __init__(self, host: str, port: int, timeout: float, client_id: str = "pylog-tests") -> None:
        self.address = f"{host}:{port}"
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise WireError(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id=client_id)
        self.versions: dict[int, tuple[int, int]] = {}
        self._negotiate()

    def close(self) -> None:
        self.sock.close()

    def _negotiate(self) -> None:
        version = MAX_VERSIONS[18]
        for _ in range(3):
            body = ApiVersionsRequest(client_software_name="pylog", client_software_version="0.1.0")
            resp = self._roundtrip(body, version)
            if resp.error_code == errors.UnsupportedVersionError.code:
                ours = [k for k in resp.api_keys if k.api_key == 18]
                version = min(version - 1, ours[0].max_version) if ours else 0
                continue
            if resp.error_code:
                raise WireError(f"{self.address}: ApiVersions failed with error {resp.error_code}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise WireError(f"{self.address}: could not agree on an ApiVersions version")

    def version_for(self, body: Any, max_version: int | None = None) -> int:
        cls = type(body)
        key = cls.API_KEY
        rng = self.versions.get(key)
        if rng is None:
            raise WireError(f"{self.address} does not support {cls.NAME[:-7]}")
        lo, hi = cls.VALID_VERSIONS
        top = min(hi, MAX_VERSIONS.get(key, hi), rng[1])
        if max_version is not None:
            top = min(top, max_version)
        if top < max(lo, rng[0]):
            raise WireError(f"{self.address}: no common version of {cls.NAME[:-7]} "
                              f"(broker {rng[0]}-{rng[1]})")
        return top

    def request(self, body: Any, version: int | None = None, *, expect_response: bool = True) -> Any:
        if version is None:
            version = self.version_for(body)
        return self._roundtrip(body, version, expect_response=expect_response)

    def _roundtrip(self, body: Any, version: int, *, expect_response: bool = True) -> Any:
        chunks = self.conn.send(body, version)
        try:
            self.sock.sendall(b"".join(bytes(c) for c in chunks))
            if not expect_response:
                return None
            deadline = time.monotonic() + self.timeout
            while True:
                event = self.conn.next_event()
                if isinstance(event, Response):
                    return event.body
                if isinstance(event, ConnectionClosed):
                    raise WireError(f"{self.address} closed the connection")
                assert event is NEED_DATA
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WireError(f"{self.address}: no answer within {self.timeout} s")
                self.sock.settimeout(left)
                data = self.sock.recv(1 << 20)
                self.conn.receive_data(data)
        except (OSError, errors.RemoteProtocolError) as exc:
            raise WireError(f"{self.address}: {exc}") from None

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tls_connection(port: int, ca: str, cert: str, key: str, timeout: float = 30.0,
                   client_id: str = "pylog-tests") -> BrokerConnection:
    """A ``BrokerConnection`` over TLS to 127.0.0.1:``port``, presenting ``cert`` (mTLS)."""
    import ssl

    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    c = BrokerConnection.__new__(BrokerConnection)
    c.address, c.timeout = f"127.0.0.1:{port}", timeout
    c.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout),
                             server_hostname="localhost")
    c.conn, c.versions = ClientConnection(client_id=client_id), {}
    c._negotiate()
    return c
