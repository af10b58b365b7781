"""The broker's network layer: thin asyncio I/O around ``pylog.protocol.ServerConnection``.

Per connection, a reader and a worker task on the broker's loop:

- the reader receives bytes, feeds the sans-IO connection and queues the events it yields.
  On PLAINTEXT connections it is a callback the loop calls when the socket is readable
  (registered once, removed while the connection is muted: no future, no epoll change and
  no task switch per read); TLS and SASL connections read in a task (``_read_loop``),
  as their handshakes and authenticator hooks await;
- memory: every frame is admitted before its buffer is allocated, as soon as its 4-byte size
  prefix is read: its bytes come out of the connection's share (``CONNECTION_MAX_BYTES``)
  and the broker's pool (``queued.max.request.bytes``, ``memory_pool.MemoryPool``), and go
  back when its request is done. A connection that does not fit, or has ``MAX_QUEUED``
  requests queued, is muted: not read until its own requests or others' drain;
- the worker takes requests in order, runs their handler through the dispatcher and
  writes the response chunks, so responses leave in request order (Kafka's rule).

Writes are coalesced: the worker starts each handler with ``eager`` (its first step runs
at once); when it finishes without waiting and more requests are queued (a pipelining
client), its response is held and goes out with the next ones in one ``send``: when the
queue is empty, before a handler that waits (a long poll, an append on a thread, a quota
delay), before a response holding a file region, past ``HOLD_BYTES``, and before a mute
or a requested close. Nothing else runs on the loop while responses are held, other than
the reader queueing more requests.

Quotas (KIP-219): when a handler throttles the request (``RequestContext.throttle_ms``), the
response goes out at once and the connection is then muted for the throttle time: the
worker handles nothing and the reader reads nothing until it is over.

Writing: bytes-like chunks go out with ``sock_sendall``; a ``logcore.FileRegion`` chunk is
sent with ``os.sendfile`` from the page cache (``FileRegion.transfer_to``), waiting for the
socket to become writable when its buffer is full. Sockets are driven directly (no asyncio
transport), so nothing else writes to them between chunks.

SASL (SASL_PLAINTEXT and SASL_SSL listeners): connections are ``sasl_net.SaslConnection``, this
class plus the authenticator; nothing of SASL runs on other listeners' connections.

TLS (listeners whose security protocol is SSL or SASL_SSL): the connection first completes its
handshake, then reads and writes through ``tls_io.TlsStream`` (``ssl.SSLObject`` over
memory BIOs); file regions are copied through it, as TLS cannot use sendfile. The client's
principal (``pylog.security.principal``: ``User:`` + its certificate's subject mapped by
``ssl.principal.mapping.rules``, else ``User:ANONYMOUS``) is kept on the connection and
handed to every request's context. A failed handshake closes that connection with one log
line naming the peer.

Errors: broken framing (a bad size prefix, an undecodable header, EOF mid-frame) closes that
one connection with one log line naming the peer and the reason; other connections are
unaffected. No parsing and no rules live here: the codec parses, handlers decide.

Event-loop affinity: everything runs on the broker's loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker import eager, handlers
from pylog.broker.tls_io import HANDSHAKE_TIMEOUT_S, TlsStream
from pylog.metrics.request_log import REQUEST_LOGGER, log_request, response_size
from pylog.protocol.apis import api_name
from pylog.protocol.connection import (
    NEED_DATA,
    ConnectionClosed,
    Request,
    RequestError,
    ServerConnection,
)
from pylog.security.principal import ANONYMOUS, NoMatchingRuleError

if TYPE_CHECKING:
    from pylog.broker.server import Broker
    from pylog.security.principal import PrincipalMapper

log = logging.getLogger("pylog.broker.net")
# Successful authentications, one DEBUG line each (Kafka logs them at DEBUG too).
auth_log = logging.getLogger("pylog.security.authentication")

FETCH = 1

RECV_SIZE = 64 * 1024  # large frames go to their own buffer (receive_buffer): no head copy beyond this
# Stop reading from a client that has this many requests queued (pipelining back-pressure).
MAX_QUEUED = 32
# A connection's share of the memory pool: bytes of its request frames being received,
# queued or handled. Beyond it the connection is muted until its own requests complete (one
# frame is always admitted, however large). 32 MiB keeps a pipelining producer busy (32
# requests of 1 MiB, librdkafka's default batch size) while a client pipelining 20 MiB
# requests behind a long poll holds one or two of them, not 31.
CONNECTION_MAX_BYTES = 32 * 1024 * 1024
# Responses held for one send while more requests are queued (see the module docstring):
# at most this many bytes (a socket buffer's worth) before they go out anyway.
HOLD_BYTES = 256 * 1024


class Listener:
    """A listening socket and its accept loop."""

    def __init__(self, broker: Broker, host: str, port: int, name: str = "PLAINTEXT",
                 tls: ssl.SSLContext | None = None,
                 mapper: PrincipalMapper | None = None, sasl: Any = None) -> None:
        self.broker = broker
        self.name = name
        self.tls = tls  # the listener's one context (SSL listeners)
        self.mapper = mapper  # ssl.principal.mapping.rules
        # SASL listeners: their mechanisms (pylog.security.sasl.listener.ListenerSasl); their
        # connections are sasl_net.SaslConnection, the others pay nothing for SASL.
        self.sasl = sasl
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(1024)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        self.address: tuple[str, int] = sock.getsockname()[:2]
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, addr = await loop.sock_accept(self.sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # EMFILE and friends: log, breathe, go on
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if self.sasl is None:
                Connection(self.broker, conn, addr, self.name, self.tls, self.mapper).start()
            else:
                from pylog.broker.sasl_net import SaslConnection

                SaslConnection(self.broker, conn, addr, self.name, self.tls, self.sasl).start()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.sock.close()


class Connection:
    """One client connection (see the module docstring)."""

    def __init__(self, broker: Broker, sock: socket.socket, addr: Any,
                 listener: str = "PLAINTEXT", tls: ssl.SSLContext | None = None,
                 mapper: PrincipalMapper | None = None) -> None:
        self.broker = broker
        self.sock = sock
        self.listener = listener
        self.principal = ANONYMOUS
        # The principal's name, as client quotas know users (None: ANONYMOUS, the default).
        self.user: str | None = None
        self._mapper = mapper
        self.tls: TlsStream | None = None
        if tls is not None:
            self.tls = TlsStream(sock, tls)
        self.peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for opt, key in ((socket.SO_SNDBUF, "socket.send.buffer.bytes"),
                             (socket.SO_RCVBUF, "socket.receive.buffer.bytes")):
                size = broker.config[key]
                if size > 0:
                    sock.setsockopt(socket.SOL_SOCKET, opt, max(size, 1 << 20))
        except OSError:
            pass
        self.conn = ServerConnection(broker.config["socket.request.max.bytes"], admission=True,
                                     supported=broker.api_supported,
                                     advertised=broker.api_advertised)
        # Bytes of this connection's frames taken from the memory pool (being received,
        # queued or handled), and this connection's share of the pool.
        self._held = 0
        pool = broker.memory_pool
        self._share = CONNECTION_MAX_BYTES if pool.capacity <= 0 else min(CONNECTION_MAX_BYTES, pool.capacity)
        self._drained = asyncio.Event()
        self.queue: collections.deque[Any] = collections.deque()
        # Response chunks held for one send (bytes only) and their size.
        self._held_out: list[Any] = []
        self._held_out_bytes = 0
        self._queued = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._reader: asyncio.Task[None] | None = None
        # The PLAINTEXT reader callback: whether the loop watches the socket for it, and the
        # task that waits for a frame's admission while it is muted.
        self._watching = False
        self._admitting: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False
        self._busy = False
        self._peer_closed = False
        self._current_api = -1
        self._close_requested = False  # a handler asked for a close (ctx.close_connection)
        self._last_done = 0.0  # when the last request was done (debug timing)
        self._remote_s = 0.0  # the current request's remote time (RequestContext.remote_s)
        # Quotas (KIP-219): the current request's throttle time (RequestContext.throttle_ms);
        # after its response the connection is muted that long: nothing read, nothing handled.
        self._throttle_ms = 0
        self._unmuted = asyncio.Event()
        self._unmuted.set()
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()

    # Subclasses whose admission or reading awaits (SASL) read in a task.
    _read_by_callback = True

    def start(self) -> None:
        self.broker.connections.add(self)
        if self.tls is None and self._read_by_callback:
            self._update_reading()
        else:
            self._reader = asyncio.ensure_future(self._read_loop())
        self._worker = asyncio.ensure_future(self._work_loop())

    # --- reading (PLAINTEXT: a callback) -------------------------------------------------

    def _update_reading(self) -> None:
        """Watch the socket when the reader may read (not closing, no frame waiting for
        memory, fewer than MAX_QUEUED requests queued, not muted by a quota), else not."""
        if self._reader is not None:
            self._room.set()  # the reader task waits on these itself
            return
        want = (not self._closing and not self._peer_closed and self._admitting is None
                and len(self.queue) < MAX_QUEUED and self._unmuted.is_set())
        if want is self._watching:
            return
        if want:
            self._loop.add_reader(self.sock.fileno(), self._on_readable)
        else:
            self._loop.remove_reader(self.sock.fileno())
        self._watching = want

    def _stop_watching(self) -> None:
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self.sock.fileno())

    def _on_readable(self) -> None:
        """The loop's callback: read what the socket has (a large frame in progress goes
        straight into its own buffer), then turn it into queued requests."""
        conn = self.conn
        spare = conn.spare_bytes
        view = conn.receive_buffer()
        data: bytes | None = None
        n = 0
        try:
            if view is None:
                data = self.sock.recv(RECV_SIZE)
            else:
                with view:
                    n = self.sock.recv_into(view)
                data = b"" if n == 0 else None
        except (BlockingIOError, InterruptedError):
            return
        except (ConnectionError, OSError) as exc:
            if not self._closing:
                log.info("connection %s: read failed: %s", self.peer, exc)
            self._abort()
            return
        self.last_active = self._now()
        try:
            if data is None:
                conn.received_into(n)
                if view is not None and spare and not conn.spare_bytes:
                    self._charge_spare()  # the kept buffer became this frame's
            else:
                conn.receive_data(data)
            self._take_events()
        except Exception:  # a bug: it costs this connection only
            log.exception("connection %s: closing after an unexpected error reading", self.peer)
            self._abort()

    def _take_events(self) -> None:
        """Queue the requests buffered so far; each frame is admitted first (synchronously
        when its bytes fit, else by the ``_admitting`` task while the reader is muted)."""
        conn = self.conn
        queued = False
        while True:
            need = conn.awaiting_admission
            if need >= 0:
                if not self._try_admit(need):
                    self._admitting = asyncio.ensure_future(self._admit_then_read(need))
                    break
                conn.admit_frame()
            try:
                event = conn.next_event()
            except errors.RemoteProtocolError as exc:
                log.warning("connection %s: closing after a protocol error: %s", self.peer, exc)
                self._abort()
                return
            if event is NEED_DATA:
                break
            if type(event) is ConnectionClosed:
                self._on_peer_closed()
                break
            self.queue.append((event, self._now()))
            queued = True
        if queued:
            self._queued.set()
        self._update_reading()

    def _try_admit(self, size: int) -> bool:
        """``_admit`` when it need not wait: the frame fits the connection's share and the
        pool has its bytes now."""
        if self._held and self._held + size > self._share:
            return False
        if not self.broker.memory_pool.try_acquire(size):
            return False
        self._held += size
        return True

    async def _admit_then_read(self, size: int) -> None:
        try:
            await self._admit(size)
        except asyncio.CancelledError:
            return
        finally:
            self._admitting = None
        if self._closed:
            return
        self.conn.admit_frame()
        try:
            self._take_events()
        except Exception:
            log.exception("connection %s: closing after an unexpected error reading", self.peer)
            self._abort()

    def _on_peer_closed(self) -> None:
        """The peer closed its side: requests already received still run (acks=0 produces
        sent just before a close), no answers go out."""
        self._peer_closed = True
        self._queued.set()
        if self._current_api == FETCH and self._worker is not None:
            self._worker.cancel()  # a long poll nobody waits for any more

    def _now(self) -> float:
        return self._loop.time()

    # --- reading (TLS and SASL: a task) ---------------------------------------------------

    # --- reading ---------------------------------------------------------------------

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        conn = self.conn
        tls = self.tls
        if tls is not None and not await self._handshake(tls):
            return
        try:
            while not self._closing:
                # 1. Turn what is buffered into events. Each frame is admitted first: its
                # bytes are taken from the memory pool once its size prefix is known and
                # before its buffer exists; nothing is read while that waits (muted).
                while True:
                    need = conn.awaiting_admission
                    if need >= 0:
                        await self._admit(need)
                        conn.admit_frame()
                    try:
                        event = conn.next_event()
                    except errors.RemoteProtocolError as exc:
                        log.warning("connection %s: closing after a protocol error: %s", self.peer, exc)
                        self._abort()
                        return
                    if event is NEED_DATA:
                        break
                    if type(event) is ConnectionClosed:
                        self._on_peer_closed()
                        return
                    self.queue.append((event, loop.time()))
                    self._queued.set()
                # 2. Pipelining bound by count (bytes are bounded by admission).
                if len(self.queue) >= MAX_QUEUED:
                    self._room.clear()
                    await self._room.wait()
                    continue
                # 3. Throttled by a quota: not read until the throttle time is over.
                if not self._unmuted.is_set():
                    await self._unmuted.wait()
                    continue
                # 4. Read. A large frame in progress is received straight into its own
                # buffer (no join, and a writable frame that Log.append needs not copy).
                spare = conn.spare_bytes
                view = conn.receive_buffer()
                data: bytes | None = None
                n = 0
                try:
                    if view is None:
                        data = (await loop.sock_recv(self.sock, RECV_SIZE) if tls is None
                                else await tls.recv(RECV_SIZE))
                    else:
                        with view:
                            n = (await loop.sock_recv_into(self.sock, view) if tls is None
                                 else await tls.recv_into(view))
                        data = b"" if n == 0 else None
                    self.last_active = loop.time()
                except (ConnectionError, OSError) as exc:
                    if not self._closing:
                        log.info("connection %s: read failed: %s", self.peer, exc)
                    self._abort()
                    return
                if data is None:
                    conn.received_into(n)
                    if view is not None and spare and not conn.spare_bytes:
                        self._charge_spare()  # the kept buffer became this frame's
                else:
                    conn.receive_data(data)
        except asyncio.CancelledError:
            pass

    async def _handshake(self, tls: TlsStream) -> bool:
        """Complete the TLS handshake and derive the principal; on failure log one line
        naming the peer, close this connection and return False."""
        try:
            await tls.handshake()
            if self._mapper is not None:
                self.principal = self._mapper.principal(tls.peer_certificate())
                if self.principal != ANONYMOUS:
                    self.user = self.principal.split(":", 1)[1]
        except asyncio.CancelledError:
            return False
        except NoMatchingRuleError as exc:
            log.warning("connection %s (listener %s): closing: no principal for the client "
                        "certificate: %s", self.peer, self.listener, exc)
            self._abort()
            return False
        except asyncio.TimeoutError:
            log.warning("connection %s (listener %s): closing: TLS handshake not done in "
                        "%.0f s", self.peer, self.listener, HANDSHAKE_TIMEOUT_S)
            self._abort()
            return False
        except ConnectionError as exc:  # gone before the end: no failure of TLS
            log.info("connection %s (listener %s): closed during the TLS handshake: %s",
                     self.peer, self.listener, exc)
            self._abort()
            return False
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            hint = _HANDSHAKE_HINTS.get(str(reason), "")
            log.warning("connection %s (listener %s): closing: TLS handshake failed: %s%s",
                        self.peer, self.listener, reason, hint)
            self._abort()
            return False
        self.last_active = asyncio.get_running_loop().time()
        auth_log.debug("connection %s (listener %s): TLS handshake done (%s), principal %s",
                       self.peer, self.listener, tls.version, self.principal)
        return True

    async def _admit(self, size: int) -> None:
        """Reserve ``size`` bytes for the next frame: first within this connection's share
        (``CONNECTION_MAX_BYTES``; one frame is always allowed), then from the broker's
        pool. The reader is muted while this waits."""
        limit = self._share
        while self._held and self._held + size > limit:
            log.debug("connection %s: muted: %d bytes of requests held, next frame %d",
                      self.peer, self._held, size)
            self._drained.clear()
            await self._drained.wait()
        pool = self.broker.memory_pool
        if not pool.try_acquire(size):
            log.debug("connection %s: muted: memory pool full (%d of %d bytes in use), "
                      "next frame %d", self.peer, pool.in_use, pool.capacity, size)
            await pool.acquire(size)
        if self._closed:  # aborted while waiting: give it straight back
            pool.release(size)
            raise asyncio.CancelledError
        self._held += size

    def _release(self, size: int) -> None:
        """A request is done: its frame's bytes go back to the pool."""
        if self._closed or size <= 0:
            return  # _abort gave back everything this connection held
        self._held -= size
        self.broker.memory_pool.release(size)
        self._charge_spare()
        self._drained.set()

    def _charge_spare(self) -> None:
        """Count the receive buffer the connection keeps for its next large frame (up to
        framing.DIRECT_MAX) in the pool, so that idle connections cannot hold memory the
        pool does not see; the pool may refuse or later reclaim it (then it is dropped)."""
        conn = self.conn
        if not self.broker.memory_pool.hold_spare(self, conn.spare_bytes, conn.drop_spare):
            conn.drop_spare()

    # --- working -----------------------------------------------------------------------

    async def _work_loop(self) -> None:
        loop = asyncio.get_running_loop()
        metrics = self.broker.metrics
        try:
            while True:
                if not self.queue:
                    if self._held_out:
                        await self._flush()
                    if self._closing or self._peer_closed:
                        break
                    self._queued.clear()
                    await self._queued.wait()
                    continue
                event, received = self.queue.popleft()
                if self._peer_closed and event.api_key == FETCH:
                    self._release(event.size)
                    continue  # a read nobody will receive: do not long-poll for it
                if len(self.queue) == MAX_QUEUED // 2 - 1:
                    self._update_reading()  # room again for a reader stopped at MAX_QUEUED
                self._busy = True
                self._current_api = event.api_key
                started = handled = loop.time()
                chunks = None
                self._remote_s = 0.0
                self._throttle_ms = 0
                try:
                    coro = self._handle(event)
                    try:
                        step = coro.send(None)
                    except StopIteration as done:
                        chunks = done.value
                    else:  # the handler waits: what is held goes out first
                        if self._held_out:
                            try:
                                await self._flush()
                            except BaseException:
                                coro.close()
                                raise
                        chunks = await eager.finish(coro, step)
                    handled = loop.time()
                    if chunks is None or self._peer_closed:
                        if self._close_requested or (type(event) is RequestError
                                                     and not event.can_respond):
                            if self._held_out and not self._peer_closed:
                                await self._flush()
                            break
                    else:
                        self._current_api = -1
                        self._hold(chunks)
                        if not self.queue or self._held_out_bytes >= HOLD_BYTES:
                            await self._flush()
                finally:
                    self._busy = False
                    self._current_api = -1
                    now = self.last_active = loop.time()
                    if log.isEnabledFor(logging.DEBUG):
                        self._log_timing(event, received, started, handled, now)
                    # Kafka's request metrics, once per request on this loop: the times
                    # appended to an array, folded into histograms in batches
                    # (pylog.metrics.registry; about 0.5 us).
                    if type(event) is Request:
                        metrics.record_request(event.api_key, event.api_version,
                                               started - received, handled - started,
                                               self._remote_s, now - handled, self._throttle_ms)
                        if REQUEST_LOGGER.isEnabledFor(logging.DEBUG):
                            log_request(api_name(event.api_key), event.api_version, event.correlation_id,
                                        event.client_id, self.peer, self.listener, event.size,
                                        response_size(chunks), started - received,
                                        handled - started, self._remote_s, now - handled,
                                        self._throttle_ms)
                    # The request is done (answered, or nothing to answer): its frame's
                    # memory goes back (the response may still refer to nothing of it).
                    self._release(event.size)
                # Over a quota (an acks=0 Produce too, which has no response): muted now.
                if self._throttle_ms and not self._peer_closed:
                    if self._held_out:
                        await self._flush()
                    await self._mute(self._throttle_ms)
        except (ConnectionError, OSError) as exc:
            if not self._closing:
                log.info("connection %s: write failed: %s", self.peer, exc)
        except errors.LocalProtocolError as exc:
            # We built something illegal: a bug, but it costs this connection only.
            log.error("connection %s: closing: cannot encode a response: %s", self.peer, exc)
        except asyncio.CancelledError:
            pass
        finally:
            self._abort()

    def _log_timing(self, event: Any, received: float, started: float, handled: float,
                    done: float) -> None:
        """One debug line per request, Kafka's request-time breakdown: queued (received to
        handler start: behind earlier requests of this connection), handled (in the
        handler: a fetch's long poll, an append on a thread), written (response send),
        and how long the connection sat with nothing to do before the request arrived
        (time the client took, e.g. a consumer's fetch backoff)."""
        idle = received - self._last_done if self._last_done and received > self._last_done else 0.0
        self._last_done = done
        log.debug("connection %s: %s v%d correlation id %d: queued %.1f ms, handled %.1f ms, "
                  "written %.1f ms; idle %.1f ms before it", self.peer,
                  api_name(event.api_key),
                  event.api_version, event.correlation_id, (started - received) * 1000,
                  (handled - started) * 1000, (done - handled) * 1000, idle * 1000)

    async def _handle(self, event: Any) -> list[Any] | None:
        broker = self.broker
        if type(event) is RequestError:
            if not event.can_respond:
                log.warning("connection %s: closing: %s (client %r)", self.peer, event.reason,
                            event.client_id)
                return None
            log.info("connection %s: %s (client %r)", self.peer, event.reason, event.client_id)
            if self._peer_closed:
                return None
            entry = handlers.HANDLERS.get(event.api_key)
            if event.body is not None and entry is not None:
                ctx = handlers.RequestContext(broker, event.api_key, event.api_version,
                                              event.correlation_id, event.client_id, self.peer,
                                              listener=self.listener, principal=self.principal)
                response = entry[1].error_response(ctx, event.body, event.error_code, event.reason)
                if ctx.close_connection:
                    self._close_requested = True
                    return None
                if response is None:
                    return None
                return self.conn.send(event, response)
            return self.conn.send_error(event)
        assert type(event) is Request
        ctx = handlers.RequestContext(broker, event.api_key, event.api_version,
                                      event.correlation_id, event.client_id, self.peer,
                                      listener=self.listener, principal=self.principal)
        ctx.request_size = event.size
        if self.user is not None:  # quotas know a user by its principal's name
            ctx.user = self.user
        try:
            response = await handlers.dispatch(ctx, event.body)
        finally:
            self._remote_s = ctx.remote_s
            self._throttle_ms = ctx.throttle_ms
        if ctx.close_connection:
            self._close_requested = True
            return None
        if response is None or not event.expects_response or self._peer_closed:
            return None
        return self.conn.send(event, response)

    async def _mute(self, ms: int) -> None:
        """KIP-219: the response is out; read and handle nothing more from this client for
        ``ms`` (Kafka's ``ThrottledChannel``: the channel muted until the throttle ends)."""
        log.debug("connection %s: throttled by a quota for %d ms", self.peer, ms)
        self._unmuted.clear()
        self._update_reading()
        try:
            await self.broker.clock.sleep(ms / 1000.0)
        finally:
            self._unmuted.set()
            if not self._closed:
                self._update_reading()

    def _hold(self, chunks: list[Any]) -> None:
        """Add a response's chunks to those held for one send. Only bytes and bytearrays the
        codec built are held; any other chunk (a file region, a view of memory that a later
        request could change) makes the whole lot go out now (counted as HOLD_BYTES)."""
        held = self._held_out
        for chunk in chunks:
            held.append(chunk)
            kind = type(chunk)
            if kind is bytes or kind is bytearray:
                self._held_out_bytes += len(chunk)
            else:
                self._held_out_bytes += HOLD_BYTES

    async def _flush(self) -> None:
        """Write the held responses (in the order they were held)."""
        chunks = self._held_out
        self._held_out = []
        self._held_out_bytes = 0
        await self._write(chunks)

    async def _write(self, chunks: list[Any]) -> None:
        if self._held_out:  # a response written directly goes after those held
            chunks = self._held_out + chunks
            self._held_out = []
            self._held_out_bytes = 0
        if self.tls is not None:
            await self.tls.write_chunks(chunks)  # no sendfile under TLS: regions are copied
            return
        loop = asyncio.get_running_loop()
        sock = self.sock
        pending: list[Any] = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                pending.append(chunk)
                continue
            if pending:
                await loop.sock_sendall(sock, b"".join(pending) if len(pending) > 1 else pending[0])
                pending = []
            await self._sendfile(chunk)
        if pending:
            await loop.sock_sendall(sock, b"".join(pending) if len(pending) > 1 else pending[0])

    async def _sendfile(self, region: Any) -> None:
        """Send a FileRegion with os.sendfile, waiting for writability on a full buffer."""
        fd = self.sock.fileno()
        sent = 0
        size = region.size
        loop = asyncio.get_running_loop()
        while sent < size:
            sent += region.transfer_to(fd, sent)
            if sent < size:
                fut = loop.create_future()
                loop.add_writer(fd, _set_done, fut)
                try:
                    await fut
                finally:
                    loop.remove_writer(fd)

    # --- closing -----------------------------------------------------------------------

    def close_if_idle(self, now: float, idle: float) -> None:
        """Close the connection when nothing was received or sent for ``idle`` seconds and
        no request is queued or being handled (``connections.max.idle.ms``)."""
        if self._busy or self.queue or now - self.last_active < idle:
            return
        log.info("connection %s: closing after %.1f s idle (connections.max.idle.ms)", self.peer, idle)
        self._abort()

    def abort(self) -> None:
        """Close the connection now, dropping what it has queued (pylog.testing's
        ``drop_connections``; the client sees its connection reset)."""
        log.info("connection %s: closed by the broker", self.peer)
        self._abort()

    def _abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closing = True
        self._room.set()
        self._queued.set()
        self._drained.set()
        pool = self.broker.memory_pool
        pool.hold_spare(self, 0, self.conn.drop_spare)
        if self._held:  # queued requests, the one being handled, a frame being received
            pool.release(self._held)
            self._held = 0
        self._stop_watching()
        me = asyncio.current_task()
        for task in (self._reader, self._worker, self._admitting):
            if task is not None and not task.done() and task is not me:
                task.cancel()
        try:
            self.conn.close()
        except errors.LocalProtocolError:
            pass
        self.sock.close()
        self.broker.connections.discard(self)

    async def close_gracefully(self, timeout: float) -> None:
        """Stop reading; let the request being handled (and its response) finish."""
        self._closing = True
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
        self._stop_watching()
        if self._admitting is not None:
            self._admitting.cancel()
        self.queue.clear()
        self._queued.set()
        if self._worker is not None and not self._worker.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._worker), timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        self._abort()


_PLAINTEXT_HINT = " (a plaintext client on a TLS listener?)"
_HANDSHAKE_HINTS = {
    "WRONG_VERSION_NUMBER": _PLAINTEXT_HINT, "HTTP_REQUEST": _PLAINTEXT_HINT,
    "UNKNOWN_PROTOCOL": _PLAINTEXT_HINT,
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": " (ssl.client.auth=required: the client sent no "
                                         "certificate)",
    "CERTIFICATE_VERIFY_FAILED": " (the client's certificate is not signed by a CA in the "
                                 "listener's trust store)",
}


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
