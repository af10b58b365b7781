"""What a client knows of the cluster: brokers, partition leaders, connections to them.

``Cluster`` holds the latest Metadata answer and one ``BrokerConnection`` per broker
(opened on first use, reopened after it breaks). Metadata is refreshed when a caller asks
(``request_update`` after NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, a lost
connection ...), when a topic in use is missing, and at least every
``metadata.max.age.ms``. Refreshes are single-flight: concurrent callers share one
request. A refresh asks any reachable broker (known brokers first, then the bootstrap
addresses), so the cluster is found again after the broker a client first met restarts.

``make_cluster`` picks the transport from the settings: this class (TCP connections to
brokers) for ``bootstrap.servers``, ``_embedded.EmbeddedCluster`` (a broker run in this
process, no sockets) for ``log.dir``. The producer, consumer and admin cores only talk to
a ``Cluster`` and the connections it hands out, so both modes share all their code.

Event-loop affinity: owned by one loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.client.aio._tasks import cancel_all
from pylog.client.config import ConfigError
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.net.connection import BrokerConnection, Connection
from pylog.protocol.messages import MetadataRequest

if TYPE_CHECKING:
    from pylog.client.config import Resolved

__all__ = ["Cluster", "PartitionInfo", "TopicInfo", "make_cluster"]


class PartitionInfo:
    __slots__ = ("partition", "leader", "leader_epoch", "replicas", "isr", "error_code")

    def __init__(self, partition: int, leader: int, leader_epoch: int, replicas: list[int],
                 isr: list[int], error_code: int) -> None:
        self.partition = partition
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.error_code = error_code


class TopicInfo:
    __slots__ = ("name", "error_code", "partitions", "topic_id", "is_internal", "_available")

    def __init__(self, name: str, error_code: int, partitions: dict[int, PartitionInfo],
                 topic_id: Any, is_internal: bool) -> None:
        self.name = name
        self.error_code = error_code
        self.partitions = partitions
        self.topic_id = topic_id
        self.is_internal = is_internal
        # Immutable once built (a refresh builds a new TopicInfo): computed once, read by
        # every keyless send.
        self._available = [p for p, info in partitions.items() if info.leader >= 0]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def available(self) -> list[int]:
        """Partitions with a leader now (do not modify the list)."""
        return self._available


def make_cluster(settings: Resolved, client_id: str, *, auto_create: bool = False,
                 max_in_flight: int = 100) -> Cluster:
    """The cluster view of a client: over TCP (``bootstrap.servers``) or embedded
    (``log.dir``: the data directory opened in this process)."""
    common: dict[str, Any] = dict(
        client_id=client_id, request_timeout=settings["request.timeout.ms"] / 1000,
        metadata_max_age=settings["metadata.max.age.ms"] / 1000, max_in_flight=max_in_flight,
        auto_create=auto_create, retry_backoff=settings["retry.backoff.ms"] / 1000)
    if settings["log.dir"] is not None:
        from pylog.client.aio._embedded import EmbeddedCluster

        return EmbeddedCluster(settings["log.dir"], settings["broker.config"], **common)
    return Cluster(settings["bootstrap.servers"],
                   connect_timeout=settings["socket.connection.setup.timeout.ms"] / 1000,
                   ssl_context=tls_context(settings), sasl=sasl_config(settings), **common)


def tls_context(settings: Resolved) -> Any:
    """The client's TLS context for ``security.protocol=SSL`` (None for PLAINTEXT).

    Raises:
        ConfigError: a TLS setting that cannot be used (a missing file, a bad password).
    """
    if settings["security.protocol"] not in ("SSL", "SASL_SSL"):
        return None
    from pylog.config import ConfigError as BrokerConfigError
    from pylog.security.tls import client_context

    try:
        return client_context({k: v for k, v in settings.items() if k.startswith("ssl.")})
    except BrokerConfigError as exc:
        raise ConfigError(str(exc)) from None


def sasl_config(settings: Resolved) -> Any:
    """The client's SASL settings for ``security.protocol=SASL_*`` (None otherwise).

    Raises:
        ConfigError: a mechanism pylog does not speak, or missing credentials.
    """
    if not str(settings["security.protocol"]).startswith("SASL_"):
        return None
    from pylog.config import ConfigError as BrokerConfigError
    from pylog.security.sasl.client import client_sasl

    try:
        return client_sasl(settings)
    except BrokerConfigError as exc:
        raise ConfigError(str(exc)) from None


class Cluster:
    """Brokers, topics and connections of one client.

    Args:
        bootstrap: (host, port) pairs.
        client_id: sent in request headers.
        request_timeout: seconds per request.
        connect_timeout: seconds for connect + ApiVersions.
        metadata_max_age: seconds after which metadata is refreshed anyway.
        max_in_flight: pipelining bound of each connection.
        auto_create: ask the broker to create unknown topics in Metadata requests
            (producers do, as the Java producer does; consumers and admins do not).
    """

    def __init__(self, bootstrap: list[tuple[str, int]], *, client_id: str,
                 request_timeout: float, connect_timeout: float, metadata_max_age: float,
                 max_in_flight: int = 100, auto_create: bool = False,
                 retry_backoff: float = 0.1, ssl_context: Any = None, sasl: Any = None) -> None:
        self.bootstrap = bootstrap
        self.ssl_context = ssl_context  # security.protocol=SSL or SASL_SSL
        self.sasl = sasl  # security.protocol=SASL_*: a SaslClientConfig
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.metadata_max_age = metadata_max_age
        self.max_in_flight = max_in_flight
        self.auto_create = auto_create
        self.retry_backoff = retry_backoff
        self.brokers: dict[int, tuple[str, int]] = {}
        self.racks: dict[int, str | None] = {}  # broker id -> rack (for rack-aware assignors)
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.wanted: set[str] = set()  # topics whose metadata we keep
        # Ask for every topic (a pattern subscription matches names against all of them).
        self.all_topics = False
        self.version = 0  # bumped by every applied Metadata answer
        self._conns: dict[int, BrokerConnection] = {}
        self._bootstrap_conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._any_lock = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self.on_connect: list[Any] = []  # called when a background connect ends
        self._refresh: asyncio.Task[None] | None = None
        self._updated_at = -1e18
        self._need_update = True
        self._closed = False
        self.last_error: BaseException | None = None
        # Every connection this cluster opened, the coordinators' own included (their
        # owners close them): what ``abort`` aborts.
        self._opened: weakref.WeakSet[BrokerConnection] = weakref.WeakSet()

    #: True for ``EmbeddedCluster`` (a broker in this process).
    embedded = False

    # ------------------------------------------------------------------ connections

    async def open(self) -> None:
        """Get ready to serve requests. Nothing to do over TCP (connections open on first
        use); embedded mode opens the data directory here, so that a directory in use or
        a bad ``broker.config`` fails the client's constructor or ``start()``."""

    async def connection(self, node_id: int) -> Connection:
        """An open connection to broker ``node_id`` (opened if needed).

        Raises:
            KafkaConnectionError: unknown broker or unreachable.
        """
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(node_id)
        if pending is None:
            if self._closed:
                raise KafkaConnectionError("client is closed")
            addr = self.brokers.get(node_id)
            if addr is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the metadata")
            pending = asyncio.get_running_loop().create_task(self._open(node_id, addr))
            # Its failure is its callers' to read; with every caller cancelled (a close),
            # nobody would, and asyncio would log "Task exception was never retrieved".
            pending.add_done_callback(_retrieve)
            self._connecting[node_id] = pending
        # Concurrent callers share one connect; shielded so one caller's cancellation does
        # not abort it for the others.
        return await asyncio.shield(pending)

    async def coordinator_connection(self, node_id: int, host: str, port: int) -> Connection:
        """A connection of its own to a group coordinator (``node_id`` at ``host:port``), as
        the Java consumer opens one: a JoinGroup that waits for a rebalance must not hold
        up the fetches on the broker's ordinary connection. The caller closes it.

        Raises:
            KafkaConnectionError: it could not be opened.
        """
        if self._closed:
            raise KafkaConnectionError("client is closed")
        conn = self._new_connection(host, port, node_id)
        await conn.connect(self.connect_timeout)
        if self._closed:  # closed or aborted while connecting: nobody would close it
            await conn.close()
            raise KafkaConnectionError("client is closed")
        return conn

    def _new_connection(self, host: str, port: int, node_id: int,
                        max_in_flight: int = 100) -> BrokerConnection:
        conn = BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                request_timeout=self.request_timeout, max_in_flight=max_in_flight,
                                ssl_context=self.ssl_context, sasl=self.sasl)
        self._opened.add(conn)
        return conn

    def ready_connection(self, node_id: int) -> Connection | None:
        """The open connection to ``node_id`` now, or None (then one is being opened)."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if node_id not in self._connecting and not self._closed and node_id in self.brokers:
            task = asyncio.get_running_loop().create_task(self._open_quietly(node_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return None

    async def _open_quietly(self, node_id: int) -> None:
        try:
            await self.connection(node_id)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self.last_error = exc
            self.request_update()
        for fn in list(self.on_connect):
            fn()

    async def _open(self, node_id: int, addr: tuple[str, int]) -> BrokerConnection:
        conn = self._new_connection(addr[0], addr[1], node_id, self.max_in_flight)
        try:
            await conn.connect(self.connect_timeout)
        finally:
            self._connecting.pop(node_id, None)
        if self._closed:
            await conn.close()
            raise KafkaConnectionError("client is closed")
        self._conns[node_id] = conn
        return conn

    async def any_connection(self) -> Connection:
        """A connection to any reachable broker: known ones first, then bootstrap addresses.

        Raises:
            KafkaConnectionError: none is reachable (the last error is in the message).
        """
        async with self._any_lock:  # one search at a time: no duplicate bootstrap sockets
            return await self._any_connection()

    async def _any_connection(self) -> Connection:
        last: BaseException | None = None
        for conn in list(self._conns.values()):
            if not conn.closed:
                return conn
        for node_id in list(self.brokers):
            try:
                return await self.connection(node_id)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
        for i, (host, port) in enumerate(self.bootstrap):
            known = self._bootstrap_conns.get(i)
            if known is not None and not known.closed:
                return known
            if self._closed:
                raise KafkaConnectionError("client is closed")
            conn = self._new_connection(host, port, -1 - i)
            try:
                await conn.connect(self.connect_timeout)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
                continue
            if self._closed:  # close() cleared the table while this connect ran
                await conn.close()
                raise KafkaConnectionError("client is closed")
            self._bootstrap_conns[i] = conn
            return conn
        raise KafkaConnectionError(f"no broker is reachable: {last}")

    # ------------------------------------------------------------------ metadata

    def request_update(self) -> None:
        """Ask for a metadata refresh on the next ``maybe_update`` (cheap; no I/O)."""
        self._need_update = True

    def needs_update(self) -> bool:
        return self._need_update or time.monotonic() - self._updated_at >= self.metadata_max_age

    async def maybe_update(self) -> None:
        if self.needs_update():
            await self.update()

    async def update(self, topics: set[str] | None = None) -> None:
        """Refresh metadata for ``wanted`` topics (plus ``topics``); single-flight.

        Raises:
            KafkaConnectionError / KafkaTimeoutError: no broker answered.
        """
        if topics:
            self.wanted |= topics
        task = self._refresh
        if task is None or task.done():
            task = self._refresh = asyncio.get_running_loop().create_task(self._do_update())
        await asyncio.shield(task)

    async def _do_update(self) -> None:
        conn = await self.any_connection()
        everything = self.all_topics
        names = sorted(self.wanted)
        req = MetadataRequest(
            topics=None if everything else [MetadataRequest.MetadataRequestTopic(name=t) for t in names],
            allow_auto_topic_creation=self.auto_create and not everything)
        try:
            resp = await conn.send(req)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._need_update = True
            raise
        self._apply(resp, None if everything else names)

    async def describe_all(self) -> Any:
        """A Metadata answer for every topic (for admin listings); also applied."""
        conn = await self.any_connection()
        resp = await conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False))
        self._apply(resp, None)
        return resp

    def _apply(self, resp: Any, asked: list[str] | None) -> None:
        """Take a Metadata answer; ``asked`` None means it lists every topic."""
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        self.racks = {b.node_id: b.rack for b in resp.brokers}
        self.version += 1
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        for t in resp.topics:
            parts = {p.partition_index: PartitionInfo(p.partition_index, p.leader_id,
                                                      p.leader_epoch, list(p.replica_nodes),
                                                      list(p.isr_nodes), p.error_code)
                     for p in t.partitions}
            self.topics[t.name] = TopicInfo(t.name, t.error_code, parts, t.topic_id,
                                            t.is_internal)
        answered = {t.name for t in resp.topics}
        for name in list(self.topics) if asked is None else asked:
            # Asked and not answered, or not in a listing of all topics: gone.
            if name not in answered:
                self.topics.pop(name, None)
        self._updated_at = time.monotonic()
        self._need_update = any(
            info.error_code or any(p.leader < 0 for p in info.partitions.values())
            for name, info in self.topics.items() if name in self.wanted)
        # Drop connections to brokers that left the cluster.
        for node_id in [n for n in self._conns if n not in self.brokers]:
            conn = self._conns.pop(node_id)
            asyncio.get_running_loop().create_task(conn.close())

    def topic(self, name: str) -> TopicInfo | None:
        """Known metadata of ``name`` with partitions, else None."""
        info = self.topics.get(name)
        if info is None or info.error_code or not info.partitions:
            return None
        return info

    async def wait_for_topic(self, name: str, timeout: float) -> TopicInfo:
        """Metadata of ``name``, refreshing until it has partitions or ``timeout`` passes.

        Raises:
            KafkaTimeoutError: the topic did not appear in time (the broker's last error
                code for it is in the message).
            ApiError: a non-retriable error for the topic (e.g. INVALID_TOPIC_EXCEPTION).
        """
        self.wanted.add(name)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: BaseException | None = None
        while True:
            info = self.topic(name)
            if info is not None:
                return info
            known = self.topics.get(name)
            if known is not None and known.error_code:
                cls = errors.error_for_code(known.error_code)
                if cls is not None and not cls.retriable:
                    raise cls(f"topic {name!r}: {cls.name}")
                last = cls(f"topic {name!r}: {cls.name}") if cls else None
            left = deadline - loop.time()
            if left <= 0:
                raise KafkaTimeoutError(f"topic {name!r} not present in metadata after "
                                        f"{timeout:g} s" + (f" (last error: {last})" if last else ""))
            try:
                await asyncio.wait_for(self.update({name}), left)
            except asyncio.TimeoutError:
                continue
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
            if self.topic(name) is None:
                await asyncio.sleep(min(self.retry_backoff, max(0.0, deadline - loop.time())))

    async def close(self) -> None:
        self._closed = True
        await cancel_all([*self._background, *self._connecting.values(), self._refresh])
        conns = list(self._conns.values()) + list(self._bootstrap_conns.values())
        self._conns.clear()
        self._bootstrap_conns.clear()
        for i, conn in enumerate(conns):
            try:
                await conn.close()
            except asyncio.CancelledError:
                # This close was cancelled: the connections not closed yet are aborted (a
                # socket nobody closes is an "unclosed transport" once the loop is gone).
                for rest in conns[i + 1:]:
                    rest.abort()
                raise

    def abort(self) -> None:
        """Give up at once (a client's ``close(timeout)`` out of time): no new connection,
        and every connection this cluster opened, a coordinator's own included, is aborted
        (its requests fail, its socket is closed without flushing). Synchronous: the
        blocking client calls it on its loop while the close coroutine is still stuck."""
        self._closed = True
        for conn in list(self._opened):
            conn.abort(KafkaConnectionError("the client's close timed out"))
        self._conns.clear()
        self._bootstrap_conns.clear()


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
