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

Durability: ``flush()`` returns once the snapshots of every change made so far are in the
log (acks=all on the single node's log); ShareFetch and ShareAcknowledge answer after it,
so an acknowledgement the client saw answered survives a restart, as in Kafka.

Event-loop affinity: the broker's loop. Single node only: in cluster mode share-partition
state lives in the leader's memory (``ShareService.state`` stays None).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Sequence
from typing import Any

import logcore
from pylog import errors
from pylog.coordinator.loader import LoadedMarker, LoadedRecord
from pylog.coordinator.runtime import CoordinatorRuntime, TopicSpec
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

__all__ = ["ShareStateStore", "SHARE_GROUP_STATE_TOPIC_NAME", "encode_snapshot", "decode_state"]

log = logging.getLogger("pylog.share")

_I16 = struct.Struct(">h")

ShareKey = tuple[str, uuid.UUID, int]
# start offset, batches, state epoch
Saved = tuple[int, list[StateBatch], int]


def encode_snapshot(key: ShareKey, sp: SharePartition | None, leader_epoch: int = 0) -> tuple[bytes, bytes | None]:
    """A ShareSnapshot record of ``sp`` (None: the share partition's tombstone)."""
    gid, tid, part = key
    k = _I16.pack(0) + ShareSnapshotKey(group_id=gid, topic_id=tid, partition=part).encode(0)
    if sp is None:
        return k, None
    sb = ShareSnapshotValue.StateBatch
    value = ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=sp.state_epoch, leader_epoch=leader_epoch,
        start_offset=sp.start_offset,
        state_batches=[sb(first_offset=b.first_offset, last_offset=b.last_offset,
                          delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in sp.state_batches()])
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
    if v.start_offset >= 0:
        start = v.start_offset
    per: dict[int, tuple[int, int]] = {}
    for b in batches + _batches(v):
        for off in range(max(b.first_offset, start), b.last_offset + 1):
            per[off] = (b.delivery_state, b.delivery_count)
    out: list[StateBatch] = []
    for off in sorted(per):
        state, count = per[off]
        if out and out[-1].last_offset == off - 1 and (out[-1].delivery_state, out[-1].delivery_count) == (state, count):
            out[-1] = StateBatch(out[-1].first_offset, off, state, count)
        else:
            out.append(StateBatch(off, off, state, count))
    return start, out, epoch


class _StateWrite:
    """One append of snapshot records; ``done`` resolves with the error code."""

    __slots__ = ("records", "done")

    def __init__(self, records: list[tuple[bytes, bytes | None]], done: asyncio.Future[int]) -> None:
        self.records = records
        self.done = done

    def fail(self, code: int) -> None:
        if not self.done.done():
            self.done.set_result(code)


class ShareStateStore:
    """``__share_group_state`` on a single node. See the module docstring."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = cfg["share.coordinator.state.topic.num.partitions"]
        spec = TopicSpec(SHARE_GROUP_STATE_TOPIC_NAME, self.num_partitions, 1, {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(cfg["share.coordinator.state.topic.segment.bytes"]),
        })
        self.runtime = CoordinatorRuntime(broker, spec, self,
                                          load_chunk_bytes=cfg["share.coordinator.load.buffer.size"])
        self._saved: dict[ShareKey, Saved] = {}
        self._loading: dict[int, dict[ShareKey, Saved]] = {}
        self._dirty: dict[ShareKey, SharePartition | None] = {}
        # The next flush; its result is the futures of the writes it enqueued (each resolves
        # with its error code), so ``flushed`` learns their outcome even when they settled
        # (inline) before it looked.
        self._flush: asyncio.Future[list[asyncio.Future[int]]] | None = None
        self._pending: set[asyncio.Future[int]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load every partition of an existing topic; returns when they are loaded, so no
        share partition starts without its saved state."""
        await self.runtime.load_all()

    async def shutdown(self) -> None:
        """Write what changed, then close (queued appends go to the log first)."""
        if self._flush is not None:
            await asyncio.shield(self._flush)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.runtime.shutdown()

    def on_topic_deleted(self) -> None:
        """``__share_group_state`` was deleted: its partitions resign; what is in memory
        (``read``) stays until the share partitions are written again."""
        self.runtime.on_topic_deleted()

    # ------------------------------------------------------------------ reading

    def read(self, key: ShareKey) -> tuple[int, list[StateBatch]] | None:
        saved = self._saved.get(key)
        return None if saved is None else (saved[0], saved[1])

    def __len__(self) -> int:
        return len(self._saved)

    def keys(self) -> set[ShareKey]:
        """Every share partition with saved state (the admin APIs list a group's)."""
        return set(self._saved)

    def saved(self, key: ShareKey) -> Saved | None:
        """What ``restore`` takes back (the admin APIs undo a change whose write failed)."""
        return self._saved.get(key)

    def restore(self, key: ShareKey, saved: Saved | None) -> None:
        """Put back what ``saved(key)`` returned before a change whose write failed; nothing
        is written (the log still has that state)."""
        self._dirty.pop(key, None)
        if saved is None:
            self._saved.pop(key, None)
        else:
            self._saved[key] = saved

    def state_epoch(self, key: ShareKey) -> int:
        """The saved state epoch of a share partition (0 when none)."""
        saved = self._saved.get(key)
        return 0 if saved is None else saved[2]

    # ------------------------------------------------------------------ writing

    def partition_of(self, key: ShareKey) -> int:
        gid, tid, part = key
        return partition_for(f"{gid}:{topic_id_str(tid)}:{part}", self.num_partitions)

    def write(self, key: ShareKey, sp: SharePartition) -> None:
        """Note a change of ``sp``; its snapshot is written with the next flush."""
        self._dirty[key] = sp
        self._saved[key] = (sp.start_offset, sp.state_batches(), sp.state_epoch)
        self._schedule()

    def delete(self, key: ShareKey) -> None:
        self._dirty[key] = None
        self._saved.pop(key, None)
        self._schedule()

    def _schedule(self) -> None:
        # One write per event-loop turn: the changes of one request (and of the others
        # handled in the same turn) go in one batch per state-topic partition.
        if self._flush is None:
            loop = asyncio.get_running_loop()
            self._flush = loop.create_future()
            loop.call_soon(self._start_write)

    def _start_write(self) -> None:
        task = asyncio.get_running_loop().create_task(self._write_dirty())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flushed(self) -> int:
        """Wait until every change noted so far is in the log; the error code of the
        writes (0, or e.g. NOT_COORDINATOR when the broker shuts down)."""
        writes = list(self._pending)
        if self._flush is not None:
            writes += await asyncio.shield(self._flush)
        codes = [await asyncio.shield(f) for f in writes]
        return next((c for c in codes if c), 0)

    async def _write_dirty(self) -> None:
        flush, self._flush = self._flush, None
        dirty, self._dirty = self._dirty, {}
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[int]] = []
        try:
            if self.broker.log_manager.topics.get(SHARE_GROUP_STATE_TOPIC_NAME) is None:
                await self.runtime.ensure_topic()
            by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
            for key, sp in dirty.items():
                by_partition.setdefault(self.partition_of(key), []).append(encode_snapshot(key, sp))
            for index, records in sorted(by_partition.items()):
                fut: asyncio.Future[int] = loop.create_future()
                self._pending.add(fut)
                fut.add_done_callback(self._pending.discard)
                futs.append(fut)
                self.runtime.enqueue(index, [_StateWrite(records, fut)])
        except (errors.KafkaError, logcore.LogcoreError, OSError) as exc:
            log.error("cannot write share-group state: %s", exc)
            failed: asyncio.Future[int] = loop.create_future()
            failed.set_result(errors.code_for_exception(exc))
            futs.append(failed)
        finally:
            if flush is not None and not flush.done():
                flush.set_result(futs)

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
                states[key] = (v.start_offset, _batches(v), v.state_epoch)
            elif key in states:
                states[key] = _apply_update(states[key], v)

    def complete_load(self, index: int, read_end: int) -> int:
        states = self._loading.pop(index, {})
        self._saved.update(states)
        return len(states)

    def unload(self, index: int) -> None:
        self._loading.pop(index, None)

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
