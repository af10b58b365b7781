"""The asyncio glue between the broker and the sans-IO group coordinators.

``GroupService`` (one per broker, ``broker.groups``) hosts one ``GroupCoordinator`` per
``__consumer_offsets`` partition this broker leads (a single node leads them all) and drives
them:

- cluster mode (``broker.cluster`` set): nothing is hosted at start and the topic is never
  created here (FindCoordinator creates it through ZooKeeper). The replica manager calls
  ``on_become_leader(index)`` when this broker starts leading a partition (its coordinator
  is loaded from the local log, which the follower fetcher kept up to date) and
  ``on_resign(index)`` when it stops (Kafka's ``GroupCoordinator.onElection`` /
  ``onResignation``): parked and queued requests get NOT_COORDINATOR, timers stop, the
  groups are dropped. Requests for a group whose partition is not hosted get
  NOT_COORDINATOR (the client looks the coordinator up again); a single node answers
  COORDINATOR_NOT_AVAILABLE (the topic does not exist yet);

- single node: the topic is created on the first FindCoordinator (as Kafka does), with
  ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact`` and
  ``offsets.topic.segment.bytes``; when it exists at start, every partition is loaded
  (``begin_load``, ``replay`` of each record from log start to end, read on an I/O thread,
  ``complete_load``), and requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile;
- after every call into a coordinator, ``drive`` takes its writes and appends them, in
  order, through the partition-append path Produce uses (``append_replicated``: acks=all,
  waiting up to ``offsets.commit.timeout.ms`` for the ISR on a replicated partition), then
  reports each with ``complete()`` or ``fail(code)`` (the coordinator maps append errors
  to client errors, ``admin.map_append_error``); one appender task per partition keeps the
  order (a write is appended only after the previous one is settled);
- one asyncio timer per coordinator fires ``tick()`` at ``next_deadline_ms()``;
- transactions: a TxnOffsetCommit write goes out as one transactional batch (the
  producer's id and epoch, base sequence -1); the partition side calls ``on_txn_marker``
  after appending a COMMIT/ABORT marker to a ``__consumer_offsets`` partition, and loading
  replays transactional batches as pending for their producer and applies each marker in
  its place in the log (a marker appended while the partition loads is applied after the
  records read before it);
- ``__consumer_offsets`` deleted by DeleteTopics (Kafka allows it): every hosted partition
  resigns (``on_offsets_topic_deleted``, Kafka's ``onResignation``): its groups are unloaded,
  parked requests and queued writes get NOT_COORDINATOR, and the next FindCoordinator creates
  the topic anew (the committed offsets went with it, as in Kafka).

Event-loop affinity: everything here runs on the broker's loop, except ``_read_partition``
(an I/O thread).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

import logcore
from pylog import errors
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME

from .config import GroupCoordinatorConfig, partition_for
from .coordinator import GroupCoordinator
from .records import CoordinatorRecordError
from .results import Pending, Write

if TYPE_CHECKING:
    from pylog.broker.server import Broker
    from pylog.config import BrokerConfig

log = logging.getLogger("pylog.group")

# Bytes read per step while loading a partition.
_LOAD_READ_BYTES = 4 * 1024 * 1024


def coordinator_config(config: BrokerConfig) -> GroupCoordinatorConfig:
    """The coordinator's settings from the broker's (Kafka's names, see pylog.config)."""
    return GroupCoordinatorConfig(
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
        offsets_topic_num_partitions=config["offsets.topic.num.partitions"],
    )


def offsets_topic_configs(config: BrokerConfig) -> dict[str, Any]:
    """Topic configs ``__consumer_offsets`` is created with (Kafka's
    ``GroupCoordinator.groupMetadataTopicConfigs``: compacted, small segments, the
    producer's codec kept)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(config["offsets.topic.segment.bytes"]),
        "compression.type": "producer",
    }


class LoadedRecord(NamedTuple):
    """A record read back from ``__consumer_offsets``: producer_id >= 0 when its batch is
    transactional (a TxnOffsetCommit)."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1


class LoadedMarker(NamedTuple):
    """A transaction marker (control batch) read back from ``__consumer_offsets``."""

    offset: int
    producer_id: int
    commit: bool


_CONTROL_KEY = struct.Struct(">hh")  # control record key: version, type (0 ABORT, 1 COMMIT)


def _marker(batch: Any) -> LoadedMarker | None:
    """The COMMIT/ABORT marker of a control batch; None for other control types (KRaft's)."""
    for rec in batch:
        key = rec.key
        if key is None or len(key) < _CONTROL_KEY.size:
            return None
        _version, kind = _CONTROL_KEY.unpack_from(key, 0)
        if kind in (0, 1):
            return LoadedMarker(rec.offset, batch.producer_id, kind == 1)
        return None
    return None


def _read_partition(plog: Any) -> tuple[list[LoadedRecord | LoadedMarker], int]:
    """Every record and transaction marker of a ``__consumer_offsets`` partition, from log
    start to end, in log order, and the offset reading stopped at (blocking: an I/O
    thread)."""
    out: list[LoadedRecord | LoadedMarker] = []
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        region = plog.read(offset, _LOAD_READ_BYTES, min_one_batch=True)
        if region.size == 0:
            break
        data = region.read()
        last = offset - 1
        for batch in logcore.iter_batches(data):
            last = batch.last_offset
            if batch.last_offset < offset:
                continue
            if batch.is_control:
                marker = _marker(batch)
                if marker is not None:
                    out.append(marker)
                continue
            pid = batch.producer_id if batch.is_transactional else -1
            for rec in batch:
                if rec.offset >= offset:
                    out.append(LoadedRecord(rec.offset, rec.key, rec.value, pid))
        if last < offset:
            break
        offset = last + 1
    return out, max(offset, end)


class _Shard:
    """One hosted partition: its coordinator, its appender queue and its timer."""

    def __init__(self, index: int, coordinator: GroupCoordinator) -> None:
        self.index = index
        self.coordinator = coordinator
        self.queue: collections.deque[Write] = collections.deque()
        self.appender: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_deadline: int | None = None
        self.resigned = False
        # Markers appended while the partition loads: (producer id, commit, offset).
        self.early_markers: list[tuple[int, bool, int]] = []


class GroupService:
    """The broker's group coordinators. See the module docstring."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = coordinator_config(broker.config)
        self.num_partitions = self.config.offsets_topic_num_partitions
        self._shards: dict[int, _Shard] = {}
        self._create_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def cluster_mode(self) -> bool:
        return getattr(self.broker, "cluster", None) is not None

    async def start(self) -> None:
        """Load the coordinators of an existing ``__consumer_offsets`` (in the background:
        requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS). In cluster mode nothing is
        loaded here: the controller's LeaderAndIsr says which partitions this broker leads
        (``on_become_leader``)."""
        if self.cluster_mode:
            return
        topic = self.broker.log_manager.topics.get(GROUP_METADATA_TOPIC_NAME)
        if topic is not None:
            self._host(topic)

    async def shutdown(self) -> None:
        """Stop for a broker shutdown (before the logs close): new group requests get
        COORDINATOR_NOT_AVAILABLE, timers stop, writes already queued are appended (their
        requests are answered), then parked joins and syncs get NOT_COORDINATOR."""
        self._closed = True
        for shard in self._shards.values():
            if shard.timer is not None:
                shard.timer.cancel()
                shard.timer = None
        appenders = [s.appender for s in self._shards.values() if s.appender is not None]
        if appenders:
            await asyncio.gather(*appenders, return_exceptions=True)
        for shard in self._shards.values():
            shard.coordinator.unload()
            for w in [*shard.queue, *shard.coordinator.take_writes()]:
                w.fail(errors.NotCoordinatorError.code)
            shard.queue.clear()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def on_offsets_topic_deleted(self) -> None:
        """``__consumer_offsets`` was deleted: resign every hosted partition (Kafka's
        ``onResignation`` for the partitions of a deleted topic). An append in flight fails
        on the closed log and its request gets NOT_COORDINATOR too."""
        shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            self._unload(shard)
        if shards:
            log.info("%s deleted: resigned %d partitions; the next FindCoordinator creates it "
                     "anew", GROUP_METADATA_TOPIC_NAME, len(shards))

    @staticmethod
    def _unload(shard: _Shard) -> None:
        """Resign ``shard`` (already out of ``_shards``): its timer stops, its groups die,
        parked requests and queued writes get NOT_COORDINATOR. A write being appended
        fails or completes on its own (its answer goes to a dead group)."""
        shard.resigned = True
        if shard.timer is not None:
            shard.timer.cancel()
            shard.timer = None
        shard.coordinator.unload()
        for w in [*shard.queue, *shard.coordinator.take_writes()]:
            w.fail(errors.NotCoordinatorError.code)
        shard.queue.clear()

    # ------------------------------------------------------------------ cluster mode

    def _leads(self, index: int) -> bool:
        """Whether the replica manager says this broker leads ``__consumer_offsets-index``
        now (the hooks may run after a newer LeaderAndIsr was applied: the current role
        decides)."""
        state = self.broker.replicas.partitions.get((GROUP_METADATA_TOPIC_NAME, index))
        return state is not None and state.leader is not None

    async def on_become_leader(self, index: int) -> None:
        """This broker now leads ``__consumer_offsets-index`` (Kafka's ``onElection``):
        load its coordinator from the local log in the background (its groups get
        COORDINATOR_LOAD_IN_PROGRESS meanwhile). A new leader epoch while already leading
        keeps what is loaded."""
        if self._closed or not self._leads(index):
            return
        shard = self._shards.get(index)
        if shard is not None:
            return  # leader -> leader (a newer epoch): nothing moved
        topic = self.broker.log_manager.topics.get(GROUP_METADATA_TOPIC_NAME)
        if topic is None or index >= len(topic.partitions):
            log.error("told to lead %s-%d, which has no local log", GROUP_METADATA_TOPIC_NAME, index)
            return
        coord = GroupCoordinator(self.broker.clock, self.config)
        coord.begin_load()
        shard = self._shards[index] = _Shard(index, coord)
        log.info("leading %s-%d: loading its groups", GROUP_METADATA_TOPIC_NAME, index)
        self._spawn(self._load(shard, topic.partitions[index]))

    async def on_resign(self, index: int) -> None:
        """This broker no longer leads ``__consumer_offsets-index`` (Kafka's
        ``onResignation``): unload its coordinator. Ignored when the replica manager says
        this broker leads it again (a stale call)."""
        if self._leads(index):
            return
        shard = self._shards.pop(index, None)
        if shard is None:
            return
        groups = len(shard.coordinator.group_ids())
        self._unload(shard)
        log.info("resigned %s-%d: unloaded %d groups", GROUP_METADATA_TOPIC_NAME, index, groups)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _host(self, topic: Any) -> list[asyncio.Task[Any]]:
        loads = []
        for p in topic.partitions:
            if p.index in self._shards:
                continue
            coord = GroupCoordinator(self.broker.clock, self.config)
            coord.begin_load()
            shard = self._shards[p.index] = _Shard(p.index, coord)
            loads.append(self._spawn(self._load(shard, p)))
        return loads

    async def _load(self, shard: _Shard, partition: Any) -> None:
        coord = shard.coordinator
        started = self.broker.clock.monotonic()
        try:
            records, read_end = await self.broker.io.run_ordered((partition.topic, partition.index),
                                                                 _read_partition, partition.log)
        except (OSError, logcore.LogcoreError) as exc:
            # The partition stays loading (its groups get COORDINATOR_LOAD_IN_PROGRESS), as
            # Kafka leaves a partition whose load failed; the log says why.
            log.error("cannot load %s-%d: %s", partition.topic, partition.index, exc)
            return
        if shard.resigned:
            return  # leadership moved away during the read
        replayed = 0
        for entry in records:
            if isinstance(entry, LoadedMarker):
                coord.on_txn_marker(entry.producer_id, entry.commit, entry.offset)
                continue
            if entry.key is None:
                continue  # not a coordinator record (Kafka skips keyless records too)
            try:
                coord.replay(entry.key, entry.value, offset=entry.offset, producer_id=entry.producer_id)
            except CoordinatorRecordError as exc:
                log.error("%s-%d: skipping an unreadable record while loading: %s",
                          partition.topic, partition.index, exc)
                continue
            replayed += 1
        # Markers appended after the read (the partition side does not wait for loads).
        early, shard.early_markers = shard.early_markers, []
        for producer_id, commit, offset in early:
            if offset >= read_end:
                coord.on_txn_marker(producer_id, commit, offset)
        coord.complete_load()
        if replayed:
            log.info("loaded %d records of %s-%d (%d groups) in %.3f s", replayed, partition.topic,
                     partition.index, len(coord.group_ids()), self.broker.clock.monotonic() - started)
        self.drive(shard)

    async def ensure_topic(self) -> Any:
        """The ``__consumer_offsets`` topic, created (and hosted) on first use. In cluster
        mode the local topic (or None): it is created through ZooKeeper
        (``pylog.controller.admin.find_coordinator``) and hosted on LeaderAndIsr."""
        manager = self.broker.log_manager
        if self.cluster_mode:
            return manager.topics.get(GROUP_METADATA_TOPIC_NAME)
        async with self._create_lock:
            topic = manager.topics.get(GROUP_METADATA_TOPIC_NAME)
            if topic is None:
                topic = await manager.create_topic_async(
                    self.broker.executor, GROUP_METADATA_TOPIC_NAME, self.num_partitions,
                    self.broker.config["offsets.topic.replication.factor"],
                    offsets_topic_configs(self.broker.config))
                log.info("created %s (%d partitions)", GROUP_METADATA_TOPIC_NAME, self.num_partitions)
                # Empty partitions load at once: wait, so that the client's next request
                # (JoinGroup, OffsetFetch) does not get COORDINATOR_LOAD_IN_PROGRESS.
                loads = self._host(topic)
                if loads:
                    await asyncio.gather(*loads)
            self._host(topic)
            return topic

    # ------------------------------------------------------------------ lookup

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator(self, group_id: str) -> GroupCoordinator | None:
        """The coordinator hosting ``group_id``; None when this broker does not host its
        partition (the caller answers ``not_hosted_error``)."""
        shard = self._shards.get(self.partition_for(group_id))
        return None if shard is None or self._closed else shard.coordinator

    def not_hosted_error(self) -> int:
        """The error for a group whose coordinator ``coordinator()`` did not find: on a
        single node, COORDINATOR_NOT_AVAILABLE (``__consumer_offsets`` does not exist yet:
        the client asks FindCoordinator, which creates it); in cluster mode NOT_COORDINATOR
        (another broker leads the partition: the client looks it up again), as Kafka
        answers; COORDINATOR_NOT_AVAILABLE while shutting down."""
        if self.cluster_mode and not self._closed:
            return errors.NotCoordinatorError.code
        return errors.CoordinatorNotAvailableError.code

    def on_txn_marker(self, partition_index: int, producer_id: int, commit: bool, offset: int) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id`` was appended at
        ``offset`` of ``__consumer_offsets`` partition ``partition_index``: the producer's
        pending transactional offsets there are committed or dropped. Called by the
        partition side (WriteTxnMarkers) on the event loop, after the append."""
        shard = self._shards.get(partition_index)
        if shard is None or shard.resigned:
            return  # not hosted: the next load reads the marker from the log
        if shard.coordinator.loading:
            shard.early_markers.append((producer_id, commit, offset))
            return
        shard.coordinator.on_txn_marker(producer_id, commit, offset)
        self.drive(shard)

    def coordinators(self) -> list[GroupCoordinator]:
        return [s.coordinator for s in self._shards.values()]

    def shard_of(self, coord: GroupCoordinator) -> _Shard:
        for shard in self._shards.values():
            if shard.coordinator is coord:
                return shard
        raise KeyError("not a hosted coordinator")

    async def wait(self, coord: GroupCoordinator, pending: Pending[Any]) -> Any:
        """Drive ``coord`` (its writes and timer), then wait for ``pending``."""
        self.drive(self.shard_of(coord))
        if pending.done:
            return pending.result
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any) -> None:
            if not fut.done():
                fut.set_result(result)
        pending.add_done_callback(done)
        return await fut

    def after_call(self, coord: GroupCoordinator) -> None:
        """Call after any request method of ``coord`` that returned at once."""
        self.drive(self.shard_of(coord))

    # ------------------------------------------------------------------ driving

    def drive(self, shard: _Shard) -> None:
        """Take the coordinator's writes into the appender and re-arm its timer."""
        if shard.resigned:
            for w in shard.coordinator.take_writes():
                w.fail(errors.NotCoordinatorError.code)
            return
        writes = shard.coordinator.take_writes()
        if writes:
            shard.queue.extend(writes)
            if shard.appender is None or shard.appender.done():
                shard.appender = self._spawn(self._append_loop(shard))
        if not self._closed:
            self._arm(shard)

    def _arm(self, shard: _Shard) -> None:
        deadline = shard.coordinator.next_deadline_ms()
        if deadline == shard.timer_deadline and shard.timer is not None:
            return
        if shard.timer is not None:
            shard.timer.cancel()
            shard.timer = None
        shard.timer_deadline = deadline
        if deadline is None:
            return
        now_ms = self.broker.clock.monotonic() * 1000
        delay = max(deadline - now_ms, 0) / 1000.0
        shard.timer = asyncio.get_running_loop().call_later(delay, self._fire, shard)

    def _fire(self, shard: _Shard) -> None:
        shard.timer = None
        shard.timer_deadline = None
        if self._closed:
            return
        shard.coordinator.tick()
        self.drive(shard)

    async def _append_loop(self, shard: _Shard) -> None:
        from pylog.replication.append import AppendError, append_replicated

        topic = self.broker.log_manager.topics.get(GROUP_METADATA_TOPIC_NAME)
        timeout_ms = self.broker.config["offsets.commit.timeout.ms"]
        while shard.queue:
            write = shard.queue.popleft()
            code = 0
            base_offset = -1
            if shard.resigned or topic is None or shard.index >= len(topic.partitions):
                code = errors.NotCoordinatorError.code
            else:
                partition = topic.partitions[shard.index]
                try:
                    info = await append_replicated(self.broker, partition, self._batch(write),
                                                   timeout_ms)
                    base_offset = info.first_offset
                except AppendError as exc:
                    code = exc.code
                    log.warning("group %r: append to %s-%d failed: %s", write.group_id,
                                GROUP_METADATA_TOPIC_NAME, shard.index, exc)
                except logcore.LogcoreError as exc:
                    if not partition.log.closed:
                        raise
                    # The topic was deleted meanwhile (the shard resigns).
                    code = errors.NotCoordinatorError.code
                    log.info("group %r: %s-%d was deleted during an append: %s",
                             write.group_id, GROUP_METADATA_TOPIC_NAME, shard.index, exc)
            if code:
                write.fail(code)
            else:
                write.complete(base_offset)
            # Completing a write may release answers that lead to more writes.
            self.drive(shard)

    def _batch(self, write: Write) -> bytes:
        # A transactional write (TxnOffsetCommit) is Kafka's coordinator batch: the
        # producer's id and epoch, transactional, base sequence -1 (no sequence checks).
        builder = logcore.BatchBuilder(compression="none", producer_id=write.producer_id,
                                       producer_epoch=write.producer_epoch, base_sequence=-1,
                                       transactional=write.transactional)
        now = self.broker.clock.time_ms()
        for key, value in write.records:
            builder.append(value, key=key, timestamp_ms=now)
        return bytes(builder.build())
