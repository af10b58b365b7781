"""Committed offsets of the groups one coordinator hosts (Kafka's ``OffsetMetadataManager``).

The committed state changes only by replaying records: at load, each record read back from
``__consumer_offsets``; at run time, each record once its write is in the log. So the
offsets in memory are always exactly what a replay of the log would rebuild (a failed write
changes nothing), and reads never see a commit that is not yet durable.

This class does not validate groups or members (the coordinator does that first); it checks
each partition's own rules, builds the records, and answers OffsetFetch.

Transactional offsets (TxnOffsetCommit, Kafka's ``OffsetMetadataManager``): records written
in a transactional batch of producer P are kept apart, pending per producer (then per group
and partition), invisible to OffsetFetch; OffsetFetch with RequireStable answers
UNSTABLE_OFFSET_COMMIT for a partition some producer has pending. P's COMMIT marker in this
partition moves them into the committed offsets, each only if its record is later in the
log than the committed one (so that compaction of ``__consumer_offsets`` cannot bring an
older offset back); an ABORT marker drops them. A tombstone removes the partition from the
committed offsets and from every pending transaction of the group. Every offset remembers
the log offset of its record (``record_offset``) for that comparison.

Not thread-safe: owned by one coordinator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pylog.errors import OffsetMetadataTooLargeError, UnstableOffsetCommitError

from .records import OffsetCommitRecord, decode_record, encode_offset_commit, stored_offset_commit
from .results import NONE, OffsetFetchPartition, PartitionResult


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # set only by commits that carried a retention time
    # The log offset of the record this value came from: bookkeeping for the COMMIT marker
    # rule (the later record wins), not part of the value.
    record_offset: int = field(default=-1, compare=False)


@dataclass(frozen=True)
class OffsetCommitPartition:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


_Offsets = dict[tuple[str, int], CommittedOffset]


class CommitRecords(list):  # type: ignore[type-arg]
    """The ``(key, value)`` records ``commit_records`` built, and ``decoded``: each as
    ``decode_record`` reads it back, which ``settle`` applies instead of decoding them."""

    __slots__ = ("decoded",)

    def __init__(self) -> None:
        super().__init__()
        self.decoded: list[OffsetCommitRecord] = []


class OffsetMetadataManager:
    def __init__(self, offset_metadata_max_bytes: int) -> None:
        self._max_metadata = offset_metadata_max_bytes
        self._offsets: dict[str, _Offsets] = {}
        # Partitions with a commit written but not yet durable, counted per write: a group
        # deletion must tombstone them too (their records land before the tombstones), and
        # an empty group with commits in flight is not expired away.
        self._pending: dict[str, Counter[tuple[str, int]]] = {}
        # Transactional offsets in the log whose producer has not ended its transaction
        # yet: producer id -> group -> partition -> offset (Kafka's
        # pendingTransactionalOffsets), and group -> producers with an open transaction
        # (openTransactionsByGroup; a producer stays listed until its marker, even when a
        # tombstone emptied its offsets for the group).
        self._txn: dict[int, dict[str, _Offsets]] = {}
        self._txn_groups: dict[str, set[int]] = {}
        # Transactional writes in flight per producer, and the marker that arrived while
        # one was (log offset, commit): a write whose records landed before that marker is
        # settled afterwards and must get the marker's outcome, as a reload would give it.
        self._txn_in_flight: Counter[int] = Counter()
        self._late_markers: dict[int, tuple[int, bool]] = {}
        # Stand-in record offsets when a caller does not know the log offset (keeps the
        # log order among those).
        self._next_record_offset = 0

    def clear(self) -> None:
        """Forget every offset (before a load, or when the partition is unloaded)."""
        self._offsets.clear()
        self._pending.clear()
        self._txn.clear()
        self._txn_groups.clear()
        self._txn_in_flight.clear()
        self._late_markers.clear()
        self._next_record_offset = 0

    def settle(self, group_id: str, records: list[tuple[bytes, bytes | None]], durable: bool,
               base_offset: int = -1, producer_id: int = -1) -> None:
        """A commit write finished: apply its records if ``durable`` (the first at log
        offset ``base_offset``; transactional ones, ``producer_id`` >= 0, as pending for
        that producer), and stop counting its partitions as in flight either way."""
        pending = self._pending.get(group_id)
        decoded = records.decoded if type(records) is CommitRecords else None
        if decoded is not None and len(decoded) != len(records):
            decoded = None  # changed after commit_records built it: read the bytes
        for i, (key, value) in enumerate(records):
            rec = decoded[i] if decoded is not None else decode_record(key, value)
            if not isinstance(rec, OffsetCommitRecord):
                continue
            if durable:
                self.replay(rec, base_offset + i if base_offset >= 0 else -1, producer_id)
            if pending is not None:
                tp = (rec.topic, rec.partition)
                pending[tp] -= 1
                if pending[tp] <= 0:
                    del pending[tp]
        if pending is not None and not pending:
            del self._pending[group_id]
        if producer_id >= 0:
            self._txn_in_flight[producer_id] -= 1
            if self._txn_in_flight[producer_id] <= 0:
                del self._txn_in_flight[producer_id]
                self._late_markers.pop(producer_id, None)

    def has_pending(self, group_id: str) -> bool:
        return bool(self._pending.get(group_id))

    # ------------------------------------------------------------------ replay

    def _record_offset(self, offset: int) -> int:
        if offset < 0:
            offset = self._next_record_offset
        self._next_record_offset = max(self._next_record_offset, offset + 1)
        return offset

    def replay(self, record: OffsetCommitRecord, offset: int = -1, producer_id: int = -1) -> None:
        """Apply one offset record found at log offset ``offset`` in a batch of
        ``producer_id`` (-1: not transactional): a value sets the offset (or, in a
        transaction, its pending value), a tombstone removes it, pending ones included."""
        tp = (record.topic, record.partition)
        if record.value is None:
            group = self._offsets.get(record.group)
            if group is not None:
                group.pop(tp, None)
                if not group:
                    del self._offsets[record.group]
            for pid in self._txn_groups.get(record.group, ()):
                self._txn.get(pid, {}).get(record.group, {}).pop(tp, None)
            return
        v = record.value
        known = offset >= 0
        committed = CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                                    self._record_offset(offset))
        if producer_id < 0:
            self._offsets.setdefault(record.group, {})[tp] = committed
            return
        late = self._late_markers.get(producer_id)
        if late is not None and known and late[0] > offset:
            # Its transaction already ended, at a marker later in the log than this record.
            if late[1]:
                self._materialize(record.group, tp, committed)
            return
        self._txn.setdefault(producer_id, {}).setdefault(record.group, {})[tp] = committed
        self._txn_groups.setdefault(record.group, set()).add(producer_id)

    def replay_bytes(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply records this coordinator wrote (all offset records) once they are durable."""
        for key, value in records:
            rec = decode_record(key, value)
            if isinstance(rec, OffsetCommitRecord):
                self.replay(rec)

    def replay_marker(self, producer_id: int, commit: bool, offset: int = -1) -> None:
        """The producer's transaction ended with a COMMIT (``commit``) or ABORT marker at log
        offset ``offset`` of this partition (Kafka's ``replayEndTransactionMarker``)."""
        if self._txn_in_flight.get(producer_id):
            self._late_markers[producer_id] = (offset if offset >= 0 else self._next_record_offset, commit)
        self._record_offset(offset)
        pending = self._txn.pop(producer_id, None)
        if pending is None:
            return  # no transactional offsets (a marker for data partitions only)
        for group_id in pending:
            producers = self._txn_groups.get(group_id)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self._txn_groups[group_id]
        if not commit:
            return
        for group_id, offsets in pending.items():
            for tp, committed in offsets.items():
                self._materialize(group_id, tp, committed)

    def _materialize(self, group_id: str, tp: tuple[str, int], committed: CommittedOffset) -> None:
        # Kafka keeps whichever of the transactional and the existing offset was written
        # later: after compaction, the log order is the only order that survives.
        existing = self._offsets.get(group_id, {}).get(tp)
        if existing is None or committed.record_offset > existing.record_offset:
            self._offsets.setdefault(group_id, {})[tp] = committed

    # ------------------------------------------------------------------ queries

    def group_ids(self) -> set[str]:
        """Groups with committed offsets or pending transactional ones."""
        return set(self._offsets) | {g for by_group in self._txn.values() for g, o in by_group.items() if o}

    def has_open_transactions(self, group_id: str) -> bool:
        """Whether some producer has an open transaction with offsets of this group."""
        return bool(self._txn_groups.get(group_id))

    def has_pending_transactional(self, group_id: str, tp: tuple[str, int]) -> bool:
        """Whether some open transaction holds an offset for this partition of the group."""
        return any(tp in self._txn.get(pid, {}).get(group_id, {}) for pid in self._txn_groups.get(group_id, ()))

    def producer_has_open_transaction(self, producer_id: int) -> bool:
        """Whether the producer has transactional offsets in this partition not yet ended
        by a marker (in the log, or on their way to it)."""
        return producer_id in self._txn or bool(self._txn_in_flight.get(producer_id))

    def begin_transactional_write(self, producer_id: int) -> None:
        """A transactional write is handed out; ``settle`` with the producer id ends it."""
        self._txn_in_flight[producer_id] += 1

    def pending_transactional(self, group_id: str) -> dict[int, _Offsets]:
        """A copy of the group's pending transactional offsets: {producer id: {(topic,
        partition): CommittedOffset}}."""
        return {pid: dict(self._txn[pid].get(group_id, {}))
                for pid in sorted(self._txn_groups.get(group_id, ())) if pid in self._txn}

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def committed(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """A copy of a group's committed offsets ({(topic, partition): CommittedOffset})."""
        return dict(self._offsets.get(group_id, {}))

    def snapshot(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        return {g: dict(o) for g, o in self._offsets.items() if o}

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
              require_stable: bool = False) -> list[OffsetFetchPartition]:
        """OffsetFetch for one group: the asked partitions (unknown ones as offset -1,
        metadata "", no error, as Kafka answers), or every committed one when ``topics`` is
        None. Pending transactional offsets are never returned; with ``require_stable``
        (v7+) a partition that has one answers UNSTABLE_OFFSET_COMMIT (offset -1), so that
        the consumer retries once the transaction has ended."""
        offsets = self._offsets.get(group_id, {})
        unstable = require_stable and self.has_open_transactions(group_id)
        out: list[OffsetFetchPartition] = []
        if topics is None:
            for (topic, partition), c in sorted(offsets.items()):
                if unstable and self.has_pending_transactional(group_id, (topic, partition)):
                    out.append(OffsetFetchPartition(topic, partition, error_code=UnstableOffsetCommitError.code))
                    continue
                out.append(OffsetFetchPartition(topic, partition, c.offset, c.leader_epoch, c.metadata))
            return out
        for topic, partitions in topics:
            for partition in partitions:
                found = offsets.get((topic, partition))
                if unstable and self.has_pending_transactional(group_id, (topic, partition)):
                    out.append(OffsetFetchPartition(topic, partition, error_code=UnstableOffsetCommitError.code))
                elif found is None:
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
        records = CommitRecords()
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
            records.decoded.append(stored_offset_commit(
                group_id, p.topic, p.partition, offset=p.committed_offset, leader_epoch=p.committed_leader_epoch,
                metadata=metadata, commit_timestamp=now_ms, expire_timestamp=expire,
            ))
            results.append(PartitionResult(p.topic, p.partition, NONE))
            # Counted until the caller reports the write with ``settle``.
            self._pending.setdefault(group_id, Counter())[(p.topic, p.partition)] += 1
        return results, records

    def tombstones(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None) -> list[tuple[bytes, bytes | None]]:
        """Tombstones for the given partitions that are committed, pending in a transaction
        or have a commit in flight (all such partitions of the group when None), as Kafka's
        ``deleteAllOffsets`` and ``deleteOffsets`` write them (one per partition)."""
        known = set(self._offsets.get(group_id, {})) | set(self._pending.get(group_id, {}))
        for pid in self._txn_groups.get(group_id, ()):
            known.update(self._txn.get(pid, {}).get(group_id, {}))
        chosen = sorted(known) if partitions is None else [tp for tp in partitions if tp in known]
        return [encode_offset_commit(group_id, t, p, offset=None) for t, p in chosen]

    def expired(self, group_id: str, now_ms: int, base_ms: int | None, retention_ms: int,
                keep_topics: set[str] | None) -> list[tuple[str, int]]:
        """Partitions whose offsets have expired (Kafka's ``cleanupExpiredOffsets``).

        Args:
            base_ms: the time retention counts from (the time the group became Empty), or
                None to count from each commit's own timestamp.
            keep_topics: topics that never expire (the group still subscribes to them).

        A partition with a pending transactional offset does not expire until its
        transaction ends (Kafka's ``cleanupExpiredOffsets``).
        """
        out = []
        for (topic, partition), c in sorted(self._offsets.get(group_id, {}).items()):
            if keep_topics is not None and topic in keep_topics:
                continue
            if self.has_pending_transactional(group_id, (topic, partition)):
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
