"""KIP-932 share groups in the group coordinator: ShareGroupHeartbeat, the session timer, the
records and their replay (the share-group half of Kafka's ``GroupMetadataManager``).

``ShareGroups`` is one component of a ``GroupCoordinator`` (one ``__consumer_offsets``
partition), next to the classic and the KIP-848 consumer groups, with which it shares the
group-id namespace: a share group cannot take the id of a classic or consumer group (and
they cannot take its id): GROUP_ID_NOT_FOUND, as Kafka answers.

A heartbeat (``heartbeat``), in Kafka's order:

1. validate (INVALID_REQUEST): a group id; a member id (v1: the consumer makes it); epoch 0
   (join) with subscribed topic names; epoch -1 (leave); other negative epochs refused;
2. leave (epoch -1): the member goes, the group epoch is bumped; or find the member: epoch
   0 joins (a new member, or one rejoining under its id), a known member must send its
   epoch (or its previous one: a lost response), else FENCED_MEMBER_EPOCH; an unknown
   member UNKNOWN_MEMBER_ID; more than ``group.share.max.size`` members
   GROUP_MAX_SIZE_REACHED;
3. a new member, a changed subscription or a change of the subscribed topics' partition
   counts bumps the group epoch and recomputes the target assignment (``simple``);
4. the member moves to the assignment epoch with its target assignment (no revocation in
   share groups);
5. the records are written; the answer (member id, epoch, heartbeat interval and, when it
   joined, sent its subscription or its assignment changed, the assignment) goes once
   they are in the log.

A member that stops heartbeating for ``group.share.session.timeout.ms`` is removed (and its
acquired records are released: ``on_member_removed``).

Share-partition state (Kafka 4.1's ``ShareGroupStatePartitionMetadata``, ``state_metadata``):
only partitions whose state was initialized at their share coordinators are assigned. A
heartbeat that finds subscribed partitions neither initialized nor initializing (or
initializing for longer than ``group.share.initialize.retry.interval.ms``) records them as
initializing with its other records and names them in its result (``initialize``, at the
group epoch); the caller sends InitializeShareGroupState (start offset -1: the leader
resolves ``share.auto.offset.reset``) and reports back with ``initialized`` or
``uninitialized``. An initialized partition not assigned yet bumps the group epoch at the
next heartbeat (Kafka's ``initializedAssignmentPending``). Deletes (``begin_delete``,
``end_delete``) move topics through the deleting set; deleted topics leave the record
(``forget_topics``).

Not thread-safe: called from the coordinator's thread only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    UnknownMemberIdError,
)

from ..admin import map_append_error
from ..results import NONE, Pending
from . import state_metadata as sm
from .records import (
    decode_share_group_state_metadata,
    encode_share_group_current_assignment,
    encode_share_group_epoch,
    encode_share_group_member,
    encode_share_group_partition_metadata,
    encode_share_group_state_metadata,
    encode_share_group_target_epoch,
    encode_share_group_target_member,
)
from .share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    SHARE_ASSIGNOR,
    ShareGroup,
    ShareGroupMember,
    TopicPartitions,
    simple_assign,
)

__all__ = ["ShareGroups", "ShareHeartbeatResult"]

Record = tuple[bytes, bytes | None]
TopicsView = Mapping[str, tuple[Any, int]]


@dataclass
class ShareHeartbeatResult:
    error_code: int = NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None
    # Partitions to initialize (InitializeShareGroupState at ``state_epoch``, start offset
    # -1) once the records are written; partitions of deleted topics whose state to delete.
    initialize: TopicPartitions | None = None
    state_epoch: int = 0
    # The group's ShareGroupStatePartitionMetadata was empty (a new group, or one written by a
    # pylog that did not keep it): state already at the share coordinators is adopted.
    adopt: bool = False
    delete_state: TopicPartitions | None = None


class _Error(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ShareGroups:
    """The share groups of one coordinator shard. See the module docstring.

    ``on_member_removed(group_id, member_id)`` (set by the broker) is called when a member
    leaves or is fenced, so the share partitions release what it holds.
    """

    def __init__(self, config: Any, *, mono_ms: Callable[[], int], timers: Any,
                 write: Callable[..., Any], other_groups: Callable[[str], bool],
                 wall_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self._mono_ms = mono_ms
        self._wall_ms = wall_ms or mono_ms
        self._timers = timers
        self._write = write
        self._other_groups = other_groups
        self.groups: dict[str, ShareGroup] = {}
        # Group id -> its ShareGroupStatePartitionMetadata (record 15).
        self.state_metadata: dict[str, sm.StatePartitionMetadata] = {}
        self.on_member_removed: Callable[[str, str], None] | None = None
        # Group configs (share.heartbeat.interval.ms, share.session.timeout.ms): group id ->
        # overrides, read through ``group_setting`` (set by the broker).
        self.group_setting: Callable[[str, str, int], int] = lambda gid, name, default: default

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_setting(group_id, "share.heartbeat.interval.ms",
                                  self.config.share_heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_setting(group_id, "share.session.timeout.ms",
                                  self.config.share_session_timeout_ms)

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                  rack_id: str | None, subscribed_topic_names: list[str] | None,
                  client_id: str, client_host: str,
                  topics: TopicsView) -> Pending[ShareHeartbeatResult]:
        """ShareGroupHeartbeat (see the module docstring); ``topics`` is the broker's topic
        metadata (name -> (topic id, partitions))."""
        records: list[Record] = []
        try:
            self._validate(group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                result = self._leave(group_id, member_id, records, topics)
            else:
                result = self._heartbeat(group_id, member_id, member_epoch, rack_id,
                                         subscribed_topic_names, client_id, client_host,
                                         topics, records)
        except _Error as e:
            return Pending.completed(ShareHeartbeatResult(e.code, str(e)))
        if not records:
            return Pending.completed(result)
        pending: Pending[ShareHeartbeatResult] = Pending()

        def on_done(code: int) -> None:
            if code != NONE:
                pending._complete(ShareHeartbeatResult(
                    map_append_error(code), "the group's records were not written"))
            else:
                pending._complete(result)

        self._write(group_id, records, on_done)
        return pending

    @staticmethod
    def _validate(group_id: str, member_id: str, epoch: int, rack_id: str | None,
                  names: list[str] | None) -> None:
        bad = InvalidRequestError.code
        if not group_id:
            raise _Error(bad, "GroupId can't be empty.")
        if not member_id:
            raise _Error(bad, "MemberId can't be empty.")
        if rack_id == "":
            raise _Error(bad, "RackId can't be empty.")
        if epoch == 0:
            if not names:
                raise _Error(bad, "SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise _Error(bad, f"MemberEpoch {epoch} is invalid.")

    def _group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self._other_groups(group_id):
            raise _Error(GroupIdNotFoundError.code, f"Group {group_id} is not a share group.")
        if not create:
            raise _Error(GroupIdNotFoundError.code, f"Share group {group_id} not found.")
        group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def _heartbeat(self, group_id: str, member_id: str, epoch: int, rack_id: str | None,
                   names: list[str] | None, client_id: str, client_host: str,
                   topics: TopicsView, records: list[Record]) -> ShareHeartbeatResult:
        joining = epoch == 0
        group = self._group(group_id, joining)
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise _Error(UnknownMemberIdError.code,
                             f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.share_max_size:
                raise _Error(GroupMaxSizeReachedError.code,
                             f"The share group has reached its maximum capacity of "
                             f"{self.config.share_max_size} members.")
            member = ShareGroupMember(member_id)
        elif not joining and epoch != member.member_epoch and epoch != member.previous_member_epoch:
            raise _Error(FencedMemberEpochError.code,
                         f"The share group member has a {'greater' if epoch > member.member_epoch else 'smaller'} "
                         f"member epoch ({epoch}) than the one known by the group coordinator "
                         f"({member.member_epoch}). The member must abandon all its partitions "
                         f"and rejoin.")
        is_new = member_id not in group.members
        updated = dataclasses.replace(
            member,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            subscribed_topic_names=list(names) if names is not None
            else member.subscribed_topic_names,
            client_id=client_id, client_host=client_host)
        bump = is_new or sorted(updated.subscribed_topic_names) != sorted(member.subscribed_topic_names)
        if is_new or (updated.rack_id, updated.client_id, updated.client_host,
                      updated.subscribed_topic_names) != (member.rack_id, member.client_id,
                                                          member.client_host,
                                                          member.subscribed_topic_names):
            records.append(encode_share_group_member(group_id, member_id, updated))
        group.members[member_id] = updated
        bump = self._refresh_metadata(group, topics, records) or bump
        deleted = self._forget_deleted_topics(group_id, topics, records)
        bump = bump or sm.assignment_pending(self.meta(group_id), group.subscription_metadata,
                                             group.target, bool(group.members))
        if bump:
            group.group_epoch += 1
            records.append(encode_share_group_epoch(group_id, group.group_epoch))
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, records)
        before = group.members[member_id]
        target = group.target.get(member_id, {})
        after = before
        if before.member_epoch != group.assignment_epoch or before.assigned != target:
            after = dataclasses.replace(
                before, previous_member_epoch=before.member_epoch,
                member_epoch=group.assignment_epoch,
                assigned={t: set(ps) for t, ps in target.items()})
            group.members[member_id] = after
            records.append(encode_share_group_current_assignment(group_id, member_id, after))
        self._schedule_session_timeout(group_id, member_id)
        send = joining or names is not None or after.assigned != member.assigned or is_new
        adopt = self.meta(group_id).is_empty()
        return ShareHeartbeatResult(
            NONE, None, member_id, after.member_epoch, self.heartbeat_interval_ms(group_id),
            {t: set(ps) for t, ps in after.assigned.items()} if send else None,
            initialize=self._prepare_initialize(group, records), state_epoch=group.group_epoch,
            delete_state=deleted, adopt=adopt)

    def _refresh_metadata(self, group: ShareGroup, topics: TopicsView,
                          records: list[Record]) -> bool:
        wanted = {n: topics[n] for n in group.subscribed_topic_names() if n in topics}
        if wanted == group.subscription_metadata:
            return False
        group.subscription_metadata = wanted
        records.append(encode_share_group_partition_metadata(group.group_id, wanted))
        return True

    def _assign(self, group: ShareGroup, records: list[Record]) -> None:
        new = simple_assign(group.members, group.subscription_metadata,
                            self.meta(group.group_id).initialized_partitions())
        for mid, parts in new.items():
            if mid not in group.target or group.target[mid] != parts:
                records.append(encode_share_group_target_member(group.group_id, mid, parts))
        group.target = new
        group.assignment_epoch = group.group_epoch
        records.append(encode_share_group_target_epoch(group.group_id, group.assignment_epoch))

    @staticmethod
    def assignor_name(group: ShareGroup) -> str:
        return SHARE_ASSIGNOR

    # ------------------------------------------------------------------ leaving and fencing

    def _leave(self, group_id: str, member_id: str, records: list[Record],
               topics: TopicsView) -> ShareHeartbeatResult:
        group = self._group(group_id, False)
        if member_id not in group.members:
            raise _Error(UnknownMemberIdError.code,
                         f"Member {member_id} is not a member of group {group_id}.")
        self._fence(group, member_id, records, topics)
        return ShareHeartbeatResult(NONE, None, member_id, LEAVE_GROUP_MEMBER_EPOCH)

    def _fence(self, group: ShareGroup, member_id: str, records: list[Record],
               topics: TopicsView | None) -> None:
        """Remove a member and bump the group epoch; what it held is released."""
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self._timers.cancel(("sg-session", group.group_id, member_id))
        records.append(encode_share_group_current_assignment(group.group_id, member_id, None))
        records.append(encode_share_group_target_member(group.group_id, member_id, None))
        records.append(encode_share_group_member(group.group_id, member_id, None))
        if topics is not None:
            self._refresh_metadata(group, topics, records)
        else:
            kept = group.subscribed_topic_names()
            wanted = {n: v for n, v in group.subscription_metadata.items() if n in kept}
            if wanted != group.subscription_metadata:
                group.subscription_metadata = wanted
                records.append(encode_share_group_partition_metadata(group.group_id, wanted))
        group.group_epoch += 1
        records.append(encode_share_group_epoch(group.group_id, group.group_epoch))
        if self.on_member_removed is not None:
            self.on_member_removed(group.group_id, member_id)

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self._timers.schedule(("sg-session", group_id, member_id),
                              self._mono_ms() + self.session_timeout_ms(group_id),
                              lambda: self._expire(group_id, member_id))

    def _expire(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        records: list[Record] = []
        self._fence(group, member_id, records, None)
        self._write(group_id, records)

    # ------------------------------------------------------------------ deletion, loading

    def delete_records(self, group: ShareGroup) -> list[Record]:
        """The tombstones that delete an (empty) share group, and drop it from memory."""
        gid = group.group_id
        records = [encode_share_group_target_epoch(gid, None),
                   encode_share_group_partition_metadata(gid, None),
                   encode_share_group_state_metadata(gid, None),
                   encode_share_group_epoch(gid, None)]
        group.dead = True
        self.groups.pop(gid, None)
        self.state_metadata.pop(gid, None)
        return records

    def replay(self, rec: Any) -> None:
        """Apply one share-group record (a ``ShareGroupRecord``) read back from the log."""
        gid = rec.key.group_id
        t, v = rec.record_type, rec.value
        if t == 15:
            if v is None:
                self.state_metadata.pop(gid, None)
            else:
                self.state_metadata[gid] = decode_share_group_state_metadata(v)
            return
        group = self.groups.get(gid)
        if group is None:
            if v is None:
                return
            group = self.groups[gid] = ShareGroup(gid)
        if t == 11:
            if v is None:
                self.groups.pop(gid, None)
            else:
                group.group_epoch = v.epoch
        elif t == 9:
            group.subscription_metadata = {} if v is None else {
                tm.topic_name: (tm.topic_id, tm.num_partitions) for tm in v.topics}
        elif t == 10:
            mid = rec.key.member_id
            if v is None:
                group.members.pop(mid, None)
                return
            old = group.members.get(mid) or ShareGroupMember(mid)
            group.members[mid] = dataclasses.replace(
                old, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                subscribed_topic_names=list(v.subscribed_topic_names))
        elif t == 12:
            group.assignment_epoch = -1 if v is None else v.assignment_epoch
        elif t == 13:
            mid = rec.key.member_id
            if v is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = {tp.topic_id: set(tp.partitions)
                                     for tp in v.topic_partitions if tp.partitions}
        elif t == 14:
            mid = rec.key.member_id
            known = group.members.get(mid)
            if known is None and v is None:
                return
            old = known or ShareGroupMember(mid)
            if v is None:
                group.members[mid] = dataclasses.replace(
                    old, member_epoch=0, previous_member_epoch=0, assigned={})
                return
            group.members[mid] = dataclasses.replace(
                old, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                assigned={tp.topic_id: set(tp.partitions)
                          for tp in v.assigned_partitions if tp.partitions})

    def complete_load(self) -> None:
        """After a load every member gets a fresh session timeout."""
        for gid, group in self.groups.items():
            for mid in group.members:
                self._schedule_session_timeout(gid, mid)

    def clear(self) -> None:
        for g in self.groups.values():
            g.dead = True
        self.groups.clear()
        self.state_metadata.clear()

    # ------------------------------------------------------------------ share-partition state

    def meta(self, group_id: str) -> sm.StatePartitionMetadata:
        """The group's ShareGroupStatePartitionMetadata (empty when it has none)."""
        return self.state_metadata.get(group_id, sm.EMPTY)

    def _set_meta(self, group_id: str, meta: sm.StatePartitionMetadata, records: list[Record]) -> None:
        if meta == self.meta(group_id):
            return
        self.state_metadata[group_id] = meta
        records.append(encode_share_group_state_metadata(group_id, meta))

    def _prepare_initialize(self, group: ShareGroup, records: list[Record]) -> TopicPartitions | None:
        """Kafka's ``maybeCreateInitializeShareGroupStateRequest``: the subscribed partitions
        to initialize now, recorded as initializing (None: nothing to do)."""
        if not group.members:
            return None
        meta = self.meta(group.group_id)
        change = sm.to_initialize(meta, group.subscription_metadata, self._wall_ms(),
                                  self.config.share_initialize_retry_interval_ms)
        if not change:
            return None
        self._set_meta(group.group_id, sm.with_initializing(meta, change), records)
        return {t: set(e.partitions) for t, e in change.items()}

    def _forget_deleted_topics(self, group_id: str, topics: TopicsView,
                               records: list[Record]) -> TopicPartitions | None:
        """Topics of the record whose name the metadata now gives to another topic id (deleted
        and re-created) leave it; returns their partitions that may have state (to delete).
        A topic merely absent from ``topics`` is kept: a metadata cache still filling (a
        broker that just started) must not delete state; DeleteTopics tells the coordinators
        of the broker that deleted it (``forget_topics``)."""
        meta = self.meta(group_id)
        if meta.is_empty():
            return None
        gone = [t for t, name in meta.topic_names().items()
                if name in topics and topics[name][0] != t]
        if not gone:
            return None
        known = meta.known_partitions()
        self._set_meta(group_id, sm.without_topics(meta, gone), records)
        return {t: known.get(t, set()) for t in gone}

    def _write_meta(self, group_id: str, meta: sm.StatePartitionMetadata) -> Pending[int]:
        records: list[Record] = []
        self._set_meta(group_id, meta, records)
        if not records:
            return Pending.completed(NONE)
        pending: Pending[int] = Pending()
        self._write(group_id, records, lambda code: pending._complete(code))
        return pending

    def initialized(self, group_id: str, parts: TopicPartitions, names: Mapping[Any, str]) -> Pending[int]:
        """InitializeShareGroupState succeeded for ``parts``: they become initialized (and
        assignable); the record's write code."""
        if group_id not in self.groups:
            return Pending.completed(GroupIdNotFoundError.code)
        return self._write_meta(group_id, sm.with_initialized(self.meta(group_id), parts, names, self._wall_ms()))

    def uninitialized(self, group_id: str, parts: TopicPartitions) -> Pending[int]:
        """InitializeShareGroupState failed for ``parts``: they leave the initializing set
        (the next heartbeat tries again)."""
        if group_id not in self.groups:
            return Pending.completed(NONE)
        return self._write_meta(group_id, sm.without_initializing(self.meta(group_id), parts))

    def begin_delete(self, group_id: str, topics: TopicsView,
                     topic_ids: Mapping[Any, str] | None = None) -> tuple[Pending[int], TopicPartitions]:
        """Before DeleteShareGroupState: ``topic_ids`` (id -> name; None: every topic of the
        record) move to the deleting set, so that a crash in the middle leaves them there and
        the delete is done again. Returns the record's write and the partitions to delete:
        those initialized or initializing, and every partition (from ``topics``) of a topic
        already being deleted."""
        meta = self.meta(group_id)
        names = meta.topic_names()
        if topic_ids is None:
            topic_ids = names
        known = meta.known_partitions()
        counts = {tid: n for tid, n in topics.values()}
        parts: TopicPartitions = {}
        for t in topic_ids:
            ps = set(known.get(t, set()))
            if t in meta.deleting and t in counts:
                ps |= set(range(counts[t]))
            if ps:
                parts[t] = ps
        return self._write_meta(group_id, sm.with_deleting(meta, dict(topic_ids))), parts

    def end_delete(self, group_id: str, topic_ids: list[Any]) -> Pending[int]:
        """DeleteShareGroupState answered for ``topic_ids``: they leave the record."""
        return self._write_meta(group_id, sm.without_deleting(self.meta(group_id), topic_ids))

    def forget_topics(self, topic_ids: set[Any]) -> dict[str, TopicPartitions]:
        """Deleted topics leave every group's record (records written); returns, per group,
        the partitions of those topics that may have state."""
        out: dict[str, TopicPartitions] = {}
        for gid, meta in list(self.state_metadata.items()):
            gone = [t for t in meta.topic_names() if t in topic_ids]
            if not gone:
                continue
            known = meta.known_partitions()
            out[gid] = {t: known.get(t, set()) for t in gone}
            records: list[Record] = []
            self._set_meta(gid, sm.without_topics(meta, gone), records)
            self._write(gid, records)
        return out
