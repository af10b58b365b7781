"""The durable state of share partitions in ``__share_group_state`` (KIP-932's share
coordinator, single node): Kafka's record formats, pylog's own write policy.

Records (schemas vendored from apache/kafka 1eb7644 ``share-coordinator``; framing as every
coordinator record: int16 key version + key, int16 value version + value, null value =
tombstone)::

    key version 0  ShareSnapshotKey {GroupId, TopicId, Partition}
                   -> ShareSnapshotValue v0 {SnapshotEpoch uint16, StateEpoch, LeaderEpoch,
                      StartOffset, StateBatches [FirstOffset, LastOffset, DeliveryState
                      (0 Available, 2 Acknowledged, 4 Archived), DeliveryCount]}
    key version 1  ShareUpdateKey (same fields)
                   -> ShareUpdateValue v0 {SnapshotEpoch, LeaderEpoch, StartOffset (-1:
                      unchanged), StateBatches}: a delta over the last snapshot

A share partition's key goes to partition ``abs(hash("group:topicId:partition")) % n`` of
the topic (Kafka's ``SharePartitionKey`` and ``ShareCoordinatorService.partitionFor``, with
Java's String.hashCode and Kafka's base64 topic id), n =
``share.coordinator.state.topic.num.partitions`` (50).

Write policy (pylog's, not Kafka's): every change of a share partition writes a full
ShareSnapshot of its in-flight window (at most max.record.locks offsets, a few runs in
practice), coalesced per event-loop turn; the topic is compacted, so the last snapshot of
each share partition is what stays. Kafka writes ShareUpdate deltas with a snapshot every
``share.coordinator.snapshot.update.records.per.snapshot`` and keeps the topic under the
delete policy, pruning what snapshots superseded. Both record kinds are read on load, so a
log written by either policy loads.

The share coordinator (KIP-932): the leader of partition p of ``__share_group_state`` serves
the state of the share partitions whose key hashes to p (FindCoordinator key type 2, key
``group:topicId:partition``), through the state RPCs InitializeShareGroupState (83),
ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87) (``pylog.broker.handlers.*_share_group_state*``) and, on the
broker that is also the share partition's leader, through direct calls
(``pylog.group.share.persister``). Its partitions are hosted by the coordinator runtime:
every partition on a single node (the topic is made on first use), the partitions this
broker leads in cluster mode (``on_become_leader`` / ``on_resign`` from the replica manager;
a replicated topic made through ZooKeeper, ``share.coordinator.state.topic.replication.factor``
replicas, ``min.insync.replicas`` = ``share.coordinator.state.topic.min.isr``).

Per share partition it keeps (state epoch, leader epoch, start offset, batches), as Kafka's
``ShareCoordinatorShard``:

- a write whose leader epoch is below the stored one is FENCED_LEADER_EPOCH, a write whose
  state epoch is below the stored one FENCED_STATE_EPOCH; a write's batches replace those
  offsets of the stored state (Kafka's merge of a ShareUpdate), its start offset (-1: kept)
  drops what lies below it; leader epoch -1 / state epoch -1 keep the stored ones;
- a read with a leader epoch below the stored one is FENCED_LEADER_EPOCH; a higher one is
  stored (and written, so that the fencing survives a coordinator failover);
- a share partition has state only once initialized (Kafka 4.1): a read or write of one
  never initialized, or deleted since, is INVALID_REQUEST (Kafka's "Read/Write operation on
  uninitialized share partition not allowed."); ReadShareGroupStateSummary answers it with
  state epoch 0, start offset -1;
- an initialize needs a state epoch not below the stored one (else FENCED_STATE_EPOCH) and
  replaces the state with its start offset (-1: the leader resolves
  ``share.auto.offset.reset`` when it loads the share partition) and no batches (a new
  share partition's leader epoch is 0, an existing one's is kept);
- a delete writes the share partition's tombstone;
- every request names a group id, a non-zero topic id and a partition >= 0, and batches
  with 0 <= first <= last, a delivery state of 0, 2 or 4 and a delivery count >= 0
  (else INVALID_REQUEST); a partition that is loading is COORDINATOR_LOAD_IN_PROGRESS, one
  not hosted here NOT_COORDINATOR (a single node hosts them all once the topic exists).

Durability: a write's answer waits for its record's append (acks=all through the replica
manager), bounded by ``share.coordinator.write.timeout.ms``; the in-memory state is updated
at once (a failed append leaves it ahead of the log until the partition is loaded again).

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import logcore
from pylog import errors
from pylog.coordinator.loader import LoadedMarker, LoadedRecord
from pylog.coordinator.runtime import CoordinatorRuntime, PartitionState, TopicSpec
from pylog.group.config import partition_for
from pylog.log.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from pylog.log.topics import topic_id_str
from pylog.protocol._records import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)

from .share_partition import SharePartition, StateBatch

__all__ = ["SHARE_GROUP_STATE_TOPIC_NAME", "ShareState", "ShareStateStore", "decode_state", "encode_snapshot",
           "state_topic_configs"]

log = logging.getLogger("pylog.share")

_I16 = struct.Struct(">h")

ShareKey = tuple[str, uuid.UUID, int]
# start offset, batches, state epoch (what a load replays)
Saved = tuple[int, list[StateBatch], int]

#: The start offset of a share partition initialized but not resolved yet, and of
#: ReadShareGroupStateSummary's answer for one without state (Kafka's
#: ``PartitionFactory.UNINITIALIZED_START_OFFSET``), and the summary's state epoch then.
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0
#: Kafka's messages (``ShareCoordinatorShard``) for a share partition with no state.
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
_DELIVERY_STATES = frozenset({0, 2, 4})


class ShareState(NamedTuple):
    """The saved state of one share partition."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[StateBatch]


def state_topic_configs(cfg: Any) -> dict[str, str]:
    """The topic configs of ``__share_group_state`` (compacted: pylog's write policy)."""
    return {"cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(cfg["share.coordinator.state.topic.segment.bytes"]),
            "min.insync.replicas": str(cfg["share.coordinator.state.topic.min.isr"])}


def encode_snapshot(key: ShareKey, state: ShareState | SharePartition | None,
                    leader_epoch: int = 0) -> tuple[bytes, bytes | None]:
    """A ShareSnapshot record of ``state`` (a ``SharePartition``: its state under
    ``leader_epoch``; None: the share partition's tombstone)."""
    gid, tid, part = key
    k = _I16.pack(0) + ShareSnapshotKey(group_id=gid, topic_id=tid, partition=part).encode(0)
    if state is None:
        return k, None
    if isinstance(state, SharePartition):
        state = ShareState(state.state_epoch, leader_epoch, state.start_offset, state.state_batches())
    sb = ShareSnapshotValue.StateBatch
    value = ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        state_batches=[sb(first_offset=b.first_offset, last_offset=b.last_offset,
                          delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in state.batches])
    return k, _I16.pack(0) + value.encode(0)


def decode_state(key: bytes, value: bytes | None) -> tuple[int, ShareKey, Any] | None:
    """(key version, share key, decoded value or None) of a ``__share_group_state`` record;
    None for a record of another kind.

    Raises:
        ValueError: a truncated or malformed record (``RemoteProtocolError`` is one).
    """
    if len(key) < 2:
        raise ValueError(f"record key of {len(key)} bytes has no version")
    version = _I16.unpack_from(key, 0)[0]
    if version not in (0, 1):
        return None
    kcls, vcls = (ShareSnapshotKey, ShareSnapshotValue) if version == 0 else (ShareUpdateKey, ShareUpdateValue)
    k = kcls.decode(memoryview(key)[2:], version)
    v = None
    if value is not None:
        if len(value) < 2 or _I16.unpack_from(value, 0)[0] != 0:
            raise ValueError("share state value is not version 0")
        v = vcls.decode(memoryview(value)[2:], 0)
    return version, (k.group_id, k.topic_id, k.partition), v


def _batches(v: Any) -> list[StateBatch]:
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in v.state_batches]


def _apply_update(saved: Saved, v: Any) -> Saved:
    """A ShareUpdate over the state so far: its batches replace those offsets."""
    start, batches, epoch = saved
    return merge_batches(start, batches, v.start_offset, _batches(v)) + (epoch,)


def _covers(start: int, new: list[StateBatch], old: list[StateBatch]) -> bool:
    """Whether ``new`` alone is the merged state: ordered, contiguous runs from ``start``,
    of distinct neighbours, reaching past every offset of ``old``."""
    if not new:
        return not old or old[-1].last_offset < start
    if new[0].first_offset != start:
        return False
    prev = None
    for b in new:
        if b.last_offset < b.first_offset or (prev is not None and (
                b.first_offset != prev.last_offset + 1
                or (b.delivery_state, b.delivery_count) == (prev.delivery_state, prev.delivery_count))):
            return False
        prev = b
    return not old or new[-1].last_offset >= max(b.last_offset for b in old)


def merge_batches(start: int, batches: list[StateBatch], new_start: int,
                  new: list[StateBatch]) -> tuple[int, list[StateBatch]]:
    """``new`` over ``batches`` (its offsets replace theirs), from ``new_start`` on (-1:
    ``start``); runs of equal state joined."""
    if new_start >= 0:
        start = new_start
    if _covers(start, new, batches):
        return start, list(new)  # a whole window (pylog's leaders write that): nothing to merge
    per: dict[int, tuple[int, int]] = {}
    for b in batches + new:
        for off in range(max(b.first_offset, start), b.last_offset + 1):
            per[off] = (b.delivery_state, b.delivery_count)
    out: list[StateBatch] = []
    for off in sorted(per):
        state, count = per[off]
        if out and out[-1].last_offset == off - 1 and (out[-1].delivery_state, out[-1].delivery_count) == (state, count):
            out[-1] = StateBatch(out[-1].first_offset, off, state, count)
        else:
            out.append(StateBatch(off, off, state, count))
    return start, out


class _StateWrite:
    """One append of snapshot records; ``done`` resolves with the error code."""

    __slots__ = ("records", "done")

    def __init__(self, records: list[tuple[bytes, bytes | None]], done: asyncio.Future[int]) -> None:
        self.records = records
        self.done = done

    def fail(self, code: int) -> None:
        if not self.done.done():
            self.done.set_result(code)


class StateResult(NamedTuple):
    """A state RPC's outcome for one share partition (``state`` for reads)."""

    error_code: int
    error_message: str | None = None
    state: ShareState | None = None


_OK = StateResult(0)


def _invalid(message: str) -> StateResult:
    return StateResult(errors.InvalidRequestError.code, message)


def check_key(group_id: str | None, topic_id: uuid.UUID, partition: int) -> StateResult | None:
    """INVALID_REQUEST for a key no share partition has (Kafka's checks), else None."""
    if not group_id:
        return _invalid("Group id must be provided.")
    if topic_id is None or topic_id.int == 0:
        return _invalid("Topic id must be provided.")
    if partition < 0:
        return _invalid(f"Partition {partition} is negative.")
    return None


def check_batches(start_offset: int, batches: Sequence[StateBatch]) -> StateResult | None:
    """INVALID_REQUEST for a start offset below -1 or a malformed state batch, else None."""
    if start_offset < UNINITIALIZED_START_OFFSET:
        return _invalid(f"Start offset {start_offset} is below -1.")
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            return _invalid(f"State batch {b.first_offset}-{b.last_offset} is not a range of offsets.")
        if b.delivery_state not in _DELIVERY_STATES:
            return _invalid(f"Delivery state {b.delivery_state} is not 0, 2 or 4.")
        if b.delivery_count < 0:
            return _invalid(f"Delivery count {b.delivery_count} is negative.")
    return None


class ShareStateStore:
    """The share coordinator: ``__share_group_state``. See the module docstring."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = cfg["share.coordinator.state.topic.num.partitions"]
        spec = TopicSpec(SHARE_GROUP_STATE_TOPIC_NAME, self.num_partitions, 1, state_topic_configs(cfg))
        self.runtime = CoordinatorRuntime(broker, spec, self,
                                          load_chunk_bytes=cfg["share.coordinator.load.buffer.size"])
        # A failed write reloads its partition from the log: ``_put`` holds the new state
        # before the append, and the log is what a failed write leaves (the caller gets the
        # error; the persister retries it once the partition is loaded again).
        self.runtime.reload_on_failed_write = True
        self._saved: dict[ShareKey, ShareState] = {}
        self._loading: dict[int, dict[ShareKey, ShareState]] = {}
        # Records to append with the next write, and the futures of their appends, by index.
        self._dirty: dict[int, dict[ShareKey, ShareState | None]] = {}
        self._turn: dict[int, asyncio.Future[int]] = {}
        self._pending: set[asyncio.Future[int]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Single node: load every partition of an existing topic; returns when they are
        loaded, so no share partition starts without its saved state. Cluster mode: nothing
        until the replica manager says this broker leads a partition."""
        await self.runtime.load_all()

    async def shutdown(self) -> None:
        """Write what changed, then close (queued appends go to the log first)."""
        self._write_dirty()
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        await self.runtime.shutdown()

    async def on_become_leader(self, index: int) -> None:
        await self.runtime.on_become_leader(index)

    async def on_resign(self, index: int) -> None:
        await self.runtime.on_resign(index)

    def on_topic_deleted(self) -> None:
        """``__share_group_state`` was deleted: its partitions resign and their state goes."""
        self.runtime.on_topic_deleted()

    async def ensure_topic(self) -> Any:
        """Single node: the topic, made (and loaded) on first use. Cluster mode: the local
        topic or None (FindCoordinator and the persister make it through ZooKeeper)."""
        return await self.runtime.ensure_topic()

    # ------------------------------------------------------------------ placement

    def partition_of(self, key: ShareKey) -> int:
        gid, tid, part = key
        return partition_for(f"{gid}:{topic_id_str(tid)}:{part}", self.num_partitions)

    def availability(self, index: int) -> StateResult | None:
        """None when partition ``index`` serves; else NOT_COORDINATOR (not hosted here) or
        COORDINATOR_LOAD_IN_PROGRESS."""
        state = self.runtime.state(index)
        if state is PartitionState.ACTIVE:
            return None
        if state is None or state is PartitionState.CLOSED:
            return StateResult(errors.NotCoordinatorError.code,
                               f"This broker is not the share coordinator of {SHARE_GROUP_STATE_TOPIC_NAME}-{index}.")
        return StateResult(errors.CoordinatorLoadInProgressError.code,
                           f"{SHARE_GROUP_STATE_TOPIC_NAME}-{index} is loading.")

    def serves(self, key: ShareKey) -> bool:
        return self.runtime.state(self.partition_of(key)) is PartitionState.ACTIVE

    # ------------------------------------------------------------------ the state RPCs

    def saved(self, key: ShareKey) -> ShareState | None:
        """The state held for ``key`` (hosted partitions only)."""
        return self._saved.get(key)

    def __len__(self) -> int:
        return len(self._saved)

    def keys(self) -> list[ShareKey]:
        """The share partitions whose state this broker's coordinator partitions hold."""
        return list(self._saved)

    async def read_state(self, key: ShareKey, leader_epoch: int) -> StateResult:
        """ReadShareGroupState for one share partition."""
        bad = check_key(*key) or self.availability(self.partition_of(key))
        if bad is not None:
            return bad
        st = self._saved.get(key)
        if st is None:
            return _invalid(READ_UNINITIALIZED)
        if leader_epoch < st.leader_epoch:
            return StateResult(errors.FencedLeaderEpochError.code,
                               f"Leader epoch {leader_epoch} is below the share partition's {st.leader_epoch}.")
        if leader_epoch > st.leader_epoch:
            st = st._replace(leader_epoch=leader_epoch)
            code = await self._put(key, st)
            if code:
                return StateResult(code, "The new leader epoch could not be written.")
        return StateResult(0, None, st)

    def read_summary(self, key: ShareKey, leader_epoch: int) -> StateResult:
        """ReadShareGroupStateSummary: the state epoch and start offset, nothing written."""
        bad = check_key(*key) or self.availability(self.partition_of(key))
        if bad is not None:
            return bad
        st = self._saved.get(key)
        if st is None:
            return StateResult(0, None, ShareState(DEFAULT_STATE_EPOCH, -1, UNINITIALIZED_START_OFFSET, []))
        if leader_epoch >= 0 and leader_epoch < st.leader_epoch:
            return StateResult(errors.FencedLeaderEpochError.code,
                               f"Leader epoch {leader_epoch} is below the share partition's {st.leader_epoch}.")
        return StateResult(0, None, st)

    async def write_state(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          batches: list[StateBatch]) -> StateResult:
        """WriteShareGroupState for one share partition; answered after the append."""
        bad = check_key(*key) or check_batches(start_offset, batches) \
            or self.availability(self.partition_of(key))
        if bad is not None:
            return bad
        st = self._saved.get(key)
        if st is None:
            # Kafka 4.1: only the group coordinator's InitializeShareGroupState makes a share
            # partition's state, so a write after its DeleteShareGroupState (a leader that
            # still holds a deleted group's share partition) changes nothing.
            return _invalid(WRITE_UNINITIALIZED)
        if 0 <= leader_epoch < st.leader_epoch:
            return StateResult(errors.FencedLeaderEpochError.code,
                               f"Leader epoch {leader_epoch} is below the share partition's {st.leader_epoch}.")
        if 0 <= state_epoch < st.state_epoch:
            return StateResult(errors.FencedStateEpochError.code,
                               f"State epoch {state_epoch} is below the share partition's {st.state_epoch}.")
        start, merged = merge_batches(st.start_offset, st.batches, start_offset, batches)
        st = ShareState(st.state_epoch if state_epoch < 0 else state_epoch,
                        st.leader_epoch if leader_epoch < 0 else leader_epoch, start, merged)
        code = await self._put(key, st)
        return StateResult(code, None if not code else "The share-partition state could not be written.")

    async def initialize_state(self, key: ShareKey, state_epoch: int, start_offset: int) -> StateResult:
        """InitializeShareGroupState: a new state epoch, the start offset, no batches."""
        bad = check_key(*key) or check_batches(start_offset, []) \
            or self.availability(self.partition_of(key))
        if bad is not None:
            return bad
        st = self._saved.get(key)
        if st is not None and state_epoch < st.state_epoch:
            return StateResult(errors.FencedStateEpochError.code,
                               f"State epoch {state_epoch} is below the share partition's {st.state_epoch}.")
        code = await self._put(key, ShareState(state_epoch, 0 if st is None else st.leader_epoch,
                                               start_offset, []))
        return StateResult(code, None if not code else "The share-partition state could not be written.")

    async def delete_state(self, key: ShareKey) -> StateResult:
        """DeleteShareGroupState: the share partition's tombstone."""
        bad = check_key(*key) or self.availability(self.partition_of(key))
        if bad is not None:
            return bad
        code = await self._put(key, None)
        return StateResult(code, None if not code else "The share-partition state could not be deleted.")

    # ------------------------------------------------------------------ writing

    def _put(self, key: ShareKey, st: ShareState | None) -> asyncio.Future[int]:
        """Hold ``st`` and write its record with the others of this event-loop turn (one
        batch per state-topic partition); the future gives the append's error code."""
        if st is None:
            self._saved.pop(key, None)
        else:
            self._saved[key] = st
        index = self.partition_of(key)
        self._dirty.setdefault(index, {})[key] = st
        fut = self._turn.get(index)
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = self._turn[index] = loop.create_future()
            self._pending.add(fut)
            fut.add_done_callback(self._pending.discard)
            if len(self._turn) == 1:
                loop.call_soon(self._write_dirty)
        return asyncio.shield(fut)

    def _write_dirty(self) -> None:
        dirty, self._dirty = self._dirty, {}
        turn, self._turn = self._turn, {}
        for index, states in sorted(dirty.items()):
            records = [encode_snapshot(key, st) for key, st in states.items()]
            self.runtime.enqueue(index, [_StateWrite(records, turn[index])])

    # ------------------------------------------------------------------ ShardHandler

    def begin_load(self, index: int, epoch: int | None) -> None:
        self._loading[index] = {}

    def replay(self, index: int, entries: Sequence[LoadedRecord | LoadedMarker]) -> None:
        states = self._loading[index]
        for entry in entries:
            if isinstance(entry, LoadedMarker) or entry.key is None:
                continue
            try:
                decoded = decode_state(bytes(entry.key), None if entry.value is None else bytes(entry.value))
            except (ValueError, errors.KafkaError) as exc:
                log.error("%s-%d: skipping an unreadable record at offset %d: %s",
                          SHARE_GROUP_STATE_TOPIC_NAME, index, entry.offset, exc)
                continue
            if decoded is None:
                continue
            version, key, v = decoded
            if v is None:
                states.pop(key, None)
            elif version == 0:
                states[key] = ShareState(v.state_epoch, v.leader_epoch, v.start_offset, _batches(v))
            elif key in states:
                st = states[key]
                start, batches = merge_batches(st.start_offset, st.batches, v.start_offset, _batches(v))
                states[key] = ShareState(st.state_epoch, max(st.leader_epoch, v.leader_epoch), start, batches)

    def complete_load(self, index: int, read_end: int) -> int:
        states = self._loading.pop(index, {})
        self._saved.update(states)
        return len(states)

    def unload(self, index: int) -> None:
        self._loading.pop(index, None)
        for key in [k for k in self._saved if self.partition_of(k) == index]:
            del self._saved[key]

    def batch(self, write: _StateWrite) -> bytes:
        builder = logcore.BatchBuilder(compression="none")
        now = self.broker.clock.time_ms()
        for key, value in write.records:
            builder.append(value, key=key, timestamp_ms=now)
        return bytes(builder.build())

    def append_timeout_ms(self, write: _StateWrite) -> int:
        return int(self.broker.config["share.coordinator.write.timeout.ms"])

    def settled(self, index: int, write: _StateWrite, code: int, info: Any) -> None:
        if code:
            log.warning("%s-%d: a state write failed with error %d", SHARE_GROUP_STATE_TOPIC_NAME,
                        index, code)
        write.fail(code)
