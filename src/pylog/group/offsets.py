"""Committed offsets of the groups one coordinator hosts (Kafka's ``OffsetMetadataManager``).

The committed state changes only by replaying records: at load, each record read back from
``__consumer_offsets``; at run time, each record once its write is in the log. So the
offsets in memory are always exactly what a replay of the log would rebuild (a failed write
changes nothing), and reads never see a commit that is not yet durable.

This class does not validate groups or members (the coordinator does that first); it checks
each partition's own rules, builds the records, and answers OffsetFetch.

Not thread-safe: owned by one coordinator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pylog.errors import OffsetMetadataTooLargeError

from .records import OffsetCommitRecord, decode_record, encode_offset_commit
from .results import NONE, OffsetFetchPartition, PartitionResult


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # set only by commits that carried a retention time


@dataclass(frozen=True)
class OffsetCommitPartition:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


class OffsetMetadataManager:
    def __init__(self, offset_metadata_max_bytes: int) -> None:
        self._max_metadata = offset_metadata_max_bytes
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # Partitions with a commit written but not yet durable, counted per write: a group
        # deletion must tombstone them too (their records land before the tombstones), and
        # an empty group with commits in flight is not expired away.
        self._pending: dict[str, Counter[tuple[str, int]]] = {}

    def clear(self) -> None:
        """Forget every offset (before a load, or when the partition is unloaded)."""
        self._offsets.clear()
        self._pending.clear()

    def settle(self, group_id: str, records: list[tuple[bytes, bytes | None]], durable: bool) -> None:
        """A commit write finished: apply its records if ``durable``, and stop counting its
        partitions as pending either way."""
        pending = self._pending.get(group_id)
        for key, value in records:
            rec = decode_record(key, value)
            if not isinstance(rec, OffsetCommitRecord):
                continue
            if durable:
                self.replay(rec)
            if pending is not None:
                tp = (rec.topic, rec.partition)
                pending[tp] -= 1
                if pending[tp] <= 0:
                    del pending[tp]
        if pending is not None and not pending:
            del self._pending[group_id]

    def has_pending(self, group_id: str) -> bool:
        return bool(self._pending.get(group_id))

    # ------------------------------------------------------------------ replay

    def replay(self, record: OffsetCommitRecord) -> None:
        """Apply one offset record: a value sets the offset, a tombstone removes it."""
        tp = (record.topic, record.partition)
        if record.value is None:
            group = self._offsets.get(record.group)
            if group is not None:
                group.pop(tp, None)
                if not group:
                    del self._offsets[record.group]
            return
        v = record.value
        self._offsets.setdefault(record.group, {})[tp] = CommittedOffset(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
        )

    def replay_bytes(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply records this coordinator wrote (all offset records) once they are durable."""
        for key, value in records:
            rec = decode_record(key, value)
            if isinstance(rec, OffsetCommitRecord):
                self.replay(rec)

    # ------------------------------------------------------------------ queries

    def group_ids(self) -> set[str]:
        return set(self._offsets)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def committed(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """A copy of a group's committed offsets ({(topic, partition): CommittedOffset})."""
        return dict(self._offsets.get(group_id, {}))

    def snapshot(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        return {g: dict(o) for g, o in self._offsets.items() if o}

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None) -> list[OffsetFetchPartition]:
        """OffsetFetch for one group: the asked partitions (unknown ones as offset -1,
        metadata "", no error, as Kafka answers), or every committed one when ``topics`` is
        None."""
        offsets = self._offsets.get(group_id, {})
        out: list[OffsetFetchPartition] = []
        if topics is None:
            for (topic, partition), c in sorted(offsets.items()):
                out.append(OffsetFetchPartition(topic, partition, c.offset, c.leader_epoch, c.metadata))
            return out
        for topic, partitions in topics:
            for partition in partitions:
                found = offsets.get((topic, partition))
                if found is None:
                    out.append(OffsetFetchPartition(topic, partition))
                else:
                    out.append(OffsetFetchPartition(topic, partition, found.offset, found.leader_epoch,
                                                    found.metadata))
        return out

    # ------------------------------------------------------------------ record builders

    def commit_records(
        self, group_id: str, partitions: list[OffsetCommitPartition], now_ms: int, retention_time_ms: int = -1
    ) -> tuple[list[PartitionResult], list[tuple[bytes, bytes | None]]]:
        """Per-partition results and the records of the partitions that passed.

        A partition fails alone: metadata over ``offset.metadata.max.bytes`` gets
        OFFSET_METADATA_TOO_LARGE and writes nothing; the others are committed.
        ``retention_time_ms`` (OffsetCommit v2-v4, -1 = broker default) sets an absolute
        expiry time, which Kafka stores by writing the value at v1.
        """
        results: list[PartitionResult] = []
        records: list[tuple[bytes, bytes | None]] = []
        expire = -1 if retention_time_ms is None or retention_time_ms < 0 else now_ms + retention_time_ms
        for p in partitions:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if len(metadata.encode("utf-8")) > self._max_metadata:
                results.append(PartitionResult(p.topic, p.partition, OffsetMetadataTooLargeError.code))
                continue
            records.append(encode_offset_commit(
                group_id, p.topic, p.partition, offset=p.committed_offset, leader_epoch=p.committed_leader_epoch,
                metadata=metadata, commit_timestamp=now_ms, expire_timestamp=expire,
            ))
            results.append(PartitionResult(p.topic, p.partition, NONE))
            # Counted until the caller reports the write with ``settle``.
            self._pending.setdefault(group_id, Counter())[(p.topic, p.partition)] += 1
        return results, records

    def tombstones(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None) -> list[tuple[bytes, bytes | None]]:
        """Tombstones for the given partitions that are committed or have a commit in flight
        (all such partitions of the group when None)."""
        known = set(self._offsets.get(group_id, {})) | set(self._pending.get(group_id, {}))
        chosen = sorted(known) if partitions is None else [tp for tp in partitions if tp in known]
        return [encode_offset_commit(group_id, t, p, offset=None) for t, p in chosen]

    def expired(self, group_id: str, now_ms: int, base_ms: int | None, retention_ms: int,
                keep_topics: set[str] | None) -> list[tuple[str, int]]:
        """Partitions whose offsets have expired (Kafka's ``cleanupExpiredOffsets``).

        Args:
            base_ms: the time retention counts from (the time the group became Empty), or
                None to count from each commit's own timestamp.
            keep_topics: topics that never expire (the group still subscribes to them).
        """
        out = []
        for (topic, partition), c in sorted(self._offsets.get(group_id, {}).items()):
            if keep_topics is not None and topic in keep_topics:
                continue
            if c.expire_timestamp_ms != -1:
                # A commit with its own retention time (v1 value) expires at that time.
                if now_ms >= c.expire_timestamp_ms:
                    out.append((topic, partition))
                continue
            base = c.commit_timestamp_ms if base_ms is None else base_ms
            if now_ms - base >= retention_ms:
                out.append((topic, partition))
        return out
