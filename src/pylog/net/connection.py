"""One asyncio TCP connection to one broker, speaking through ``ClientConnection``.

The requesting side of the wire protocol, shared by everything that sends requests to a
broker: the client (``pylog.client``), the follower fetchers (``pylog.replication.fetcher``),
the controller's channels and the transaction coordinator's markers (``pylog.net.channel``).
It sits below both the broker and the client, so neither reaches into the other for it.

The sans-IO ``pylog.protocol.ClientConnection`` does framing and encoding; this module only
moves bytes. Requests are pipelined: ``send()`` writes a frame and returns a future that a
single reader task resolves when the response with that correlation id arrives (Kafka
answers in order on one connection, but we match by id anyway). The number of requests in
flight is bounded by a semaphore (``max.in.flight.requests.per.connection`` for the
producer's connection).

Versions are negotiated once with ApiVersions (KIP-511: a broker that does not know our
ApiVersions version answers in the v0 layout listing its range, and we retry with the
highest it has); each request then uses the highest version both sides implement, capped
by ``MAX_VERSIONS`` where newer versions need features this client does not use (Fetch 13+
names topics by id).

A connection that loses its socket, times out a request or receives garbage fails every
request in flight with ``KafkaConnectionError`` / ``KafkaTimeoutError`` and is closed:
responses on one connection are ordered, so after a timeout nothing later can be trusted.
The owner (``Cluster``) opens a new one on next use.

SASL (``sasl``: a ``pylog.security.sasl.client.SaslClientConfig``, for SASL_PLAINTEXT and
SASL_SSL): after ApiVersions the connection authenticates with SaslHandshake v1 and
SaslAuthenticate (KIP-152) before it is handed out; a failure closes it with
``KafkaAuthenticationError`` naming the broker's message. When the broker bounds the session
(``session_lifetime_ms``, KIP-368) the connection re-authenticates on its own between 85 and
95 per cent of it, as the Java client does, pipelined with other requests.

Event-loop affinity: one connection belongs to the loop that opened it; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Any, Protocol

from pylog import errors
from pylog.net._stream import ResponseStream
from pylog.net.errors import KafkaAuthenticationError, KafkaConnectionError, KafkaTimeoutError
from pylog.protocol.connection import NEED_DATA, ClientConnection, ConnectionClosed, Response
from pylog.protocol.messages import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

__all__ = ["BrokerConnection", "Connection", "MAX_VERSIONS", "pick_version"]

log = logging.getLogger("pylog.net")

#: How long ``close`` lets the transport flush before it aborts the socket (seconds).
CLOSE_FLUSH_TIMEOUT = 5.0

# The newest version of each API this client knows how to fill in and read.
MAX_VERSIONS = {
    0: 11,  # Produce
    1: 12,  # Fetch (13+ names topics by id)
    2: 7,  # ListOffsets
    3: 12,  # Metadata
    8: 9,  # OffsetCommit
    9: 9,  # OffsetFetch (8+ batches groups)
    10: 6,  # FindCoordinator (4+ batches keys)
    11: 9,  # JoinGroup
    12: 4,  # Heartbeat
    13: 5,  # LeaveGroup
    14: 5,  # SyncGroup
    18: 4,  # ApiVersions
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    21: 2,  # DeleteRecords
    22: 5,  # InitProducerId
    24: 3,  # AddPartitionsToTxn (4+ is broker to broker)
    25: 4,  # AddOffsetsToTxn
    26: 4,  # EndTxn (5 bumps the epoch per transaction, KIP-890 part 2)
    28: 4,  # TxnOffsetCommit
    32: 4,  # DescribeConfigs
    37: 3,  # CreatePartitions
    44: 1,  # IncrementalAlterConfigs
    60: 1,  # DescribeCluster
}



class Connection(Protocol):
    """What the client cores use of a connection: ``BrokerConnection`` (TCP) and
    ``_embedded.EmbeddedConnection`` (a broker in this process) both provide it."""

    node_id: int
    address: str
    versions: dict[int, tuple[int, int]]

    @property
    def closed(self) -> bool: ...

    def version_for(self, cls: Any, max_version: int | None = None) -> int: ...

    async def send(self, body: Any, version: int | None = None, *,
                   timeout: float | None = None) -> Any: ...

    def send_nowait(self, body: Any, version: int | None = None) -> asyncio.Future[Any] | None: ...

    async def wait(self, fut: asyncio.Future[Any], timeout: float | None = None,
                   what: str = "request") -> Any: ...

    async def close(self, error: BaseException | None = None) -> None: ...

    def abort(self, error: BaseException | None = None) -> None: ...


def pick_version(versions: dict[int, tuple[int, int]], cls: Any, address: str,
                 max_version: int | None = None) -> int:
    """The highest version of ``cls``'s API that the broker serves (``versions``, from
    ApiVersions) and this client implements (the codec's range capped by ``MAX_VERSIONS``).

    Raises:
        UnsupportedVersionError: the broker does not serve the API at a version we know.
    """
    key = cls.API_KEY
    rng = versions.get(key)
    name = cls.NAME[: -len("Request")]
    if rng is None:
        raise errors.UnsupportedVersionError(f"{address} does not serve {name}")
    lo, hi = cls.VALID_VERSIONS
    top = min(hi, MAX_VERSIONS.get(key, hi), rng[1])
    if max_version is not None:
        top = min(top, max_version)
    if top < max(lo, rng[0]):
        raise errors.UnsupportedVersionError(
            f"{address}: no common version of {name} (broker {rng[0]}-{rng[1]})")
    return top


class BrokerConnection:
    """A pipelined connection to ``host:port`` (``node_id`` -1 for a bootstrap address)."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str,
                 request_timeout: float, max_in_flight: int = 100,
                 ssl_context: ssl.SSLContext | None = None, sasl: Any = None) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context  # TLS (security.protocol=SSL) when given
        self.sasl = sasl  # SaslClientConfig (security.protocol=SASL_*) when given
        self._reauth: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.reauthentications = 0
        self.node_id = node_id
        self.address = f"{host}:{port}"
        self.request_timeout = request_timeout
        self.versions: dict[int, tuple[int, int]] = {}
        self._conn = ClientConnection(client_id=client_id)
        # The transport's protocol (``_stream.ResponseStream``): it receives large frames
        # in place, calls back receive_data / received_into / connection_lost, and holds
        # the write flow control.
        self._stream: ResponseStream | None = None
        self._transport: asyncio.Transport | None = None
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._slots = asyncio.Semaphore(max_in_flight)
        self._closed = False
        self._next_cid = 0
        self.error: BaseException | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._waiters)

    async def connect(self, timeout: float) -> None:
        """Open the socket and negotiate versions.

        Raises:
            KafkaConnectionError: the broker cannot be reached or answers garbage.
            KafkaTimeoutError: no connection and answer within ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        try:
            transport, stream = await asyncio.wait_for(
                loop.create_connection(
                    lambda: ResponseStream(self), self.host, self.port, ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None),
                timeout)
            self._transport, self._stream = transport, stream  # type: ignore[assignment]
        except asyncio.TimeoutError:
            self._closed = True
            raise KafkaTimeoutError(f"connecting to {self.address} took over {timeout} s") from None
        except ssl.SSLError as exc:
            self._closed = True
            raise KafkaConnectionError(
                f"TLS handshake with {self.address} failed: {exc.reason or exc}") from None
        except OSError as exc:
            self._closed = True
            raise KafkaConnectionError(
                f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        try:
            if self._closed:
                # close() or abort() ran while the socket was being opened (the transport
                # came back anyway: Python 3.11's wait_for returns a result that completes
                # as its caller is cancelled, CPython gh-86296): it is not handed out.
                raise KafkaConnectionError(f"connection to {self.address} is closed")
            sock = self._transport.get_extra_info("socket") if self._transport is not None else None
            if sock is not None:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError as exc:  # the broker closed it already
                    raise KafkaConnectionError(
                        f"cannot connect to {self.address}: {exc.strerror or exc}") from None
            await asyncio.wait_for(self._negotiate(), timeout)
            if self.sasl is not None:
                await asyncio.wait_for(self._authenticate(), timeout)
        except asyncio.TimeoutError:
            what = "SASL authentication" if self.versions else "ApiVersions answer"
            await self.close(KafkaTimeoutError(f"{self.address}: no {what}"))
            raise KafkaTimeoutError(f"{self.address}: no {what} in {timeout} s") from None
        except BaseException:
            await self.close()
            raise

    async def _negotiate(self) -> None:
        version = MAX_VERSIONS[18]
        for _ in range(3):
            body = ApiVersionsRequest(client_software_name="pylog", client_software_version="0.1.0")
            resp = await self.send(body, version)
            if resp.error_code == errors.UnsupportedVersionError.code:
                ours = [k for k in resp.api_keys if k.api_key == 18]
                version = min(version - 1, ours[0].max_version) if ours else 0
                continue
            if resp.error_code:
                raise KafkaConnectionError(
                    f"{self.address}: ApiVersions failed with error {resp.error_code}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise KafkaConnectionError(f"{self.address}: could not agree on an ApiVersions version")

    async def _authenticate(self) -> None:
        """SaslHandshake v1 + SaslAuthenticate until the mechanism is done.

        Raises:
            KafkaAuthenticationError: the broker refused (its message); the connection is
                closed.
        """
        sasl = self.sasl
        mechanism = sasl.mechanism
        try:
            hs = await self.send(SaslHandshakeRequest(mechanism=mechanism),
                                 self.version_for(SaslHandshakeRequest, 1))
            if hs.error_code:
                raise KafkaAuthenticationError(
                    f"{self.address}: SASL mechanism {mechanism} refused (error {hs.error_code}; "
                    f"the broker offers {', '.join(hs.mechanisms) or 'nothing'})")
            if self.version_for(SaslHandshakeRequest, 1) < 1:
                raise KafkaAuthenticationError(f"{self.address}: the broker has no SaslAuthenticate")
            client = sasl.new_client()
            token: bytes | None = client.initial()
            version = self.version_for(SaslAuthenticateRequest)
            lifetime = 0
            while token is not None:
                resp = await self.send(SaslAuthenticateRequest(auth_bytes=token), version)
                if resp.error_code:
                    raise KafkaAuthenticationError(
                        f"{self.address}: {resp.error_message or 'SASL authentication failed'}")
                lifetime = getattr(resp, "session_lifetime_ms", 0) or 0
                try:
                    token = client.evaluate(bytes(resp.auth_bytes or b""))
                except Exception as exc:  # noqa: BLE001 - the mechanism's own failure
                    raise KafkaAuthenticationError(f"{self.address}: {exc}") from None
        except KafkaAuthenticationError as exc:
            await self.close(exc)
            raise
        if lifetime > 0:
            import random

            delay = lifetime / 1000.0 * random.uniform(0.85, 0.95)  # noqa: S311 - jitter
            loop = asyncio.get_running_loop()
            self._reauth = loop.call_later(delay, self._start_reauthentication)

    def _start_reauthentication(self) -> None:
        # Held here: the loop keeps only a weak reference to a task.
        self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        """KIP-368 on this live connection; a failure closes it (its requests fail)."""
        if self._closed:
            return
        try:
            await self._authenticate()
            self.reauthentications += 1
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            await self.close(exc)

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        """The highest version of ``cls``'s API both sides implement (``pick_version``)."""
        return pick_version(self.versions, cls, self.address, max_version)

    async def send(self, body: Any, version: int | None = None, *,
                   timeout: float | None = None) -> Any:
        """Send one request and wait for its response body (None for acks=0 Produce).

        Several tasks may call this at once: requests are pipelined up to the in-flight
        bound.

        Raises:
            KafkaConnectionError: the connection is closed or broke.
            KafkaTimeoutError: no answer within ``timeout`` (default ``request.timeout.ms``);
                the connection is closed.
        """
        timeout = self.request_timeout if timeout is None else timeout
        async with self._slots:
            fut = self.send_nowait(body, version)
            try:
                assert self._stream is not None
                await self._stream.drain()
            except (OSError, AssertionError) as exc:
                err = KafkaConnectionError(f"{self.address}: {exc}")
                await self.close(err)
                raise err from None
            if fut is None:
                return None
            return await self.wait(fut, timeout, type(body).NAME)

    def send_nowait(self, body: Any, version: int | None = None) -> asyncio.Future[Any] | None:
        """Write one request now (requests go out in call order); the future of its answer.

        No in-flight bound: callers that pipeline (the producer's sender) keep their own.

        Returns:
            The future of the response body; None for a Produce with acks=0.

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        if self._closed or self._transport is None:
            raise KafkaConnectionError(f"connection to {self.address} is closed"
                                       + (f": {self.error}" if self.error else ""))
        if version is None:
            version = self.version_for(type(body))
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        chunks = self._conn.send(body, version, correlation_id=cid)
        fut: asyncio.Future[Any] | None = None
        if not (type(body).API_KEY == 0 and body.acks == 0):
            fut = asyncio.get_running_loop().create_future()
            self._waiters[cid] = fut
        self._transport.writelines(chunks)
        return fut

    async def wait(self, fut: asyncio.Future[Any], timeout: float | None = None,
                   what: str = "request") -> Any:
        """Wait for a ``send_nowait`` answer; on timeout close the connection.

        Raises:
            KafkaConnectionError: the connection broke first.
            KafkaTimeoutError: no answer within ``timeout`` (default ``request.timeout.ms``).
        """
        timeout = self.request_timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            err = KafkaTimeoutError(f"{self.address}: no answer to {what} within {timeout:g} s")
            await self.close(err)
            raise err from None

    # -- receiving: called back by the ResponseStream on the loop -------------------------

    def receive_buffer(self) -> memoryview | None:
        """Where the transport should ``recv_into`` next: the frame being received in place,
        or None (then into the stream's scratch buffer, and ``receive_data``)."""
        if self._closed:
            return None
        return self._conn.receive_buffer()

    def received_into(self, n: int) -> None:
        if not self._closed:
            try:
                self._conn.received_into(n)
            except errors.ProtocolError as exc:
                self._broken(KafkaConnectionError(f"{self.address}: {exc}"))
                return
            self._dispatch()

    def receive_data(self, data: bytes) -> None:
        """Received bytes (``b""``: the broker closed its side)."""
        if not self._closed:
            try:
                self._conn.receive_data(data)
            except errors.ProtocolError as exc:
                self._broken(KafkaConnectionError(f"{self.address}: {exc}"))
                return
            self._dispatch()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._closed:
            self._broken(KafkaConnectionError(
                f"{self.address}: {exc}" if exc is not None
                else f"connection to {self.address} closed"))

    def _dispatch(self) -> None:
        """Hand every complete response to its waiter."""
        try:
            while True:
                event = self._conn.next_event()
                if event is NEED_DATA:
                    return
                if isinstance(event, ConnectionClosed):
                    raise KafkaConnectionError(f"{self.address} closed the connection")
                assert isinstance(event, Response)
                fut = self._waiters.pop(event.correlation_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(event.body)
        except errors.ProtocolError as exc:
            self._broken(KafkaConnectionError(f"{self.address}: {exc}"))
        except KafkaConnectionError as exc:
            self._broken(exc)

    def _broken(self, err: KafkaConnectionError) -> None:
        """The connection cannot go on: fail everything in flight and close the socket."""
        self._fail_all(err)
        self._closed = True
        if self.error is None:
            self.error = err
        if self._transport is not None:
            self._transport.close()

    def _shut(self, error: BaseException | None, how: str) -> Any:
        """The first step of close and abort: mark the connection closed (keeping the first
        error), stop re-authentication, fail everything in flight, and hand back the
        transport (None if there was none) for the caller to close or abort."""
        if error is not None and self.error is None:
            self.error = error
        self._closed = True
        if self._reauth is not None:
            self._reauth.cancel()
            self._reauth = None
        self._fail_all(error or KafkaConnectionError(f"connection to {self.address} {how}"))
        transport, self._transport = self._transport, None
        return transport

    def _fail_all(self, err: BaseException) -> None:
        waiters, self._waiters = self._waiters, {}
        for fut in waiters.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: a late failure nobody awaits is not a warning

    async def close(self, error: BaseException | None = None) -> None:
        """Close the socket and fail everything in flight (idempotent)."""
        transport = self._shut(error, "closed")
        if transport is not None:
            transport.close()
            assert self._stream is not None
            # connection_lost has run: the socket is closed. A transport still flushing
            # to a peer that stopped reading would wait for ever; in-flight requests were
            # failed above, so what was not sent is dropped. The wait is asyncio.wait, not
            # wait_for (whose 3.11 cancel race this must not depend on); a cancel of this
            # close aborts the socket at once rather than leave it flushing with nobody to
            # abort it (an "unclosed transport" once the loop is gone).
            try:
                done, _ = await asyncio.wait({self._stream.closed}, timeout=CLOSE_FLUSH_TIMEOUT)
            except asyncio.CancelledError:
                transport.abort()
                self._conn.close()
                raise
            if not done:
                log.warning("connection to %s: the socket did not close within %.0f s; aborted",
                            self.address, CLOSE_FLUSH_TIMEOUT)
                transport.abort()
        self._conn.close()

    def abort(self, error: BaseException | None = None) -> None:
        """Close at once, without flushing: fail everything in flight and abort the socket
        (a client's ``close(timeout)`` out of time). Idempotent; callable from any code on
        the connection's loop, including a plain callback."""
        transport = self._shut(error, "aborted")
        if transport is not None:
            transport.abort()  # connection_lost follows on the loop; the socket is closed
