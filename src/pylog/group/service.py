"""The group coordinators' service: the broker's face of the sans-IO ``GroupCoordinator``.

``GroupService`` (one per broker, ``broker.groups``) hosts one ``GroupCoordinator`` per
``__consumer_offsets`` partition this broker leads (a single node leads them all). What it
shares with the transaction coordinator (hosting, the chunked load from the log and its
retries, ordered appends through the replica manager, resignation) is the coordinator
runtime, ``pylog.coordinator.CoordinatorRuntime``; this module is its ``ShardHandler`` and
keeps what is the groups' own:

- cluster mode (``broker.cluster`` set): nothing is hosted at start and the topic is never
  created here (FindCoordinator creates it through ZooKeeper); the replica manager calls
  ``on_become_leader(index)`` / ``on_resign(index)`` (Kafka's ``GroupCoordinator.onElection``
  / ``onResignation``); a new leader epoch of a partition led here keeps what is loaded.
  Requests for a group whose partition is not hosted get NOT_COORDINATOR (the client looks
  the coordinator up again); a single node answers COORDINATOR_NOT_AVAILABLE (the topic does
  not exist yet);
- single node: the topic is created on the first FindCoordinator (as Kafka does), with
  ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact`` and
  ``offsets.topic.segment.bytes``; when it exists at start, every partition is loaded;
- loading: ``begin_load``, each chunk's records replayed in log order (transactional
  batches as pending for their producer, each COMMIT/ABORT marker applied in its place; a
  marker appended while the partition loads is applied after the records read before it),
  ``complete_load``; requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile (the coordinator
  answers it), also while a failed load waits for its retry;
- after every call into a coordinator, ``drive`` hands its writes to the runtime (appended
  in order, acks=all, bounded by ``offsets.commit.timeout.ms``), then each is reported with
  ``complete()`` or ``fail(code)`` (the coordinator maps append errors to client errors,
  ``admin.map_append_error``); a TxnOffsetCommit write goes out as one transactional batch
  (the producer's id and epoch, base sequence -1);
- a failed write fences its partition: the coordinators change memory before their records
  are appended (a join, a heartbeat's new epoch and assignment, a share member's leave), so
  after a failure the runtime reloads the partition from the log
  (``CoordinatorRuntime.reload``), as if this broker had just become its leader: its parked
  requests and the writes queued behind the failed one get NOT_COORDINATOR, new requests
  COORDINATOR_LOAD_IN_PROGRESS until the load ends, and memory never keeps a change the log
  does not have;
- one asyncio timer per coordinator fires ``tick()`` at ``next_deadline_ms()``;
- ``__consumer_offsets`` deleted by DeleteTopics (Kafka allows it): every hosted partition
  resigns (``on_offsets_topic_deleted``): its groups are unloaded, parked requests and
  queued writes get NOT_COORDINATOR, and the next FindCoordinator creates the topic anew
  (the committed offsets went with it, as in Kafka).

Event-loop affinity: everything here runs on the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import logcore
from pylog import errors
from pylog.config.definitions import ASSIGNOR_CLASSES
from pylog.coordinator import (
    CoordinatorRuntime,
    DeadlineTimer,
    LoadedMarker,
    LoadedRecord,
    TopicSpec,
)
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME, INTERNAL_TOPICS

from .config import GroupCoordinatorConfig, partition_for
from .coordinator import GroupCoordinator
from .records import CoordinatorRecordError
from .results import Pending, Write

if TYPE_CHECKING:
    from pylog.broker.server import Broker
    from pylog.config import BrokerConfig

log = logging.getLogger("pylog.group")

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
        rebalance_protocols=tuple(p.lower() for p in config["group.coordinator.rebalance.protocols"]),
        consumer_assignors=tuple(ASSIGNOR_CLASSES.get(a, a) for a in config["group.consumer.assignors"]),
        consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
        consumer_min_heartbeat_interval_ms=config["group.consumer.min.heartbeat.interval.ms"],
        consumer_max_heartbeat_interval_ms=config["group.consumer.max.heartbeat.interval.ms"],
        consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
        consumer_min_session_timeout_ms=config["group.consumer.min.session.timeout.ms"],
        consumer_max_session_timeout_ms=config["group.consumer.max.session.timeout.ms"],
        consumer_max_size=config["group.consumer.max.size"],
        consumer_migration_policy=config["group.consumer.migration.policy"].lower(),
        share_heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
        share_session_timeout_ms=config["group.share.session.timeout.ms"],
        share_max_size=config["group.share.max.size"],
        share_initialize_retry_interval_ms=max(config["group.share.initialize.retry.interval.ms"],
                                               config["offsets.commit.timeout.ms"]),
        internal_topics=frozenset(INTERNAL_TOPICS),
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


class _Shard:
    """One hosted partition's coordinator and timer, and the markers appended while it
    loads: (producer id, commit, offset)."""

    def __init__(self, index: int, coordinator: GroupCoordinator, timer: DeadlineTimer) -> None:
        self.index = index
        self.coordinator = coordinator
        self.timer = timer
        self.early_markers: list[tuple[int, bool, int]] = []


class GroupService:
    """The broker's group coordinators. See the module docstring."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = coordinator_config(broker.config)
        self.num_partitions = self.config.offsets_topic_num_partitions
        self._shards: dict[int, _Shard] = {}
        self._by_coordinator: dict[int, _Shard] = {}  # id(coordinator) -> its shard
        spec = TopicSpec(GROUP_METADATA_TOPIC_NAME, self.num_partitions,
                         broker.config["offsets.topic.replication.factor"], offsets_topic_configs(broker.config))
        self.runtime = CoordinatorRuntime(broker, spec, self, load_chunk_bytes=broker.config["offsets.load.buffer.size"])
        # A failed write reloads its partition from the log (see the module docstring).
        self.runtime.reload_on_failed_write = True

    # ------------------------------------------------------------------ lifecycle

    @property
    def cluster_mode(self) -> bool:
        return self.runtime.cluster_mode

    @property
    def _closed(self) -> bool:
        return self.runtime.closed

    async def start(self) -> None:
        """Load the coordinators of an existing ``__consumer_offsets`` (single node; in the
        background: requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS)."""
        await self.runtime.start()

    async def shutdown(self) -> None:
        """Stop for a broker shutdown (before the logs close): new group requests get
        COORDINATOR_NOT_AVAILABLE, timers stop, writes already queued are appended (their
        requests are answered), then parked joins and syncs get NOT_COORDINATOR."""
        self.runtime.closed = True
        for shard in self._shards.values():
            shard.timer.cancel()
        await self.runtime.shutdown()

    def on_offsets_topic_deleted(self) -> None:
        """``__consumer_offsets`` was deleted: resign every hosted partition."""
        n = self.runtime.on_topic_deleted()
        if n:
            log.info("%s deleted: resigned %d partitions; the next FindCoordinator creates it "
                     "anew", GROUP_METADATA_TOPIC_NAME, n)

    async def on_become_leader(self, index: int) -> None:
        """This broker now leads ``__consumer_offsets-index``: its groups load in the
        background (COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
        await self.runtime.on_become_leader(index)

    async def on_resign(self, index: int) -> None:
        """This broker no longer leads ``__consumer_offsets-index``: its groups go."""
        await self.runtime.on_resign(index)

    async def ensure_topic(self) -> Any:
        """The ``__consumer_offsets`` topic, created (and hosted) on first use. In cluster
        mode the local topic (or None): it is created through ZooKeeper
        (``pylog.controller.admin.find_coordinator``) and hosted on LeaderAndIsr."""
        return await self.runtime.ensure_topic()

    # ------------------------------------------------------------------ ShardHandler

    def begin_load(self, index: int, epoch: int | None) -> None:
        shard = self._shards.get(index)
        if shard is None:
            coord = GroupCoordinator(self.broker.clock, self.config)
            share = getattr(self.broker, "share", None)
            if share is not None:
                # Share groups: a member that goes gives back its records; group configs
                # override the broker's share-group settings.
                coord.share.on_member_removed = share.on_member_removed
                coord.share.group_setting = self.broker.group_configs.setting
            # KIP-848 groups' consumer.session.timeout.ms / consumer.heartbeat.interval.ms.
            coord.consumer.group_setting = self.broker.group_configs.setting
            shard = self._shards[index] = _Shard(index, coord, DeadlineTimer(self.broker.clock,
                                                                              lambda: self._fire(index)))
            self._by_coordinator[id(coord)] = shard
        shard.coordinator.begin_load()

    def replay(self, index: int, entries: Sequence[LoadedRecord | LoadedMarker]) -> None:
        coord = self._shards[index].coordinator
        for entry in entries:
            if isinstance(entry, LoadedMarker):
                coord.on_txn_marker(entry.producer_id, entry.commit, entry.offset)
                continue
            if entry.key is None:
                continue  # not a coordinator record (Kafka skips keyless records too)
            try:
                coord.replay(entry.key, entry.value, offset=entry.offset, producer_id=entry.producer_id)
            except CoordinatorRecordError as exc:
                log.error("%s-%d: skipping an unreadable record while loading: %s",
                          GROUP_METADATA_TOPIC_NAME, index, exc)

    def complete_load(self, index: int, read_end: int) -> int:
        shard = self._shards[index]
        coord = shard.coordinator
        # Markers appended after the read (the partition side does not wait for loads).
        early, shard.early_markers = shard.early_markers, []
        for producer_id, commit, offset in early:
            if offset >= read_end:
                coord.on_txn_marker(producer_id, commit, offset)
        coord.complete_load()
        self.drive(shard)
        return len(coord.group_ids())

    def unload(self, index: int) -> None:
        """Resign: the timer stops, the groups die, parked requests and the coordinator's
        pending writes get NOT_COORDINATOR (the runtime fails the queued ones)."""
        shard = self._shards.pop(index, None)
        if shard is None:
            return
        self._by_coordinator.pop(id(shard.coordinator), None)
        shard.timer.cancel()
        groups = len(shard.coordinator.group_ids())
        shard.coordinator.unload()
        for w in shard.coordinator.take_writes():
            w.fail(errors.NotCoordinatorError.code)
        if groups:
            log.info("%s-%d: unloaded %d groups", GROUP_METADATA_TOPIC_NAME, index, groups)

    def batch(self, write: Write) -> bytes:
        # A transactional write (TxnOffsetCommit) is Kafka's coordinator batch: the
        # producer's id and epoch, transactional, base sequence -1 (no sequence checks).
        builder = logcore.BatchBuilder(compression="none", producer_id=write.producer_id,
                                       producer_epoch=write.producer_epoch, base_sequence=-1,
                                       transactional=write.transactional)
        now = self.broker.clock.time_ms()
        for key, value in write.records:
            builder.append(value, key=key, timestamp_ms=now)
        return bytes(builder.build())

    def append_timeout_ms(self, write: Write) -> int:
        return int(self.broker.config["offsets.commit.timeout.ms"])

    def settled(self, index: int, write: Write, code: int, info: Any) -> None:
        if code:
            write.fail(code)  # the runtime then reloads the partition (reload_on_failed_write)
            return
        write.complete(info.first_offset)
        # Completing a write may release answers that lead to more writes.
        shard = self._shards.get(index)
        if shard is not None:
            self.drive(shard)

    # ------------------------------------------------------------------ lookup

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator(self, group_id: str) -> GroupCoordinator | None:
        """The coordinator hosting ``group_id`` (loading or loaded); None when this broker
        does not host its partition (the caller answers ``not_hosted_error``)."""
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
        partition side (``pylog.replication.markers``) on the event loop, after the append."""
        shard = self._shards.get(partition_index)
        if shard is None:
            return  # not hosted: the next load reads the marker from the log
        if shard.coordinator.loading:
            shard.early_markers.append((producer_id, commit, offset))
            return
        shard.coordinator.on_txn_marker(producer_id, commit, offset)
        self.drive(shard)

    def coordinators(self) -> list[GroupCoordinator]:
        return [s.coordinator for s in self._shards.values()]

    def shard_of(self, coord: GroupCoordinator) -> _Shard:
        shard = self._by_coordinator.get(id(coord))
        if shard is None or shard.coordinator is not coord:
            raise KeyError("not a hosted coordinator")
        return shard

    async def wait(self, coord: GroupCoordinator, pending: Pending[Any]) -> Any:
        """Drive ``coord`` (its writes and timer), then wait for ``pending``."""
        self._drive_coordinator(coord)
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
        self._drive_coordinator(coord)

    # ------------------------------------------------------------------ driving

    def _drive_coordinator(self, coord: GroupCoordinator) -> None:
        shard = self._by_coordinator.get(id(coord))  # a dict: called after every request
        if shard is not None and shard.coordinator is coord:
            self.drive(shard)
            return
        for w in coord.take_writes():  # resigned meanwhile
            w.fail(errors.NotCoordinatorError.code)

    def drive(self, shard: _Shard) -> None:
        """Hand the coordinator's writes to the runtime and re-arm its timer."""
        if self._shards.get(shard.index) is not shard:
            for w in shard.coordinator.take_writes():
                w.fail(errors.NotCoordinatorError.code)
            return
        self.runtime.enqueue(shard.index, shard.coordinator.take_writes())
        if not self._closed:
            shard.timer.arm(shard.coordinator.next_deadline_ms())

    def _fire(self, index: int) -> None:
        shard = self._shards.get(index)
        if shard is None or self._closed:
            return
        shard.coordinator.tick()
        self.drive(shard)
