"""The broker process: one asyncio event loop for the network, plus I/O threads for disk work
(docs/architecture.md).

``Broker`` owns the configuration, the LogManager, the fetch waiters, the I/O thread pool
(``num.io.threads``, ``io_threads``), the request memory pool (``queued.max.request.bytes``,
``memory_pool``), the listening sockets and the periodic tasks (retention, removal of
deleted topic directories). ``run_broker`` is what ``pylog broker`` calls: it installs
SIGTERM/SIGINT handlers that shut down cleanly (stop accepting, let in-flight requests
finish, close every log: flush, checkpoints, clean-shutdown marker).

Event-loop affinity: every method runs on the broker's loop unless documented otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import logcore
from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.broker.fetch_sessions import FetchSessionCache
from pylog.broker.group_config_file import open_group_configs
from pylog.broker.intercept import RequestInterceptor
from pylog.broker.io_threads import IoThreads
from pylog.broker.memory_pool import MemoryPool
from pylog.broker.quotas import ClientQuotas
from pylog.broker.waiters import PartitionWaiters
from pylog.config import BrokerConfig, parse_metrics_listener
from pylog.config.security_defs import TLS_PROTOCOLS
from pylog.group.service import GroupService
from pylog.group.share.service import ShareService
from pylog.log import LogManager
from pylog.metrics import BrokerMetrics
from pylog.replication import ReplicaManager
from pylog.security.authz.service import AclService, create_authorizer
from pylog.txn.service import TransactionService

log = logging.getLogger("pylog.broker")


class PurePythonRefused(RuntimeError):
    pass


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed, else None (asyncio's default loop).

    uvloop is an optional accelerator: the socket calls net.py makes per request
    (sock_recv, sock_recv_into, sock_sendall: a future and an epoll registration each) cost
    less there. Measured with benchmarks/e2e/harness.py, interleaved A/B: broker CPU per
    produced record -17% with paced confluent-kafka producers (smaller requests), -7% with
    kcat's 1 MB requests. ``PYLOG_EVENT_LOOP=asyncio`` keeps asyncio's loop.
    """
    if os.environ.get("PYLOG_EVENT_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


class Broker:
    """A Kafka-compatible broker: a single node, or one broker of a ZooKeeper cluster when
    ``zookeeper.connect`` is set (``cluster``: the controller runtime; ``replicas``: the
    replica manager).

    Args:
        config: validated broker configuration.
        clock: injected time (timestamps, retention).
        allow_pure_python: accept logcore's pure-Python twin (slow; for debugging).
        listen: open the ``listeners``. False for the embedded mode of ``pylog.client``
            (``log_dir=``), whose clients hand their requests to ``handlers.dispatch`` in
            the same process: everything else (logs, retention, groups, I/O threads) runs
            as in a listening broker.
    """

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK,
                 allow_pure_python: bool = False, *, listen: bool = True) -> None:
        self.config = config
        self.clock = clock
        self.allow_pure_python = allow_pure_python
        self.listen = listen
        self.node_id = config.node_id
        self.log_manager = LogManager(config, clock)
        self.waiters = PartitionWaiters()
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                self.clock)
        self.memory_pool = MemoryPool(config["queued.max.request.bytes"])
        # Kafka's request-handler pool: num.io.threads threads for disk work (appends that
        # may block, cold reads, topic and retention file work); see io_threads.
        self.io = IoThreads(config["num.io.threads"])
        self.executor = self.io.executor
        # Group configs (resource type GROUP: per-group overrides of the group settings,
        # pylog.group.group_configs): a local file on a single node, ZooKeeper's
        # /config/groups in cluster mode (pylog.controller.configs keeps this copy current).
        self.group_configs = open_group_configs(config)
        # The group coordinators, one per __consumer_offsets partition (pylog.group.service).
        self.groups = GroupService(self)
        # KIP-932 share partitions, sessions and their state (pylog.group.share.service).
        self.share = ShareService(self)
        # The transaction coordinator for every __transaction_state partition (pylog.txn.service).
        self.txns = TransactionService(self)
        # Leader / follower roles of the partitions (pylog.replication); holds nothing and
        # costs nothing on the request paths until a controller sends LeaderAndIsr.
        self.replicas = ReplicaManager(self)
        # Client quotas (pylog.broker.quotas): the entities and the three quota managers.
        self.quotas = ClientQuotas(self)
        # SCRAM credentials (pylog.broker.scram_admin): what SCRAM listeners check.
        from pylog.broker.scram_admin import ScramService

        self.scram = ScramService(self)
        self._inter_broker_sasl: Any = False
        # ACLs (authorizer.class.name; pylog.security.authz): None when none is configured,
        # and then every check in the handlers is this one attribute test.
        self.authorizer = create_authorizer(config)
        self.acls = AclService(self, self.authorizer) if self.authorizer is not None else None
        # Cluster mode (zookeeper.connect): pylog.controller.runtime.ClusterRuntime; None on
        # a single node (nothing of it is imported or run then).
        self.cluster: Any = None
        # The API tables of connections (None: pylog.protocol.apis' defaults).
        self.api_supported: dict[int, tuple[int, int]] | None = None
        self.api_advertised: dict[int, tuple[int, int]] | None = None
        if config.cluster_mode:
            from pylog.controller.runtime import ClusterRuntime
            from pylog.protocol import apis

            self.cluster = ClusterRuntime(self)
            self.api_supported = {**apis.SUPPORTED, **apis.CLUSTER_ADVERTISED}
            self.api_advertised = {**apis.ADVERTISED, **apis.CLUSTER_ADVERTISED}
        if "consumer" not in [p.lower() for p in config["group.coordinator.rebalance.protocols"]]:
            # Without the KIP-848 protocol its APIs are neither listed nor served, as in Kafka.
            from pylog.protocol import apis

            self.api_supported = {k: v for k, v in (self.api_supported or apis.SUPPORTED).items()
                                  if k not in apis.CONSUMER_GROUP_APIS}
            self.api_advertised = {k: v for k, v in (self.api_advertised or apis.ADVERTISED).items()
                                   if k not in apis.CONSUMER_GROUP_APIS}
        if not config["group.share.enable"]:
            # Share groups off: their APIs are neither listed nor served.
            from pylog.protocol import apis

            self.api_supported = {k: v for k, v in (self.api_supported or apis.SUPPORTED).items()
                                  if k not in apis.SHARE_GROUP_APIS}
            self.api_advertised = {k: v for k, v in (self.api_advertised or apis.ADVERTISED).items()
                                   if k not in apis.SHARE_GROUP_APIS}
        # The dispatcher's interception point (pylog.broker.intercept); None: nothing to do.
        self.interceptor: RequestInterceptor | None = None
        # What the request path counts (pylog.metrics; plain ints on this loop), and the
        # collectors' memory between scrapes (the idle ratios' previous sample).
        self.metrics = BrokerMetrics()
        self.metrics_marks: dict[str, Any] = {}
        self.started_monotonic = time.monotonic()
        self.started_thread_time = 0.0
        # The metrics.listener endpoint (pylog.metrics.http.MetricsServer), when configured.
        self.metrics_server: Any = None
        self.servers: list[Any] = []
        self._inter_broker_tls: Any = False  # not built yet (inter_broker_tls)
        self.bound: list[tuple[str, int]] = []
        self._advertised_cache: tuple[Any, Any, int, tuple[tuple[str, str, int], ...]] | None = None
        self.connections: set[Any] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._started = False
        self._stopped = asyncio.Event()

    @property
    def cluster_id(self) -> str:
        if self.cluster is not None and self.cluster.cluster_id:
            return str(self.cluster.cluster_id)
        return self.log_manager.cluster_id

    def advertised(self, listener: str | None = None) -> tuple[str, int]:
        """Host and port given to clients of ``listener`` (default: the first listener) in
        Metadata: its advertised.listeners entry, else where it is bound (port 0 resolved;
        a wildcard host is replaced by the loopback name). ("", -1) for a listener that is
        not advertised. A broker that does not listen (embedded mode) gives its log
        directory as host and port 0."""
        if not self.listen:
            return self.log_manager.log_dir, 0
        for name, host, port in self.advertised_endpoints():
            if listener is None or name == listener:
                return host, port
        return "", -1

    def advertised_endpoints(self) -> list[tuple[str, str, int]]:
        """(listener name, host, port) of every advertised listener, in config order.

        Asked by every Metadata and FindCoordinator request: computed once per config
        object, its advertised listeners and the listeners bound so far (``bound`` only
        grows, as ``start`` binds them), and reused while those are the same objects."""
        config = self.config
        cached = self._advertised_cache
        if (cached is not None and cached[0] is config
                and cached[1] is config.advertised_listeners and cached[2] == len(self.bound)):
            return list(cached[3])
        out = self._compute_advertised(config)
        self._advertised_cache = (config, config.advertised_listeners, len(self.bound), tuple(out))
        return out

    def _compute_advertised(self, config: Any) -> list[tuple[str, str, int]]:
        bound = {ll.name: addr for ll, addr in zip(config.listeners, self.bound, strict=False)}
        out = []
        for adv in config.advertised_listeners:
            host, port = adv.host, adv.port
            if not config.is_explicit("advertised.listeners") or port == 0:
                b = bound.get(adv.name)
                if b is not None:
                    host = host if config.is_explicit("advertised.listeners") else b[0]
                    port = b[1]
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            out.append((adv.name, host, port))
        return out

    def inter_broker_tls(self) -> Any:
        """The client TLS context for the inter-broker listener (built once), or None when
        that listener is PLAINTEXT. Follower fetchers, the controller's channels and the
        transaction marker writers connect with it."""
        if self._inter_broker_tls is False:
            name = self.config.inter_broker_listener
            listener = self.config.listener(name)
            ctx = None
            if listener is not None and listener.security_protocol in TLS_PROTOCOLS:
                from pylog.security.tls import client_context

                ctx = client_context(self.config.listener_settings(name),
                                     f"listener.name.{name.lower()}.")
            self._inter_broker_tls = ctx
        return self._inter_broker_tls

    def inter_broker_sasl(self) -> Any:
        """The broker's own SASL client settings on the inter-broker listener (built once;
        ``sasl.mechanism.inter.broker.protocol`` with that listener's JAAS credentials), or
        None when that listener is not SASL."""
        if self._inter_broker_sasl is False:
            from pylog.security.sasl.client import client_sasl
            from pylog.security.sasl.listener import inter_broker_client

            settings = inter_broker_client(self.config)
            self._inter_broker_sasl = None if settings is None else client_sasl(
                {"security.protocol": "SASL_PLAINTEXT", **settings})
        return self._inter_broker_sasl

    async def start_or_shut_down(self) -> Broker:
        """``start()``; on any failure, shut down what had started, then re-raise."""
        try:
            await self.start()
        except BaseException:
            await self.shutdown()
            raise
        return self

    async def start(self) -> None:
        """Open the logs (recovering them if needed) and start listening."""
        impl = logcore.IMPLEMENTATION
        if impl != "c" and not self.allow_pure_python:
            raise PurePythonRefused(
                "logcore implementation: python (LOGCORE_PUREPYTHON is set or the extensions "
                "are not built); it is too slow for a broker. Build the extensions "
                "(`make compile`) or pass --allow-pure-python"
            )
        from pylog.broker.handlers import SUPPORTED_VERSIONS
        from pylog.broker.net import Listener
        from pylog.protocol.connection import request_class, response_class

        # Bind before touching the data directory: a taken port is reported (naming it)
        # before anything is created or written there. Accepting starts once the logs are open.
        tls = self._listener_tls() if self.listen else {}
        sasl = self._listener_sasl() if self.listen else {}
        for listener in self.config.listeners if self.listen else []:
            host = listener.host or "0.0.0.0"
            ctx, mapper = tls.get(listener.name, (None, None))
            try:
                lst = Listener(self, host, listener.port, listener.name, ctx, mapper,
                               sasl.get(listener.name))
            except OSError as exc:
                raise OSError(exc.errno, f"cannot listen on {host}:{listener.port} "
                              f"(listeners): {exc.strerror}") from None
            self.servers.append(lst)
            self.bound.append(lst.address)
        self.started_monotonic = time.monotonic()
        self.started_thread_time = time.thread_time()
        # Health checks answer from the start (503 "starting" while the logs load).
        await self._start_metrics()
        loop = asyncio.get_running_loop()
        started = self.clock.monotonic()
        await loop.run_in_executor(self.executor, self.log_manager.startup)
        log.info("loaded %d topics (%d partitions) from %s in %.3f s",
                 len(self.log_manager.topics), len(self.log_manager.all_partitions()),
                 self.log_manager.log_dir, self.clock.monotonic() - started)

        if self.cluster is None:  # cluster mode: from ZooKeeper, with the topic configs
            await loop.run_in_executor(self.executor, self.quotas.load_from_file)
            await loop.run_in_executor(self.executor, self.scram.load_from_file)
            if self.acls is not None:
                await self.acls.start_single_node()

        # Load the message classes now, not on the first client's request (their modules
        # are large; importing one on the loop stalls every connection for milliseconds).
        for key in self.api_supported or SUPPORTED_VERSIONS:
            request_class(key)
            response_class(key)

        # Loads __consumer_offsets in the background when it exists (group requests get
        # COORDINATOR_LOAD_IN_PROGRESS until their partition is loaded).
        await self.groups.start()
        await self.share.start()
        await self.txns.start()
        for listener, lst in zip(self.config.listeners if self.listen else [], self.servers,
                                 strict=True):
            lst.start()
            log.info("listening on %s://%s:%d (%s)", listener.name, *lst.address,
                     listener.security_protocol)
        if self.cluster is not None:
            await self.cluster.start()
        self._tasks.append(asyncio.ensure_future(self._retention_loop()))
        self._tasks.append(asyncio.ensure_future(self._delete_loop()))
        self._tasks.append(asyncio.ensure_future(self._idle_loop()))
        self._started = True
        log.info("pylog broker %d started (cluster id %s; logcore implementation: %s; event "
                 "loop: %s)", self.node_id, self.cluster_id, logcore.IMPLEMENTATION,
                 type(asyncio.get_running_loop()).__module__)

    def _listener_sasl(self) -> dict[str, Any]:
        """{listener name: ListenerSasl} for the SASL listeners, built before anything
        starts so that a bad mechanism list or JAAS entry fails the start naming its key."""
        from pylog.security.sasl.listener import ListenerSasl

        out = {}
        for listener in self.config.listeners:
            if listener.security_protocol.startswith("SASL_"):
                out[listener.name] = ListenerSasl(self.config, listener.name,
                                                  self.scram.credentials, self.clock.time_ms)
                log.info("listener %s: SASL mechanisms %s", listener.name,
                         ", ".join(out[listener.name].mechanisms))
        if self.config.cluster_mode:
            self.inter_broker_sasl()  # its errors too
        return out

    def _listener_tls(self) -> dict[str, tuple[Any, Any]]:
        """{listener name: (server SSLContext, PrincipalMapper)} for the TLS listeners, built
        before anything starts so that a bad key store fails the start naming its key."""
        from pylog.config import ConfigError
        from pylog.security.principal import PrincipalMapper
        from pylog.security.tls import server_context

        out = {}
        for listener in self.config.listeners:
            if listener.security_protocol not in TLS_PROTOCOLS:
                continue
            where = f"listener.name.{listener.name.lower()}."
            settings = self.config.listener_settings(listener.name)
            ctx = server_context(settings, where)
            try:
                mapper = PrincipalMapper(settings["ssl.principal.mapping.rules"])
            except ValueError as exc:
                raise ConfigError("ssl.principal.mapping.rules", str(exc)) from None
            out[listener.name] = (ctx, mapper)
        if self.config.cluster_mode:
            self.inter_broker_tls()  # its errors too
        return out

    async def _start_metrics(self) -> None:
        value = self.config["metrics.listener"]
        if not value or not self.listen:
            return
        from pylog.metrics.http import MetricsServer

        host, port = parse_metrics_listener("metrics.listener", value)
        server = MetricsServer(self, host, port)
        await server.start()
        self.metrics_server = server

    @property
    def started(self) -> bool:
        """Whether start() completed: the logs are loaded and the listeners accept."""
        return self._started

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000.0
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await self.clock.sleep(interval)  # a virtual clock (pylog.testing) runs it on advance()
            try:
                # Segment deletion renames and unlinks files: off the loop.
                snapshot = self.log_manager.all_partitions()
                await loop.run_in_executor(self.executor, self.log_manager.apply_retention,
                                           None, snapshot)
            except Exception:  # noqa: BLE001 - retention must keep running
                log.exception("retention pass failed")

    async def _idle_loop(self) -> None:
        """Close connections idle for connections.max.idle.ms (one timer for all)."""
        idle = self.config["connections.max.idle.ms"] / 1000.0
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await asyncio.sleep(min(max(idle / 3, 0.05), 30.0))
            now = loop.time()
            for conn in list(self.connections):
                conn.close_if_idle(now, idle)
            self.quotas.expire()  # quota sensors idle for an hour

    async def _delete_loop(self) -> None:
        """Remove ``-delete`` directories after file.delete.delay.ms (leftovers at start now)."""
        loop = asyncio.get_running_loop()
        first = True
        while not self._stopping:
            paths = self.log_manager.take_pending_deletes()
            if paths:
                if not first:
                    delay = self.config.topic_default("file.delete.delay.ms") / 1000.0
                    await asyncio.sleep(min(delay, 60.0))
                await loop.run_in_executor(self.executor, LogManager.remove_deleted_dirs, paths)
                log.info("removed %d deleted partition directories", len(paths))
            first = False
            await asyncio.sleep(1.0)

    async def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests, close the logs cleanly."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        # After a failed start this only closes what was opened: no "shut down cleanly".
        if self._started:
            log.info("shutting down")
        else:  # the caller reports why in one line: closing what was opened is a detail
            log.debug("start failed: closing what was opened")
        if self.acls is not None:
            await self.acls.stop()
        if self.cluster is not None:
            await self.cluster.shutdown()
        for server in self.servers:
            await server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Wake long polls so that they answer now with what they have.
        self.waiters.notify_all()
        # Before the connections: parked JoinGroup/SyncGroup requests are answered now
        # (NOT_COORDINATOR) instead of holding the graceful close; queued group writes
        # are appended first.
        await self.replicas.shutdown()
        await self.share.shutdown()
        await self.groups.shutdown()
        await self.txns.shutdown()
        conns = list(self.connections)
        await asyncio.gather(*(c.close_gracefully(timeout=5.0) for c in conns), return_exceptions=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, self.log_manager.shutdown)
        self.io.shutdown()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self._started:
            log.info("shut down cleanly")
        self._stopped.set()

    async def new_producer_id(self) -> int:
        """A producer id never handed out before (``handlers.init_producer_id``: this broker's
        id blocks, or ZooKeeper's in cluster mode). The transaction coordinator asks here:
        it sits below the broker and is handed the broker, never imports it. Raises
        ``pylog.errors.ApiError`` when no id can be allocated."""
        from pylog.broker.handlers.init_producer_id import new_producer_id

        return await new_producer_id(self)

    async def txn_verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> int:
        """KIP-890: may this transactional producer append its first batch to the partition?
        0 when the coordinator has the partition in the producer's open transaction, else
        the error code; always 0 when transaction.partition.verification.enable is false."""
        if not self.config["transaction.partition.verification.enable"]:
            return 0
        return await self.txns.txn_verify(transactional_id, producer_id, producer_epoch, topic, partition)

    @property
    def stopping(self) -> bool:
        return self._stopping


async def run_broker(config: BrokerConfig, *, allow_pure_python: bool = False,
                     ready_file: str | None = None) -> int:
    """Start a broker and serve until SIGTERM or SIGINT; returns the exit status."""
    broker = Broker(config, allow_pure_python=allow_pure_python)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start_or_shut_down()
    if ready_file:
        host, port = broker.bound[0]
        from pylog.log.topics import write_atomically

        write_atomically(ready_file, f"{host}:{port}\n".encode())
    await stop.wait()
    await broker.shutdown()
    return 0
