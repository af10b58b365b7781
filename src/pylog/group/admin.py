"""Offsets, admin APIs, expiry and loading of the group coordinator (a mixin of it).

Split from ``pylog.group.coordinator`` for size only: these methods are part of
``GroupCoordinator`` and share its state; membership transitions stay in that module, and
the only transitions made here are a deleted group going to Dead and the state a loaded
group starts in.

Consistency rule: committed offsets change only when their records are durable (see
``pylog.group.offsets``), so what OffsetFetch returns is what a restart would rebuild.

Not thread-safe, like the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pylog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidFetchSizeError,
    InvalidGroupIdError,
    KafkaStorageError,
    MessageTooLargeError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RebalanceInProgressError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)

from .classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState, Member
from .offsets import CommittedOffset, OffsetCommitPartition
from .records import (
    ConsumerGroupRecord,
    GroupMetadataRecord,
    OffsetCommitRecord,
    ShareGroupRecord,
    decode_record,
    encode_group_metadata,
)
from .results import (
    NONE,
    DescribedGroup,
    DescribedMember,
    JoinGroupResult,
    ListedGroup,
    OffsetDeleteResult,
    OffsetFetchGroupResult,
    PartitionResult,
    Pending,
    SyncGroupResult,
)

if TYPE_CHECKING:
    from pylog.protocol._records import GroupMetadataValue

    from .classic_members import ClassicMembers
    from .config import GroupCoordinatorConfig
    from .consumer_coordinator import ConsumerGroups
    from .consumer_group import ConsumerGroup
    from .offsets import OffsetMetadataManager
    from .results import Write
    from .share.coordinator import ShareGroups
    from .timers import Timers

_S = GroupState

# Append errors become what a client can act on (Kafka's appendGroupMetadataErrorToResponseError;
# GroupMetadataManager.storeGroup / storeOffsets in the Scala coordinator). In cluster mode
# the appends wait for the ISR: too few replicas or no ISR answer in offsets.commit.timeout.ms
# -> COORDINATOR_NOT_AVAILABLE (retry), leadership lost meanwhile -> NOT_COORDINATOR (look
# the coordinator up again). docs/replication.md has the table.
_APPEND_ERRORS = {
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    RequestTimedOutError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    MessageTooLargeError.code: UnknownServerError.code,
    RecordListTooLargeError.code: UnknownServerError.code,
    InvalidFetchSizeError.code: UnknownServerError.code,
}


def map_append_error(code: int) -> int:
    """The error a client gets when the coordinator's records could not be appended."""
    return _APPEND_ERRORS.get(code, code)


class AdminMixin:
    if TYPE_CHECKING:
        config: GroupCoordinatorConfig
        _groups: dict[str, ClassicGroup]
        _offsets: OffsetMetadataManager
        _timers: Timers
        _writes: list[Write]
        _loading: bool
        _loaded_groups: dict[str, GroupMetadataValue]
        consumer: ConsumerGroups
        classic_members: ClassicMembers
        share: ShareGroups

        def _wall_ms(self) -> int: ...
        def _mono_ms(self) -> int: ...
        def _write(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                   on_done: Callable[[int], None] | None = None, producer_id: int = -1,
                   producer_epoch: int = -1) -> Write: ...
        def _validate_member(self, group: ClassicGroup, member_id: str, group_instance_id: str | None) -> int: ...
        def _session_timer(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None: ...
        def _prepare_rebalance(self, group: ClassicGroup) -> None: ...

    # ------------------------------------------------------------------ OffsetCommit

    def offset_commit(
        self,
        group_id: str | None,
        generation_id: int,
        member_id: str,
        partitions: list[OffsetCommitPartition],
        group_instance_id: str | None = None,
        api_version: int = 9,
        retention_time_ms: int = -1,
    ) -> Pending[list[PartitionResult]]:
        """OffsetCommit (v2-9). Completes with per-partition errors once the records are
        durable. ``generation_id`` -1 with an empty member id is a simple consumer (or the
        admin client): accepted while the group has no members.

        Args:
            partitions: what to commit. Whether each topic-partition exists is the handler's
                check (UNKNOWN_TOPIC_OR_PARTITION): the coordinator does not know topics.
            api_version: v9+ answers an unknown group with GROUP_ID_NOT_FOUND.
            retention_time_ms: v2-v4 RetentionTimeMs (-1 = offsets.retention.minutes).

        Returns:
            ``Pending[list[PartitionResult]]``, in request order.
        """
        def all_fail(code: int) -> Pending[list[PartitionResult]]:
            return Pending.completed([PartitionResult(p.topic, p.partition, code) for p in partitions])

        if self._loading:
            return all_fail(CoordinatorLoadInProgressError.code)
        if group_id is None:
            return all_fail(InvalidGroupIdError.code)
        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None:
            # A consumer-protocol group: the generation is the member epoch (v9+).
            error = self.consumer.validate_offset_commit(cgroup, member_id, generation_id, api_version)
            if error != NONE:
                return all_fail(error)
            return self._store_offsets(group_id, partitions, retention_time_ms)
        group = self._groups.get(group_id)
        if group is None:
            # Committing to a group nobody joined is how simple consumers (assign(), no
            # subscribe()) and admin tools store offsets: the group appears, with no
            # protocol type. A positive generation here, though, names a group we lost.
            if generation_id >= 0:
                # A member of a group this coordinator does not know (e.g. it was deleted).
                return all_fail(GroupIdNotFoundError.code if api_version >= 9 else IllegalGenerationError.code)
            group = self._groups[group_id] = ClassicGroup(group_id, self._wall_ms())  # simple group
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error != NONE:
            return all_fail(error)
        member = group.members.get(member_id)
        if member is not None and group.is_in(_S.STABLE, _S.PREPARING_REBALANCE):
            self._session_timer(group, member)  # a commit proves the member is alive
        return self._store_offsets(group_id, partitions, retention_time_ms)

    def _store_offsets(self, group_id: str, partitions: list[OffsetCommitPartition],
                       retention_time_ms: int) -> Pending[list[PartitionResult]]:
        results, records = self._offsets.commit_records(group_id, partitions, self._wall_ms(), retention_time_ms)
        if not records:
            return Pending.completed(results)
        pending: Pending[list[PartitionResult]] = Pending()

        def on_done(code: int) -> None:
            # The group object exists from the moment the records were built; if it was
            # deleted since, its tombstones (which cover this commit) follow these records.
            self._offsets.settle(group_id, records, code == NONE, write.base_offset)
            if code != NONE:
                mapped = map_append_error(code)
                for r in results:
                    if r.error_code == NONE:
                        r.error_code = mapped
            pending._complete(results)
        write = self._write(group_id, records, on_done)
        return pending

    def _validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                                generation_id: int, transactional: bool = False) -> int:
        """Kafka's ``ClassicGroup.validateOffsetCommit``, in its order. ``transactional``
        (TxnOffsetCommit) skips the two checks that do not apply to it: a commit without
        member and generation on a group with members (v0-2 requests carry neither), and
        CompletingRebalance (the group state is not enforced for transactions)."""
        if group.is_in(_S.DEAD):
            return CoordinatorNotAvailableError.code
        if generation_id < 0 and group.is_in(_S.EMPTY):
            return NONE
        # Anything naming a member or a generation must name the current ones: a member
        # of an older generation may no longer own the partitions it commits.
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error != NONE:
                return error
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
        elif not transactional and not group.is_in(_S.EMPTY):
            # No member id and no generation: only allowed while nobody is a member.
            return UnknownMemberIdError.code
        # The generation is chosen but nobody has an assignment for it yet; the client
        # retries after its sync (during PreparingRebalance the old generation may commit
        # what it consumed before giving partitions up).
        if not transactional and group.is_in(_S.COMPLETING_REBALANCE):
            return RebalanceInProgressError.code
        return NONE

    # ------------------------------------------------------------------ OffsetFetch

    def offset_fetch(self, group_id: str | None, topics: list[tuple[str, list[int]]] | None,
                     require_stable: bool = False, member_id: str | None = None,
                     member_epoch: int = -1) -> OffsetFetchGroupResult:
        """OffsetFetch for one group (v8+ asks several: call once per group). ``topics`` None
        means every committed partition. Pending transactional offsets are not returned;
        ``require_stable`` (v7+) makes the partitions that have one answer
        UNSTABLE_OFFSET_COMMIT (the group-level error stays NONE, as in Kafka).
        ``member_id`` / ``member_epoch`` (v9+) are checked for a KIP-848 consumer group."""
        if self._loading:
            return OffsetFetchGroupResult(group_id or "", CoordinatorLoadInProgressError.code)
        if group_id is None:
            return OffsetFetchGroupResult("", InvalidGroupIdError.code)
        cgroup = self.consumer.groups.get(group_id)
        if cgroup is not None:
            error = self.consumer.validate_offset_fetch(cgroup, member_id, member_epoch)
            if error != NONE:
                return OffsetFetchGroupResult(group_id, error)
        return OffsetFetchGroupResult(group_id, NONE, self._offsets.fetch(group_id, topics, require_stable))

    # ------------------------------------------------------------------ ListGroups / DescribeGroups

    def list_groups(self, states_filter: list[str] | None = None,
                    types_filter: list[str] | None = None) -> list[ListedGroup]:
        """ListGroups: every hosted group; v4 filters by state (case-insensitive), v5 by type."""
        if self._loading:
            return []
        # Kafka compares state names case-insensitively; groups are "classic" or "consumer".
        states = {s.lower() for s in states_filter} if states_filter else None
        types = {t.lower() for t in types_filter} if types_filter else None
        out = []
        for gid in sorted(self._groups):
            g = self._groups[gid]
            if g.is_in(_S.DEAD):
                continue
            if states is not None and g.state.value.lower() not in states:
                continue
            if types is not None and "classic" not in types:
                continue
            out.append(ListedGroup(gid, g.protocol_type or "", g.state.value))
        if types is None or "consumer" in types:
            for gid, cg in self.consumer.groups.items():
                if states is None or cg.state.value.lower() in states:
                    out.append(ListedGroup(gid, CONSUMER_PROTOCOL_TYPE, cg.state.value, "consumer"))
            out.sort(key=lambda lg: lg.group_id)
        if types is None or "share" in types:
            for gid, sg in self.share.groups.items():
                if states is None or sg.state.value.lower() in states:
                    out.append(ListedGroup(gid, "share", sg.state.value, "share"))
            out.sort(key=lambda lg: lg.group_id)
        return out

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        """DescribeGroups: unknown groups are described as Dead with no error (v0-5); so are
        consumer-protocol groups, as Kafka does (ConsumerGroupDescribe describes those)."""
        out = []
        for gid in group_ids:
            if self._loading:
                out.append(DescribedGroup(CoordinatorLoadInProgressError.code, gid, ""))
                continue
            g = self._groups.get(gid)
            if g is None or g.is_in(_S.DEAD):
                out.append(DescribedGroup(NONE, gid, _S.DEAD.value))
                continue
            stable = g.is_in(_S.STABLE)
            members = [
                DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                # Member metadata only once the protocol is settled.
                                m.metadata(g.protocol_name) if stable else b"", m.assignment)
                for m in g.members.values()
            ]
            out.append(DescribedGroup(NONE, gid, g.state.value, g.protocol_type or "",
                                      (g.protocol_name or "") if stable else "", members))
        return out

    # ------------------------------------------------------------------ DeleteGroups

    def delete_groups(self, group_ids: list[str | None]) -> Pending[list[tuple[str, int]]]:
        """DeleteGroups: per group GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP or NONE; a deleted
        group's offsets and metadata are tombstoned. Completes once the tombstones are durable."""
        results: list[tuple[str, int]] = []
        waiting: list[Pending[int]] = []
        for gid in group_ids:
            if self._loading:
                results.append((gid or "", CoordinatorLoadInProgressError.code))
                continue
            if gid is None:
                results.append(("", InvalidGroupIdError.code))
                continue
            cg = self.consumer.groups.get(gid)
            if cg is not None:
                if cg.members:
                    results.append((gid, NonEmptyGroupError.code))
                    continue
                results.append((gid, NONE))
                waiting.append(self._delete_consumer_group(cg, len(results) - 1, results))
                continue
            sg = self.share.groups.get(gid)
            if sg is not None:
                if sg.members:
                    results.append((gid, NonEmptyGroupError.code))
                    continue
                results.append((gid, NONE))
                records = self._offsets.tombstones(gid) + self.share.delete_records(sg)
                waiting.append(self._write_tombstones(gid, records, len(results) - 1, results))
                continue
            g = self._groups.get(gid)
            if g is None or g.is_in(_S.DEAD):
                results.append((gid, GroupIdNotFoundError.code))
                continue
            if not g.is_in(_S.EMPTY):
                results.append((gid, NonEmptyGroupError.code))
                continue
            results.append((gid, NONE))
            waiting.append(self._delete_group(g, len(results) - 1, results))
        return _gather(results, waiting)

    def _delete_consumer_group(self, group: ConsumerGroup, index: int, results: list[tuple[str, int]]) -> Pending[int]:
        # An empty consumer group: its offsets, then its own records, tombstoned.
        gid = group.group_id
        records = self._offsets.tombstones(gid) + self.consumer.delete_records(group)
        return self._write_tombstones(gid, records, index, results)

    def _write_tombstones(self, gid: str, records: list[tuple[bytes, bytes | None]], index: int,
                          results: list[tuple[str, int]]) -> Pending[int]:
        done: Pending[int] = Pending()

        def on_done(code: int) -> None:
            if code == NONE:
                self._offsets.replay_bytes(records)
            else:
                results[index] = (gid, map_append_error(code))
            done._complete(code)
        self._write(gid, records, on_done)
        return done

    def _delete_group(self, group: ClassicGroup, index: int, results: list[tuple[str, int]]) -> Pending[int]:
        # The group leaves memory at once (Dead: no join can slip in while the tombstones
        # are written); its offsets go when the tombstones are durable, like any offset
        # change. A snapshot lets a failed write put the group back.
        gid = group.group_id
        snapshot = group.metadata_value() if group.protocol_type is not None else None
        records = self._offsets.tombstones(gid) + [encode_group_metadata(gid, None)]
        group.transition_to(_S.DEAD, self._wall_ms())
        del self._groups[gid]
        done: Pending[int] = Pending()

        def on_done(code: int) -> None:
            if code == NONE:
                self._offsets.replay_bytes(records)
            else:
                # Not deleted after all: bring the (empty) group back as the log still has it.
                if gid not in self._groups:
                    self._groups[gid] = self._group_from_value(gid, snapshot)
                results[index] = (gid, map_append_error(code))
            done._complete(code)
        self._write(gid, records, on_done)
        return done

    # ------------------------------------------------------------------ OffsetDelete

    def offset_delete(self, group_id: str, partitions: list[tuple[str, int]]) -> Pending[OffsetDeleteResult]:
        """OffsetDelete: remove committed offsets of topics the group does not consume."""
        if self._loading:
            return Pending.completed(OffsetDeleteResult(CoordinatorLoadInProgressError.code))
        if not group_id:
            return Pending.completed(OffsetDeleteResult(InvalidGroupIdError.code))
        subscribed: set[str] | None
        cg = self.consumer.groups.get(group_id)
        g = self._groups.get(group_id)
        if cg is not None:
            # A KIP-848 group: its members' subscriptions (names and regexes) are known.
            active = not cg.is_empty()
            subscribed = cg.subscribed_topic_names({t for t, _p in partitions}, self.config.internal_topics)
        elif g is None or g.is_in(_S.DEAD):
            return Pending.completed(OffsetDeleteResult(GroupIdNotFoundError.code))
        else:
            # Offsets of a topic the group still consumes must not vanish under it; other
            # protocols (connect, ...) do not say what they consume, so a live one refuses all.
            active = not g.is_in(_S.EMPTY)
            if active and g.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return Pending.completed(OffsetDeleteResult(NonEmptyGroupError.code))
            subscribed = g.subscribed_topics() if active else set()
        results: list[PartitionResult] = []
        to_delete: list[tuple[str, int]] = []
        for topic, partition in partitions:
            # Unknown subscriptions of an active consumer group count as subscribed to all.
            if active and (subscribed is None or topic in subscribed):
                results.append(PartitionResult(topic, partition, GroupSubscribedToTopicError.code))
                continue
            results.append(PartitionResult(topic, partition, NONE))
            to_delete.append((topic, partition))
        records = self._offsets.tombstones(group_id, to_delete)
        result = OffsetDeleteResult(NONE, results)
        if not records:
            return Pending.completed(result)
        pending: Pending[OffsetDeleteResult] = Pending()

        def on_done(code: int) -> None:
            if code == NONE:
                self._offsets.replay_bytes(records)
            else:
                result.error_code = map_append_error(code)
            pending._complete(result)
        self._write(group_id, records, on_done)
        return pending

    # ------------------------------------------------------------------ expiry

    def _schedule_expiry(self) -> None:
        self._timers.schedule(("expire-offsets",), self._mono_ms() + self.config.offsets_retention_check_interval_ms,
                              self._expire_offsets)

    def _expire_offsets(self) -> None:
        """Every offsets.retention.check.interval.ms: tombstone expired offsets, and delete
        empty groups left with none (Kafka's ``cleanupGroupMetadata``)."""
        self._schedule_expiry()
        if self._loading:
            return
        # Wall-clock time: retention is measured against commit and state timestamps that
        # are stored in the records and survive restarts.
        now = self._wall_ms()
        retention = self.config.offsets_retention_ms
        for gid in sorted(set(self._groups) | self._offsets.group_ids()):
            cg = self.consumer.groups.get(gid)
            if cg is not None:
                self._expire_consumer_group_offsets(cg, now, retention)
                continue
            g = self._groups.get(gid)
            if g is None or g.is_in(_S.DEAD):
                continue
            condition = self._expiration_base(g)
            if condition is None:
                continue  # an active group: its offsets are in use
            base, keep = condition
            committed = self._offsets.committed(gid)
            expired = self._offsets.expired(gid, now, base, retention, keep)
            records = self._offsets.tombstones(gid, expired)
            # The group goes with its last offset, unless a commit is on its way to the log
            # or a transaction still holds offsets of it.
            delete_group = (len(expired) == len(committed) and g.is_in(_S.EMPTY)
                            and not self._offsets.has_pending(gid) and not self._offsets.has_open_transactions(gid))
            if delete_group:
                records.append(encode_group_metadata(gid, None))
                g.transition_to(_S.DEAD, now)
                del self._groups[gid]
            if records:
                self._write(gid, records, self._replay_on_success(records))

    def _expire_consumer_group_offsets(self, group: ConsumerGroup, now: int, retention: int) -> None:
        """Kafka's rule for consumer groups: an offset expires offsets.retention.minutes after
        its own commit, unless a member subscribes to its topic; an empty group goes with
        its last offset."""
        gid = group.group_id
        keep = group.subscribed_topic_names(
            {t for t, _p in self._offsets.committed(gid)} | set(group.subscription_metadata),
            self.config.internal_topics)
        committed = self._offsets.committed(gid)
        expired = self._offsets.expired(gid, now, None, retention, keep)
        records = self._offsets.tombstones(gid, expired)
        if (len(expired) == len(committed) and group.is_empty() and not self._offsets.has_pending(gid)
                and not self._offsets.has_open_transactions(gid)):
            records += self.consumer.delete_records(group)
        if records:
            self._write(gid, records, self._replay_on_success(records))

    def _replay_on_success(self, records: list[tuple[bytes, bytes | None]]) -> Callable[[int], None]:
        def on_done(code: int) -> None:
            if code == NONE:
                self._offsets.replay_bytes(records)
        return on_done

    def _expiration_base(self, g: ClassicGroup) -> tuple[int | None, set[str] | None] | None:
        """Kafka's ``offsetExpirationCondition``: (base time or None for "each commit's own
        time", topics kept), or None when nothing may expire."""
        if g.protocol_type is None:
            return (None, None)  # simple group: retention counts from each commit
        if g.is_in(_S.EMPTY):
            return (g.state_timestamp_ms, None)  # counts from the time the group emptied
        if g.protocol_type == CONSUMER_PROTOCOL_TYPE and g.is_in(_S.STABLE):
            topics = g.subscribed_topics()
            if topics is not None:
                return (None, topics)  # only topics no member subscribes to any more
        return None

    # ------------------------------------------------------------------ loading

    def begin_load(self) -> None:
        """Start loading this partition: forget everything; requests get
        COORDINATOR_LOAD_IN_PROGRESS (heartbeats NONE) until ``complete_load``."""
        self._drop_everything(CoordinatorLoadInProgressError.code)
        self._loading = True
        self._loaded_groups = {}

    def replay(self, key: bytes, value: bytes | None, *, offset: int = -1, producer_id: int = -1) -> None:
        """Apply one record read back from the log (in log order; last value wins).

        ``offset`` is the record's log offset; ``producer_id`` the producer of a
        transactional batch (-1 otherwise): its offset commits stay pending until the
        producer's marker, given to ``on_txn_marker`` in its place in the log order.

        Raises:
            CoordinatorRecordError: the record is corrupt (the caller decides whether to
                stop loading; Kafka fails the load).
        """
        if not self._loading:
            raise RuntimeError("replay() outside begin_load()/complete_load()")
        rec = decode_record(key, value)
        if isinstance(rec, OffsetCommitRecord):
            self._offsets.replay(rec, offset, producer_id)
        elif isinstance(rec, GroupMetadataRecord):
            if rec.value is None:
                self._loaded_groups.pop(rec.group, None)
            else:
                self._loaded_groups[rec.group] = rec.value
        elif isinstance(rec, ConsumerGroupRecord):
            self.consumer.replay(rec)
        elif isinstance(rec, ShareGroupRecord):
            self.share.replay(rec)
        # Other record types (unknown) are skipped.

    def complete_load(self) -> None:
        """Build the groups: with members -> Stable (their session timers restart), else
        Empty; groups known only by their offsets are simple groups. A group over
        group.max.size rebalances so that it shrinks."""
        # Only the last metadata value of each group matters (records were replayed in log
        # order); members get fresh session timers, since nobody heartbeated during the load.
        self._loading = False
        values, self._loaded_groups = self._loaded_groups, {}
        for gid in list(self.consumer.groups) + list(self.share.groups):
            values.pop(gid, None)  # a classic group that became a consumer group
        for gid, value in values.items():
            self._groups[gid] = self._group_from_value(gid, value)
        self.consumer.complete_load()
        self.classic_members.complete_load()
        self.share.complete_load()
        for gid in self._offsets.group_ids():
            if gid not in self._groups and gid not in self.consumer.groups and gid not in self.share.groups:
                self._groups[gid] = ClassicGroup(gid, self._wall_ms())
        for g in self._groups.values():
            for m in g.members.values():
                self._session_timer(g, m)
            if len(g.members) > self.config.max_size and g.can_rebalance():
                self._prepare_rebalance(g)

    def _group_from_value(self, gid: str, value: GroupMetadataValue | None) -> ClassicGroup:
        now = self._wall_ms()
        if value is None:
            return ClassicGroup(gid, now)
        # The record keeps each member's metadata for the selected protocol only, so a
        # loaded member supports just that protocol until it rejoins with its full list.
        # Values before v1 have no rebalance timeout: the session timeout stands in.
        members = [
            Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                   m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout, m.session_timeout,
                   value.protocol_type, [(value.protocol or "", bytes(m.subscription))], bytes(m.assignment))
            for m in value.members
        ]
        ts = value.current_state_timestamp if value.current_state_timestamp >= 0 else now
        return ClassicGroup.loaded(gid, value.protocol_type, value.generation, value.protocol, value.leader,
                                   members, ts)

    def unload(self) -> None:
        """This partition moved away: every group dies and parked requests get NOT_COORDINATOR."""
        self._drop_everything(NotCoordinatorError.code)
        self._loading = False

    def _drop_everything(self, code: int) -> None:
        # Parked requests are answered (the client retries elsewhere or later); timers go
        # with the groups; the expiry timer is the one timer that outlives them.
        for g in self._groups.values():
            for m in g.members.values():
                if m.join_pending is not None:
                    m.join_pending._complete(JoinGroupResult(code, member_id=m.member_id))
                if m.sync_pending is not None:
                    m.sync_pending._complete(SyncGroupResult(code))
                m.join_pending = m.sync_pending = None
            g.transition_to(_S.DEAD, self._wall_ms())
        self._groups.clear()
        self.consumer.clear()
        self.share.clear()
        self._offsets.clear()
        self._timers.clear()
        self._schedule_expiry()

    # ------------------------------------------------------------------ inspection

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group (read-only use: tests, DescribeGroups-like tools)."""
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], object]:
        return dict(self._offsets.committed(group_id))

    def all_committed_offsets(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        """Every group's committed offsets ({group: {(topic, partition): offset}}), copied:
        what the consumer-lag metrics read at scrape time."""
        return self._offsets.snapshot()


def _gather(results: list[tuple[str, int]], waiting: list[Pending[int]]) -> Pending[list[tuple[str, int]]]:
    """One handle completed when every per-group write has settled."""
    # DeleteGroups answers once for all its groups; each deleted group waits on its own
    # write (results[i] may be rewritten by a failed write before the answer goes out).
    out: Pending[list[tuple[str, int]]] = Pending()
    left = [len(waiting)]
    if not waiting:
        out._complete(results)
        return out

    def one_done(_code: int) -> None:
        left[0] -= 1
        if left[0] == 0:
            out._complete(results)
    for p in waiting:
        p.add_done_callback(one_done)
    return out
