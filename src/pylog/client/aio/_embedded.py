"""Embedded mode: the client's requests served in this process by a broker without sockets.

``Producer(log_dir=...)``, ``Consumer(log_dir=...)`` and ``Admin(log_dir=...)`` (or
``"log.dir"`` in the settings mapping) open a data directory in-process instead of
reaching a broker over the network. Nothing else changes: the cores (the producer's
accumulator, batches, sender and idempotence; the consumer's positions, fetcher,
``poll`` and ``poll_columns``; the admin calls) are the network mode's, because they only
ever talk to a ``Cluster`` and the connections it hands out. This module provides the
other transport:

- ``EmbeddedBroker``: ``pylog.broker.server.Broker`` started with ``listen=False`` on an
  event loop in a daemon thread of its own. It is the broker minus its listeners: the
  LogManager (the directory lock, recovery, topics, topic configs, flushes, checkpoints),
  the retention and deleted-directory tasks, the I/O threads, producer ids, and the group
  coordinators with ``__consumer_offsets``. The data directory is laid out exactly as a
  broker lays it out, so a broker started on it later reads everything.
- ``EmbeddedConnection``: the calls of ``BrokerConnection`` (``send``, ``send_nowait``,
  ``wait``, ``version_for``, ``close``), but a request object is handed, unencoded, to the
  broker's dispatcher (``pylog.broker.handlers.dispatch``) on the embedded broker's loop,
  and the response object comes back. So offsets, timestamps (LogAppendTime topics too),
  idempotent sequence checks, ``compression.type`` rewrites, ``max.message.bytes`` and
  the other append errors, auto-creation with ``num.partitions``, topic configs,
  DeleteRecords and the group coordinator are the broker's own code, not a copy. The
  requests of one connection are handled one after the other in the order sent, as the
  broker's network layer handles a connection's requests. A Fetch answer carries
  ``logcore.FileRegion``s (the broker sends them with ``sendfile``); they are read into
  bytes on the client's side, the one copy the network mode makes too (into the socket).
- ``EmbeddedCluster``: the ``Cluster`` that hands out that connection for every node id
  (the embedded broker is node ``node.id``, 0 by default, leader of every partition).

Sharing and locking: one ``EmbeddedBroker`` per data directory per process (by real
path), reference-counted: every client of the process opened on the directory uses it,
and the last one to close shuts it down cleanly (flush, checkpoints, clean-shutdown
marker), which frees the directory. The directory lock (``pylog.log.dir_lock``) keeps
every other process out — a broker, or another program's embedded clients — and
``acquire`` turns its refusal into a ``LogDirInUseError`` that names the holder.
``broker.config`` (server.properties names) configures the broker when the directory is
opened; a later client of the same process must give the same settings or none. An
``atexit`` hook closes directories whose clients were never closed.

Thread-safety: ``acquire`` and ``release`` may be called from any thread (one lock). An
``EmbeddedConnection`` belongs to the client's loop; its requests run on the embedded
broker's loop.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import os
import threading
from typing import Any

import logcore
from pylog.broker.handlers import SUPPORTED_VERSIONS, RequestContext, dispatch
from pylog.broker.server import Broker
from pylog.client._loop import LoopThread
from pylog.client.aio._cluster import Cluster
from pylog.client.config import ConfigError
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.config import BrokerConfig, parse_properties
from pylog.config import ConfigError as BrokerConfigError
from pylog.log.dir_lock import LogDirInUseError
from pylog.log.topics import read_meta_properties
from pylog.net.connection import pick_version

__all__ = ["EmbeddedBroker", "EmbeddedCluster", "EmbeddedConnection", "acquire", "release",
           "LogDirInUseError"]

log = logging.getLogger("pylog.client.embedded")

# Broker settings that name what embedded mode fixes itself: the directory is log.dir,
# and there are no listeners.
_NOT_IN_BROKER_CONFIG = ("log.dirs", "log.dir", "listeners", "advertised.listeners",
                         "metrics.listener")

_FETCH = 1
_PRODUCE = 0

# A handler asked for the connection to be closed instead of answering (Produce with
# acks=0 that failed: Kafka closes the connection so that the client refreshes metadata).
_CLOSE = object()


# ----------------------------------------------------------------------------- the broker


def _settings(given: dict[str, str] | str | None) -> dict[str, str] | None:
    """``broker.config`` as a mapping of strings (a properties file is read here)."""
    if given is None or isinstance(given, dict):
        return given
    try:
        with open(given, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"broker.config: cannot read {given}: {exc.strerror}") from None


def _broker_config(log_dir: str, values: dict[str, str] | None) -> BrokerConfig:
    values = dict(values or {})
    for key in _NOT_IN_BROKER_CONFIG:
        if key in values:
            raise ConfigError(f"broker.config: {key} does not apply in embedded mode (the data "
                              "directory is log.dir, and nothing listens)")
    if "node.id" not in values and "broker.id" not in values:
        # A directory a broker with another node.id wrote: open it as that node.
        node_id = read_meta_properties(log_dir).get("node.id")
        if node_id is not None:
            values["node.id"] = node_id
    values["log.dir"] = log_dir
    try:
        return BrokerConfig(values)
    except BrokerConfigError as exc:
        raise ConfigError(f"broker.config: {exc}") from None


async def _start(config: BrokerConfig) -> Broker:
    return await Broker(config, allow_pure_python=True, listen=False).start_or_shut_down()


class EmbeddedBroker:
    """One data directory opened in this process: a ``Broker`` that does not listen, on an
    event loop in a daemon thread of its own. Get it with ``acquire``, give it back with
    ``release``.

    Attributes:
        log_dir: the directory's real path.
        loop: the broker's event loop (requests are run there).
        broker: the ``Broker``.
        versions: ``{api_key: (min, max)}`` the broker serves (what ApiVersions lists).
    """

    def __init__(self, log_dir: str, settings: dict[str, str] | None) -> None:
        self.log_dir = log_dir
        self.settings = settings
        self.refs = 1
        config = _broker_config(log_dir, settings)
        self._thread = LoopThread(f"pylog-embedded-{os.path.basename(log_dir) or log_dir}")
        self.loop = self._thread.loop
        try:
            self.broker: Broker = self._thread.run(_start(config))
        except BaseException:
            self._thread.stop()
            raise
        self.node_id = self.broker.node_id
        self.versions: dict[int, tuple[int, int]] = dict(SUPPORTED_VERSIONS)

    def metrics(self) -> str:
        """The broker's metrics in Prometheus's text format (what ``/metrics`` serves),
        collected on the broker's loop; blocking."""
        from pylog.metrics.http import scrape

        return str(self._thread.run(scrape(self.broker)))

    def stop(self) -> None:
        """Shut the broker down cleanly (the logs are flushed and closed, the lock freed)."""
        try:
            self._thread.run(self.broker.shutdown())
        finally:
            self._thread.stop()


_OPEN: dict[str, EmbeddedBroker] = {}
_GUARD = threading.Lock()


def acquire(log_dir: str, broker_config: dict[str, str] | str | None) -> EmbeddedBroker:
    """The embedded broker of ``log_dir``, opened (recovering its logs if needed) by the
    first caller of the process; blocking.

    Args:
        log_dir: the data directory (created if missing).
        broker_config: broker settings (server.properties names) as a mapping of strings or
            a properties file's path; None: the broker's defaults, or whatever the
            directory is already open with.

    Raises:
        LogDirInUseError: another process holds the directory (the message names it).
        ConfigError: a bad ``broker_config``, or other settings than those the directory
            is already open with in this process.
        OSError, logcore.LogDirError: the directory cannot be used.
    """
    path = os.path.realpath(log_dir)
    settings = _settings(broker_config)
    with _GUARD:
        eb = _OPEN.get(path)
        if eb is not None:
            if settings is not None and settings != eb.settings:
                raise ConfigError(
                    f"broker.config: {path} is already open in this process with "
                    f"{eb.settings or 'the default broker settings'}; give the same "
                    "broker.config, or none")
            eb.refs += 1
            return eb
        try:
            eb = EmbeddedBroker(path, settings)
        except LogDirInUseError as exc:
            raise _in_use(path, exc) from None
        except BrokerConfigError as exc:  # e.g. meta.properties of another node.id
            raise ConfigError(f"broker.config: {exc}") from None
        _OPEN[path] = eb
        log.info("opened %s in embedded mode", path)
        return eb


def release(eb: EmbeddedBroker) -> None:
    """Give back what ``acquire`` returned; the last release shuts the broker down."""
    with _GUARD:
        eb.refs -= 1
        if eb.refs > 0:
            return
        if _OPEN.get(eb.log_dir) is eb:
            del _OPEN[eb.log_dir]
        eb.stop()
        log.info("closed %s (embedded mode)", eb.log_dir)


def metrics(log_dir: str) -> str:
    """The Prometheus text of the embedded broker open on ``log_dir`` in this process.

    Raises:
        ConfigError: no client of this process has ``log_dir`` open.
    """
    path = os.path.realpath(log_dir)
    with _GUARD:
        eb = _OPEN.get(path)
    if eb is None:
        raise ConfigError(f"no embedded broker is open on {path} in this process: open a "
                          "client with log.dir first (metrics of a broker that listens are "
                          "served on its metrics.listener)")
    return eb.metrics()


@atexit.register
def _close_forgotten() -> None:
    """Directories whose clients were never closed are closed cleanly at exit."""
    with _GUARD:
        left = list(_OPEN.values())
        _OPEN.clear()
    for eb in left:
        log.warning("closing %s at exit: %d embedded client(s) were not closed", eb.log_dir,
                    eb.refs)
        try:
            eb.stop()
        except Exception:  # noqa: BLE001 - exiting: close the others
            log.exception("closing %s failed", eb.log_dir)


def _in_use(log_dir: str, exc: LogDirInUseError) -> LogDirInUseError:
    holder = exc.holder
    if holder is not None and holder[0] == os.getpid():
        who = f"this process (pid {holder[0]}): a broker of its own has it open"
    elif holder is not None:
        who = f"pid {holder[0]} ({holder[1]})"
    else:
        who = "another process"
    err = LogDirInUseError(
        exc.errno, f"cannot open {log_dir} in embedded mode: it is in use by {who}. One "
        "process at a time opens a data directory (a broker, or the embedded clients of one "
        "program): stop that process or close its clients, or give log.dir another directory")
    err.log_dir, err.holder = log_dir, holder
    return err


# ----------------------------------------------------------------------------- a connection


class EmbeddedConnection:
    """A connection to the embedded broker: requests go to its dispatcher, unencoded.

    Same calls and errors as ``BrokerConnection``: a request not answered within its
    timeout closes the connection (``KafkaTimeoutError``) and fails the others in flight
    (``KafkaConnectionError``); the owner opens a new one on next use. Requests already
    handed over go on running on the broker when the connection closes, their answers
    dropped, except fetches (a long poll nobody waits for), as the broker's network layer
    does when a client goes away: a LeaveGroup sent just before close still takes effect,
    and a JoinGroup parked on an abandoned connection waits for its rebalance as over TCP.
    """

    def __init__(self, backend: EmbeddedBroker, *, node_id: int, client_id: str,
                 request_timeout: float) -> None:
        self.node_id = node_id
        self.address = f"embedded:{backend.log_dir}"
        self.versions = dict(backend.versions)
        self.request_timeout = request_timeout
        self.error: BaseException | None = None
        self._backend = backend
        self._client_id = client_id
        self._closed = False
        self._next_cid = 0
        # Each request's answer -> (its run on the broker's loop, its API key).
        self._in_flight: dict[asyncio.Future[Any], tuple[concurrent.futures.Future[Any], int]] = {}
        # Broker-loop side: the completion of the last request handed over, which the next
        # one waits for (one request at a time, in order, as on a socket).
        self._tail: asyncio.Future[None] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        return pick_version(self.versions, cls, self.address, max_version)

    async def send(self, body: Any, version: int | None = None, *,
                   timeout: float | None = None) -> Any:
        """Run one request on the embedded broker; its response (None for acks=0 Produce).

        Raises:
            KafkaConnectionError: the connection is closed.
            KafkaTimeoutError: no answer within ``timeout`` (default ``request.timeout.ms``).
        """
        fut = self.send_nowait(body, version)
        if fut is None:
            return None
        return await self.wait(fut, timeout, type(body).NAME)

    def send_nowait(self, body: Any, version: int | None = None) -> asyncio.Future[Any] | None:
        """Hand one request over now (requests run in call order); the future of its answer
        (None for a Produce with acks=0).

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        if self._closed:
            raise KafkaConnectionError(f"connection to {self.address} is closed"
                                       + (f": {self.error}" if self.error else ""))
        if version is None:
            version = self.version_for(type(body))
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        cf = asyncio.run_coroutine_threadsafe(self._serve(body, version, cid),
                                              self._backend.loop)
        self._in_flight[fut] = (cf, type(body).API_KEY)
        cf.add_done_callback(functools.partial(self._answered, loop, fut))
        fut.add_done_callback(self._forget)
        if type(body).API_KEY == _PRODUCE and body.acks == 0:
            return None
        return fut

    async def wait(self, fut: asyncio.Future[Any], timeout: float | None = None,
                   what: str = "request") -> Any:
        """Wait for a ``send_nowait`` answer; on timeout close the connection.

        Raises:
            KafkaConnectionError: the connection was closed first.
            KafkaTimeoutError: no answer within ``timeout`` (default ``request.timeout.ms``).
        """
        timeout = self.request_timeout if timeout is None else timeout
        try:
            resp = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            err = KafkaTimeoutError(f"{self.address}: no answer to {what} within {timeout:g} s")
            self._shut(err)
            raise err from None
        if type(resp).API_KEY == _FETCH:
            _read_regions(resp)
        return resp

    async def _serve(self, body: Any, version: int, cid: int) -> Any:
        """On the broker's loop: wait for the previous request, then dispatch this one."""
        loop = asyncio.get_running_loop()
        prev, done = self._tail, loop.create_future()
        self._tail = done
        received = loop.time()
        try:
            if prev is not None and not prev.done():
                await asyncio.shield(prev)
            broker = self._backend.broker
            ctx = RequestContext(broker, type(body).API_KEY, version, cid,
                                 self._client_id, self.address)
            started = loop.time()
            resp = await dispatch(ctx, body)
            # The broker's request metrics as for a socket, with no response to send.
            broker.metrics.record_request(ctx.api_key, version, started - received,
                                          loop.time() - started, ctx.remote_s, 0.0,
                                          ctx.throttle_ms)
            return _CLOSE if ctx.close_connection else resp
        finally:
            done.set_result(None)
            if self._tail is done:
                self._tail = None

    def _answered(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any],
                  cf: concurrent.futures.Future[Any]) -> None:
        """On the broker's thread: pass the outcome to the client's loop."""
        try:
            loop.call_soon_threadsafe(self._settle, fut, cf)
        except RuntimeError:  # the client's loop is closed: nobody waits any more
            pass

    def _settle(self, fut: asyncio.Future[Any], cf: concurrent.futures.Future[Any]) -> None:
        if fut.done():
            return
        if cf.cancelled():
            fut.set_exception(self.error or KafkaConnectionError(
                f"connection to {self.address} closed"))
            return
        exc = cf.exception()
        if exc is not None:
            fut.set_exception(exc)
            return
        result = cf.result()
        if result is _CLOSE:
            err = KafkaConnectionError(f"{self.address}: closed by the broker after a failed "
                                       "produce with acks=0")
            fut.set_exception(err)
            self._shut(err)
            return
        fut.set_result(result)

    def _forget(self, fut: asyncio.Future[Any]) -> None:
        entry = self._in_flight.pop(fut, None)
        if fut.cancelled():
            if entry is not None and entry[1] == _FETCH:
                entry[0].cancel()  # stops a fetch's long poll on the broker
        else:
            fut.exception()  # retrieved: a late failure nobody awaits is not a warning

    def _shut(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self._closed = True
        for fut, (cf, api_key) in list(self._in_flight.items()):
            if api_key == _FETCH:
                cf.cancel()  # a long poll nobody waits for; other requests run on
            if not fut.done():
                fut.set_exception(error)

    async def close(self, error: BaseException | None = None) -> None:
        """Close; requests in flight fail with ``error`` (idempotent)."""
        self._shut(error or KafkaConnectionError(f"connection to {self.address} closed"))

    def abort(self, error: BaseException | None = None) -> None:
        """``close`` without waiting (nothing to flush in process)."""
        self._shut(error or KafkaConnectionError(f"connection to {self.address} aborted"))


def _read_regions(resp: Any) -> None:
    """Replace the ``FileRegion``s of a Fetch answer by their bytes (the fetch handler has
    brought their pages into the page cache; a region stays readable after retention
    deletes its segment)."""
    for t in resp.responses:
        for p in t.partitions:
            if isinstance(p.records, logcore.FileRegion):
                p.records = p.records.read()


# ----------------------------------------------------------------------------- the cluster


class EmbeddedCluster(Cluster):
    """The ``Cluster`` of an embedded client: one connection to the embedded broker, handed
    out for every node id. Metadata, refreshes and topics work as over TCP (the broker
    answers Metadata as it does on the network).

    Args:
        log_dir: the data directory.
        broker_config: ``broker.config`` (see ``acquire``).
        Others: as ``Cluster``.
    """

    embedded = True

    def __init__(self, log_dir: str, broker_config: dict[str, str] | str | None, *,
                 client_id: str, request_timeout: float, metadata_max_age: float,
                 max_in_flight: int = 100, auto_create: bool = False,
                 retry_backoff: float = 0.1) -> None:
        super().__init__([], client_id=client_id, request_timeout=request_timeout,
                         connect_timeout=request_timeout, metadata_max_age=metadata_max_age,
                         max_in_flight=max_in_flight, auto_create=auto_create,
                         retry_backoff=retry_backoff)
        self.log_dir = log_dir
        self.broker_config = broker_config
        self.backend: EmbeddedBroker | None = None
        self._conn: EmbeddedConnection | None = None
        self._opening: asyncio.Task[EmbeddedBroker] | None = None

    async def open(self) -> None:
        """Open the data directory (shared with this process's other clients of it).

        Raises:
            LogDirInUseError, ConfigError, OSError: as ``acquire``.
        """
        if self.backend is not None:
            return
        if self._closed:
            raise KafkaConnectionError("client is closed")
        if self._opening is None or self._opening.done() and self._opening.exception():
            self._opening = asyncio.get_running_loop().create_task(self._acquire())
        await asyncio.shield(self._opening)

    async def _acquire(self) -> EmbeddedBroker:
        backend = await asyncio.to_thread(acquire, self.log_dir, self.broker_config)
        if self._closed:  # closed while it was opening
            await asyncio.to_thread(release, backend)
            raise KafkaConnectionError("client is closed")
        self.backend = backend
        return backend

    def _current(self) -> EmbeddedConnection:
        conn = self._conn
        if conn is None or conn.closed:
            if self._closed or self.backend is None:
                raise KafkaConnectionError("client is closed")
            conn = self._conn = EmbeddedConnection(
                self.backend, node_id=self.backend.node_id, client_id=self.client_id,
                request_timeout=self.request_timeout)
        return conn

    async def connection(self, node_id: int) -> EmbeddedConnection:
        await self.open()
        return self._current()

    def ready_connection(self, node_id: int) -> EmbeddedConnection | None:
        if self.backend is not None and not self._closed:
            return self._current()
        if not self._closed and (self._opening is None or self._opening.done()):
            task = asyncio.get_running_loop().create_task(self._open_quietly(node_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return None

    async def coordinator_connection(self, node_id: int, host: str, port: int
                                     ) -> EmbeddedConnection:
        """A second connection to the embedded broker for the group coordinator (its
        requests are served in order per connection, so a JoinGroup waiting for a
        rebalance must not hold up fetches, as over TCP)."""
        await self.open()
        if self._closed or self.backend is None:
            raise KafkaConnectionError("client is closed")
        return EmbeddedConnection(self.backend, node_id=self.backend.node_id,
                                  client_id=self.client_id, request_timeout=self.request_timeout)

    async def any_connection(self) -> EmbeddedConnection:
        await self.open()
        return self._current()

    async def close(self) -> None:
        self._closed = True
        await super().close()
        if self._conn is not None:
            await self._conn.close()
        opening = self._opening
        if opening is not None and not opening.done():
            try:
                await opening  # releases what it opened: the cluster is closed
            except (KafkaConnectionError, Exception):  # noqa: BLE001 - closing
                pass
        backend, self.backend = self.backend, None
        if backend is not None:
            await asyncio.to_thread(release, backend)

