"""Transactional offset commits of the group coordinator (a mixin of it).

A transactional producer commits a consumer group's offsets inside its transaction
(``send_offsets_to_transaction``): AddOffsetsToTxn makes this ``__consumer_offsets``
partition part of the transaction, then TxnOffsetCommit comes here. Kafka's rules
(``OffsetMetadataManager.commitTransactionalOffset``, ``replayEndTransactionMarker``):

- the group checks are OffsetCommit's (``ClassicGroup.validateOffsetCommit`` with
  ``isTransactional``): an unknown group is created as a simple group when the generation
  is negative, else ILLEGAL_GENERATION (every version); v3+ requests naming a member or a
  generation get UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / ILLEGAL_GENERATION; but a request
  without member and generation is accepted whatever the group's state, and
  CompletingRebalance is no error;
- per partition, metadata over ``offset.metadata.max.bytes`` -> OFFSET_METADATA_TOO_LARGE;
- the other partitions' OffsetCommit records are written as ONE transactional batch with
  the producer's id and epoch (base sequence -1), answered once in the log, and kept pending
  for that producer: OffsetFetch does not see them (RequireStable -> UNSTABLE_OFFSET_COMMIT);
- the producer's COMMIT marker in this partition (``on_txn_marker``, called by the
  partition side after appending it, and by the loader in log order) makes them committed,
  each unless the committed offset's record is later in the log; ABORT drops them.

Not thread-safe, like the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pylog.errors import CoordinatorLoadInProgressError, IllegalGenerationError, InvalidGroupIdError

from .admin import map_append_error
from .classic import ClassicGroup
from .results import NONE, PartitionResult, Pending

if TYPE_CHECKING:
    from .consumer_coordinator import ConsumerGroups
    from .offsets import CommittedOffset, OffsetCommitPartition, OffsetMetadataManager
    from .results import Write


class TxnOffsetsMixin:
    if TYPE_CHECKING:
        _groups: dict[str, ClassicGroup]
        consumer: ConsumerGroups
        _offsets: OffsetMetadataManager
        _loading: bool

        def _wall_ms(self) -> int: ...
        def _write(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                   on_done: Callable[[int], None] | None = None, producer_id: int = -1,
                   producer_epoch: int = -1) -> Write: ...
        def _validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                                    generation_id: int, transactional: bool = False) -> int: ...

    def txn_offset_commit(
        self,
        group_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partitions: list[OffsetCommitPartition],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> Pending[list[PartitionResult]]:
        """TxnOffsetCommit (v0-4): completes with per-partition errors once the
        transactional batch is in the log (its offsets then pending for ``producer_id``).

        Args:
            producer_id, producer_epoch: the transactional producer (the batch carries them,
                so the partition's producer state fences a stale epoch).
            partitions: what to commit; whether each topic-partition exists is the
                handler's check, as for OffsetCommit.
            generation_id, member_id, group_instance_id: v3+ (v0-2: -1, "", None).

        Returns:
            ``Pending[list[PartitionResult]]``, in request order. Append errors are mapped
            as for OffsetCommit (INVALID_PRODUCER_EPOCH from the log passes through).
        """
        def all_fail(code: int) -> Pending[list[PartitionResult]]:
            return Pending.completed([PartitionResult(p.topic, p.partition, code) for p in partitions])

        if self._loading:
            return all_fail(CoordinatorLoadInProgressError.code)
        if not group_id:
            # Kafka refuses an empty group id here (OffsetCommit only refuses null).
            return all_fail(InvalidGroupIdError.code)
        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None:
            # A consumer-protocol group: the generation is the member epoch.
            error = self.consumer.validate_offset_commit(cgroup, member_id, generation_id, 9, transactional=True)
        else:
            group = self._groups.get(group_id)
            if group is None:
                if generation_id >= 0:
                    return all_fail(IllegalGenerationError.code)
                group = self._groups[group_id] = ClassicGroup(group_id, self._wall_ms())  # simple group
            error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id,
                                                 transactional=True)
        if error != NONE:
            return all_fail(error)
        # Transactional values carry no retention time (Kafka writes them at v3).
        results, records = self._offsets.commit_records(group_id, partitions, self._wall_ms())
        if not records:
            return Pending.completed(results)
        self._offsets.begin_transactional_write(producer_id)
        pending: Pending[list[PartitionResult]] = Pending()

        def on_done(code: int) -> None:
            self._offsets.settle(group_id, records, code == NONE, write.base_offset, producer_id)
            if code != NONE:
                mapped = map_append_error(code)
                for r in results:
                    if r.error_code == NONE:
                        r.error_code = mapped
            pending._complete(results)
        write = self._write(group_id, records, on_done, producer_id, producer_epoch)
        return pending

    def on_txn_marker(self, producer_id: int, commit: bool, offset: int = -1) -> None:
        """The producer's transaction ended: its COMMIT (``commit`` True) or ABORT marker is
        at log offset ``offset`` of this partition. Pending offsets of the producer become
        committed (each unless the committed one was written later) or are dropped.

        Called by the loader, in log order between ``begin_load`` and ``complete_load``,
        and at run time by the partition side once the marker is appended. A marker for a
        producer with no pending offsets here changes nothing.
        """
        self._offsets.replay_marker(producer_id, commit, offset)

    def has_open_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has transactional offsets in this partition that no
        marker has ended yet (written, or being written)."""
        return self._offsets.producer_has_open_transaction(producer_id)

    def pending_transactional_offsets(self, group_id: str) -> dict[int, dict[tuple[str, int], CommittedOffset]]:
        """The group's pending transactional offsets: {producer id: {(topic, partition):
        CommittedOffset}} (inspection: tests, tools)."""
        return self._offsets.pending_transactional(group_id)
