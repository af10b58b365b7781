"""The transaction coordinator's service: the broker's face of the sans-IO
``TransactionCoordinator``.

``TransactionService`` (one per broker, ``broker.txns``) owns one ``TransactionCoordinator``
for every ``__transaction_state`` partition this broker leads (a single node leads them all,
coordinator epoch 0). What it shares with the group coordinator (hosting, the chunked load
from the log and its retries, ordered appends through the replica manager, resignation) is
the coordinator runtime, ``pylog.coordinator.CoordinatorRuntime``; this module is its
``ShardHandler`` and keeps what is the transactions' own:

- the topic is created on the first FindCoordinator for a transactional id (as Kafka does),
  with ``transaction.state.log.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``compression.type=uncompressed`` and ``transaction.state.log.segment.bytes``; when it exists
  at start every partition is loaded in the background (read
  ``transaction.state.log.load.buffer.size`` bytes at a time, replayed, completed: open
  PrepareCommit/PrepareAbort transactions get their markers again) and its ids get
  COORDINATOR_LOAD_IN_PROGRESS meanwhile, also while a failed load waits for its retry;
- after every call into the coordinator, ``drive`` hands its writes to the runtime
  (appended per partition in order, acks=-1, waiting up to the transaction's timeout), its
  marker requests to delivery tasks (``pylog.replication.markers.write_markers`` for this
  broker's partitions; on a single node written at once when every partition can take
  its marker inline, ``write_markers_inline``) and re-arms one asyncio timer at the
  coordinator's next deadline;
- a request the coordinator answers CONCURRENT_TRANSACTIONS because the transaction is still
  completing (its markers or its CompleteCommit/CompleteAbort write in flight: on one node
  that takes a millisecond or two) is held until the coordinator's state next changes and
  asked again, for at most ``CONCURRENT_WAIT_S``; only then does the client get
  CONCURRENT_TRANSACTIONS (and back off: librdkafka and the Java client wait 20-100 ms).
  The answer is the one the client's own retry would get, without the backoff: a
  commit-then-begin loop measured 4 of 30 AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS
  without the hold, each costing the producer ~20 ms (see docs/transactions.md);
- producer ids come from the broker's allocator (``broker.new_producer_id()``; in
  cluster mode ZooKeeper's ``/latest_producer_id_block``): one is fetched before each
  InitProducerId call so that the coordinator can take it synchronously (unused, it is kept
  for the next call);
- in cluster mode (``broker.cluster`` set) nothing is hosted at start and the topic is never
  created here (FindCoordinator creates it through ZooKeeper): the replica manager calls
  ``on_become_leader(n)`` / ``on_resign(n)`` as this broker starts / stops leading partition
  n, which is loaded with its leader epoch as the coordinator epoch (a newer epoch loads it
  again), or forgotten; markers go to each partition's leader (``pylog.txn.markers``); a
  partition leader's KIP-890 check for an id coordinated elsewhere is a verify-only
  AddPartitionsToTxn to that broker.

Event-loop affinity: everything here runs on the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import logcore
from pylog import errors
from pylog.coordinator import (
    CoordinatorRuntime,
    DeadlineTimer,
    LoadedMarker,
    LoadedRecord,
    TopicSpec,
)
from pylog.log.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from pylog.replication import markers as replication_markers

from .config import TransactionConfig
from .coordinator import TransactionCoordinator
from .metadata import TopicPartition
from .records import TxnRecordError
from .results import (
    DescribedTransaction,
    InitProducerIdResult,
    ListTransactionsResult,
    MarkerRequest,
    Pending,
    TxnWrite,
)

if TYPE_CHECKING:
    from pylog.broker.server import Broker
    from pylog.config import BrokerConfig

log = logging.getLogger("pylog.txn")

#: How long AddPartitionsToTxn / EndTxn wait for a completing transaction before answering
#: CONCURRENT_TRANSACTIONS (see the module docstring).
CONCURRENT_WAIT_S = 0.1
_CONCURRENT = errors.ConcurrentTransactionsError.code
#: How long a marker whose leader moved or could not be reached waits for the metadata to
#: change before it is retried (it is retried anyway after that).
MARKER_METADATA_WAIT_S = 1.0


def coordinator_config(config: BrokerConfig) -> TransactionConfig:
    """The coordinator's settings from the broker's (Kafka's names, see pylog.config)."""
    return TransactionConfig(
        num_partitions=config["transaction.state.log.num.partitions"],
        max_timeout_ms=config["transaction.max.timeout.ms"],
        transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
        abort_timed_out_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
        remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
    )


def transaction_topic_configs(config: BrokerConfig) -> dict[str, Any]:
    """Topic configs ``__transaction_state`` is created with (Kafka's
    ``transactionTopicConfigs``)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
    }


def _marker_results(results: Any) -> list[tuple[int, str, int, int]]:
    """``write_markers``' answer as (producer id, topic, partition, error code) entries. It
    gives one entry per (producer id, topic, partition): accepted as a mapping from that
    triple to the code, or a sequence of 4-tuples in that order, or of objects with the
    attributes ``producer_id``, ``topic``, ``partition`` (or ``partition_index``) and
    ``error_code``."""
    if isinstance(results, Mapping):
        return [(int(k[0]), str(k[1]), int(k[2]), int(v)) for k, v in results.items()]
    out = []
    for entry in results:
        if hasattr(entry, "error_code"):
            partition = getattr(entry, "partition", None)
            if partition is None:
                partition = entry.partition_index
            out.append((int(entry.producer_id), str(entry.topic), int(partition), int(entry.error_code)))
        else:
            pid, topic, p, code = entry
            out.append((int(pid), str(topic), int(p), int(code)))
    return out


class TransactionService:
    """The broker's transaction coordinator. See the module docstring."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = coordinator_config(broker.config)
        self.num_partitions = self.config.num_partitions
        self.coordinator = TransactionCoordinator(
            broker.clock, self.config, new_producer_id=self._take_producer_id,
            partition_exists=self.partition_exists)
        self._spare_producer_id: int | None = None
        self._timer = DeadlineTimer(broker.clock, self._fire)
        spec = TopicSpec(TRANSACTION_STATE_TOPIC_NAME, self.num_partitions,
                         broker.config["transaction.state.log.replication.factor"],
                         transaction_topic_configs(broker.config))
        self.runtime = CoordinatorRuntime(broker, spec, self, reload_on_new_epoch=True,
                                          load_chunk_bytes=broker.config["transaction.state.log.load.buffer.size"])
        self._channels: Any = None  # MarkerChannels, created on the first remote marker
        self._verify_channels: Any = None  # the same, for KIP-890 verification requests
        # Set (and replaced) whenever a write or a marker delivery settles: what a request
        # held on CONCURRENT_TRANSACTIONS waits for.
        self._changed = asyncio.Event()

    @property
    def cluster_mode(self) -> bool:
        """Partitions are hosted while this broker leads them (LeaderAndIsr); markers go to
        each partition's leader (``broker.cluster`` is set after this service is made)."""
        return self.runtime.cluster_mode

    @property
    def _closed(self) -> bool:
        return self.runtime.closed

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the partitions of an existing ``__transaction_state`` (single node, in the
        background). In cluster mode nothing is hosted until LeaderAndIsr makes this broker
        a partition's leader (``on_become_leader``)."""
        await self.runtime.start()
        self.drive()

    async def on_become_leader(self, index: int) -> None:
        """This broker became the leader of ``__transaction_state`` partition ``index``
        (Kafka's ``TransactionCoordinator.onElection``): load it in the background with its
        leader epoch as the coordinator epoch. Called by the replica manager."""
        await self.runtime.on_become_leader(index)

    async def on_resign(self, index: int) -> None:
        """This broker no longer leads ``__transaction_state`` partition ``index`` (Kafka's
        ``onResignation``): its transactions are forgotten here (the new leader loads them),
        their requests get NOT_COORDINATOR, their markers stop."""
        await self.runtime.on_resign(index)

    async def shutdown(self) -> None:
        """Stop for a broker shutdown (before the logs close): new requests get
        COORDINATOR_NOT_AVAILABLE, timers stop, queued writes are appended (their requests
        answered), marker deliveries are cancelled (a restart sends them again)."""
        self.runtime.closed = True
        self._timer.cancel()
        await self.runtime.shutdown()
        for w in self.coordinator.take_writes():
            w.fail(errors.NotCoordinatorError.code)
        self.coordinator.take_markers()
        for channels in (self._channels, self._verify_channels):
            if channels is not None:
                await channels.close()

    def on_topic_deleted(self) -> None:
        """``__transaction_state`` was deleted: resign every partition (the next FindCoordinator
        creates the topic anew; the transactions went with it)."""
        n = self.runtime.on_topic_deleted()
        if n:
            log.info("%s deleted: resigned %d partitions", TRANSACTION_STATE_TOPIC_NAME, n)
        self.drive()

    async def ensure_topic(self) -> Any:
        """The ``__transaction_state`` topic, created (and hosted) on first use. In cluster
        mode the topic is created through ZooKeeper (``pylog.controller.admin.find_coordinator``)
        and hosted per partition on leadership: this only returns the local replica (or None)."""
        return await self.runtime.ensure_topic()

    # ------------------------------------------------------------------ ShardHandler

    def begin_load(self, index: int, epoch: int | None) -> None:
        self.coordinator.begin_load(index, epoch)
        log.info("loading %s-%d as its coordinator (coordinator epoch %s)", TRANSACTION_STATE_TOPIC_NAME,
                 index, self.coordinator.coordinator_epoch_of(index))
        self._signal_change()

    def replay(self, index: int, entries: Sequence[LoadedRecord | LoadedMarker]) -> None:
        for entry in entries:
            if isinstance(entry, LoadedMarker) or entry.key is None:
                continue  # markers and keyless records are not the coordinator's
            try:
                self.coordinator.replay(index, entry.key, entry.value)
            except TxnRecordError as exc:
                log.error("%s-%d: skipping an unreadable record while loading: %s",
                          TRANSACTION_STATE_TOPIC_NAME, index, exc)

    def complete_load(self, index: int, read_end: int) -> int:
        resumed = self.coordinator.complete_load(index)
        if resumed:
            log.info("loaded %s-%d (%d transactions to complete)", TRANSACTION_STATE_TOPIC_NAME, index,
                     len(resumed))
        self.drive()
        self._signal_change()
        return len(resumed)

    def unload(self, index: int) -> None:
        if index in self.coordinator.hosted():
            self.coordinator.unload(index)
            log.info("resigned as the coordinator of %s-%d", TRANSACTION_STATE_TOPIC_NAME, index)
        self.drive()
        self._signal_change()

    def batch(self, write: TxnWrite) -> bytes:
        builder = logcore.BatchBuilder(compression="none")
        now = self.broker.clock.time_ms()
        for key, value in write.records:
            builder.append(value, key=key, timestamp_ms=now)
        return bytes(builder.build())

    def append_timeout_ms(self, write: TxnWrite) -> int:
        return write.timeout_ms

    def settled(self, index: int, write: TxnWrite, code: int, info: Any) -> None:
        if code:
            write.fail(code)
        else:
            write.complete()
        self.drive()
        self._signal_change()

    # ------------------------------------------------------------------ producer ids

    def _take_producer_id(self) -> int:
        pid, self._spare_producer_id = self._spare_producer_id, None
        if pid is None:
            raise RuntimeError("no producer id was fetched before the coordinator call")
        return pid

    async def _fetch_producer_id(self) -> int:
        """0, or the error code when the allocator failed."""
        if self._spare_producer_id is None:
            try:
                pid = await self.broker.new_producer_id()
            except errors.ApiError as exc:
                return exc.code
            if self._spare_producer_id is None:
                self._spare_producer_id = pid
        return 0

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether the partition exists: in the cluster's metadata in cluster mode (this
        broker may hold no replica of it), else in this broker's logs."""
        if self.cluster_mode:  # the cluster's topics, not this broker's replicas
            return partition in self.broker.cluster.metadata.partitions.get(topic, {})
        t = self.broker.log_manager.topics.get(topic)
        return t is not None and 0 <= partition < len(t.partitions)

    # ------------------------------------------------------------------ requests

    async def _wait(self, pending: Pending[Any]) -> Any:
        self.drive()
        if pending.done:
            return pending.result
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any) -> None:
            if not fut.done():
                fut.set_result(result)
        pending.add_done_callback(done)
        return await fut

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitProducerIdResult:
        if self._closed:
            return InitProducerIdResult(errors.CoordinatorNotAvailableError.code)
        code = await self._fetch_producer_id()
        if code:
            return InitProducerIdResult(code)
        result: InitProducerIdResult = await self._wait(
            self.coordinator.init_producer_id(transactional_id, timeout_ms, expected))
        return result

    async def _settle(self, call: Callable[[], Pending[int]]) -> int:
        """``call()`` answered, asked again after each state change while it answers
        CONCURRENT_TRANSACTIONS, for at most CONCURRENT_WAIT_S (the call has no effect when
        it answers that)."""
        code: int = await self._wait(call())
        if code != _CONCURRENT:
            return code
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONCURRENT_WAIT_S
        while code == _CONCURRENT and not self._closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                break
            code = await self._wait(call())
        return code

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> int:
        if self._closed:
            return errors.CoordinatorNotAvailableError.code
        parts = list(partitions)
        return await self._settle(lambda: self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, parts))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        if self._closed:
            return dict.fromkeys(partitions, errors.CoordinatorNotAvailableError.code)
        return self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        if self._closed:
            return errors.CoordinatorNotAvailableError.code
        return await self._settle(lambda: self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, commit))

    def describe(self, transactional_id: str) -> DescribedTransaction:
        if self._closed:
            return DescribedTransaction(transactional_id, errors.CoordinatorNotAvailableError.code)
        return self.coordinator.describe(transactional_id)

    def list_transactions(self, state_filters: Iterable[str], producer_id_filters: Iterable[int],
                          duration_filter_ms: int) -> ListTransactionsResult:
        if self._closed:
            return ListTransactionsResult(errors.CoordinatorNotAvailableError.code)
        return self.coordinator.list_transactions(state_filters, producer_id_filters, duration_filter_ms)

    async def txn_verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> int:
        """The KIP-890 check a partition leader makes before a producer's first transactional
        batch there (``broker.txn_verify``): 0 when the partition is in the producer's open
        transaction, else the coordinator's error code."""
        if self.cluster_mode and not self._closed and \
                self.coordinator.partition_for(transactional_id) not in self.coordinator.hosted():
            return await self._verify_remote(transactional_id, producer_id, producer_epoch, topic, partition)
        codes = self.verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])
        return codes[(topic, partition)]

    async def _verify_remote(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             topic: str, partition: int) -> int:
        """Cluster mode, the id's coordinator on another broker: ask it with a verify-only
        AddPartitionsToTxn (Kafka's ``AddPartitionsToTxnManager``), on channels of their own
        (a marker waiting for an ISR does not delay a produce)."""
        from .markers import (
            MarkerChannels,
            build_verify_request,
            verify_response_code,
            verify_version,
        )

        metadata = self.broker.cluster.metadata
        index = self.coordinator.partition_for(transactional_id)
        meta = metadata.partitions.get(TRANSACTION_STATE_TOPIC_NAME, {}).get(index)
        leader = None if meta is None else metadata.brokers.get(meta.leader)
        if leader is None:
            return errors.CoordinatorNotAvailableError.code
        if leader.broker_id == self.broker.node_id:
            return errors.CoordinatorLoadInProgressError.code  # led here, not hosted yet
        if self._verify_channels is None:
            self._verify_channels = MarkerChannels(f"pylog-txn-verify-{self.broker.node_id}",
                                                   ssl_context=self.broker.inter_broker_tls(),
                                                sasl=self.broker.inter_broker_sasl())
        self._verify_channels.retain(metadata.brokers)
        resp = await self._verify_channels.request(
            leader, build_verify_request(transactional_id, producer_id, producer_epoch, topic, partition),
            verify_version)
        code = verify_response_code(resp, transactional_id, topic, partition)
        if code:
            log.info("verification of transactional id %r for %s-%d with broker %d: error %d%s",
                     transactional_id, topic, partition, leader.broker_id, code,
                     f" ({resp})" if isinstance(resp, BaseException) else "")
        return code

    # ------------------------------------------------------------------ driving

    def drive(self) -> None:
        """Hand the coordinator's writes to the runtime, its markers to delivery tasks, and
        re-arm its timer."""
        coord = self.coordinator
        for w in coord.take_writes():
            self.runtime.enqueue(w.partition, [w])
        for m in coord.take_markers():
            if not self._closed and not self._deliver_inline(m):
                self.runtime.spawn(self._deliver(m))
        if not self._closed:
            self._timer.arm(coord.next_deadline_ms())

    def _fire(self) -> None:
        if self._closed:
            return
        self.coordinator.tick()
        self.drive()

    def _deliver_inline(self, request: MarkerRequest) -> bool:
        """A single node's markers written at once, on the caller's turn of the loop, when
        every partition can take its marker inline (``write_markers_inline``): the
        transaction completes (CompleteCommit / CompleteAbort, itself inline) before the
        EndTxn answer goes out, without a delivery task and its loop turn. False, having
        written nothing, when the delivery must be a task (cluster mode, a partition busy
        on an I/O thread, ``__consumer_offsets`` among the partitions)."""
        if self.cluster_mode:
            return False
        marker = replication_markers.TxnMarker(request.producer_id, request.producer_epoch, request.commit,
                                               request.coordinator_epoch, sorted(request.partitions))
        results = replication_markers.write_markers_inline(self.broker, [marker])
        if results is None:
            return False
        codes = {(topic, partition): code for pid, topic, partition, code in _marker_results(results)
                 if pid == request.producer_id}
        self.coordinator.on_markers_written(request, codes)
        self.drive()
        self._signal_change()
        return True

    async def _deliver(self, request: MarkerRequest) -> None:
        if self.cluster_mode:
            codes = await self._deliver_cluster(request)
        else:
            codes = await self._write_local(request, request.partitions)
        if self._closed:
            return
        self.coordinator.on_markers_written(request, codes)
        self.drive()
        self._signal_change()

    async def _write_local(self, request: MarkerRequest,
                           partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The markers of ``partitions`` written to this broker's logs (``write_markers``)."""
        codes: dict[TopicPartition, int] = {}
        marker = replication_markers.TxnMarker(request.producer_id, request.producer_epoch, request.commit,
                                               request.coordinator_epoch, sorted(partitions))
        try:
            results: Any = await replication_markers.write_markers(self.broker, [marker])
        except Exception:  # noqa: BLE001 - a failed delivery is retried, never lost
            log.exception("writing markers for transactional id %r failed", request.transactional_id)
            results = []
        for pid, topic, partition, code in _marker_results(results):
            if pid == request.producer_id:
                codes[(topic, partition)] = code
        return codes

    async def _deliver_cluster(self, request: MarkerRequest) -> dict[TopicPartition, int]:
        """Cluster mode: each partition's marker to its leader (this broker's in-process, the
        others' as WriteTxnMarkers, one ordered channel per broker). Partitions to retry
        because their leader moved or could not be reached wait (at most
        ``MARKER_METADATA_WAIT_S``) for the metadata to show another leader first."""
        from .markers import NETWORK, NOT_LEADER, MarkerChannels, leaders, route

        if not self.coordinator.wants_markers(request):
            return {}  # resigned, reloaded or given up meanwhile: the answer is ignored
        metadata = self.broker.cluster.metadata
        where = route(request.partitions, self.broker.node_id, metadata)
        codes = dict(where.settled)
        jobs: list[Any] = []
        if where.local:
            jobs.append(self._write_local(request, where.local))
        if where.remote:
            if self._channels is None:
                self._channels = MarkerChannels(f"pylog-txn-coordinator-{self.broker.node_id}",
                                                ssl_context=self.broker.inter_broker_tls(),
                                                sasl=self.broker.inter_broker_sasl())
            self._channels.retain(metadata.brokers)
            for broker_id, tps in where.remote.items():
                jobs.append(self._channels.send(metadata.brokers[broker_id], request.producer_id,
                                                request.producer_epoch, request.commit,
                                                request.coordinator_epoch, tps))
        for found in await asyncio.gather(*jobs):
            codes.update(found)
        stale = [tp for tp, code in codes.items() if code in (NOT_LEADER, NETWORK)]
        if stale and not self._closed:
            before = leaders(stale, metadata)
            await metadata.wait_until(lambda cache: leaders(stale, cache) != before, MARKER_METADATA_WAIT_S)
        return codes

