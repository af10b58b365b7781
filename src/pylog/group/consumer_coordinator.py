"""KIP-848 consumer groups in the group coordinator: ConsumerGroupHeartbeat, the timers,
the records and their replay (the consumer-group half of Kafka's ``GroupMetadataManager``).

``ConsumerGroups`` is one component of a ``GroupCoordinator`` (one ``__consumer_offsets``
partition); the coordinator hands it its clock readings, timer table and write queue, and
the classic groups it must not collide with (classic and consumer groups share the group-id
namespace; an empty classic group, e.g. one that only holds offsets, becomes a consumer
group when a consumer-protocol member joins it, as in Kafka).

A heartbeat (``heartbeat``), in Kafka's order:

1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION
   for a regex ``pylog.group.topic_regex`` refuses);
2. leave (epoch -1; -2 for a static member that will come back) or find the member:
   epoch 0 joins (a static member whose instance id is held by a member that did not
   leave with -2 gets UNRELEASED_INSTANCE_ID; one that left is replaced and keeps its
   assignment), a positive epoch must be the member's epoch, or its previous one with
   owned partitions inside its assignment (a lost response), else FENCED_MEMBER_EPOCH;
   an unknown member gets UNKNOWN_MEMBER_ID;
3. a new member or a changed subscription, and any change of the subscribed topics'
   partition counts, bumps the group epoch; then the target assignment is recomputed
   with the member's (or the group's default) server assignor;
4. the member reconciles one step (``consumer_group.reconcile``);
5. the changed records are written; the answer (member id, epoch, heartbeat interval and,
   on a full request or a change, the assignment) is sent once they are in the log.

Timers: the session timeout (``group.consumer.session.timeout.ms``) fences a member that
stops heartbeating; the rebalance timeout (the member's, from its first heartbeat) fences a
member that does not revoke its partitions in time.

Not thread-safe: called from the coordinator's thread only.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)

from .admin import map_append_error
from .assignors import ASSIGNORS
from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicPartitions,
    copy_partitions,
    reconcile,
)
from .consumer_replay import replay as replay_record
from .records import (
    ConsumerGroupRecord,
    encode_consumer_group_current_assignment,
    encode_consumer_group_epoch,
    encode_consumer_group_member,
    encode_consumer_group_partition_metadata,
    encode_consumer_group_target_epoch,
    encode_consumer_group_target_member,
    encode_group_metadata,
)
from .results import NONE, Pending
from .topic_regex import compile_subscription

__all__ = ["ConsumerGroups", "HeartbeatResult", "TopicsView"]

Record = tuple[bytes, bytes | None]
# What the broker knows of its topics: name -> (topic id, number of partitions).
TopicsView = Mapping[str, tuple[uuid.UUID, int]]


@dataclass
class HeartbeatResult:
    error_code: int = NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


class HeartbeatError(Exception):
    """A request refused with a Kafka error code and message (raised inside a heartbeat)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


_Error = HeartbeatError


def _owned_from_request(topic_partitions: list[Any] | None) -> TopicPartitions | None:
    if topic_partitions is None:
        return None
    return {tp.topic_id: set(tp.partitions) for tp in topic_partitions if tp.partitions}


class ConsumerGroups:
    """The consumer groups of one coordinator shard. See the module docstring."""

    def __init__(
        self,
        config: Any,
        *,
        mono_ms: Callable[[], int],
        timers: Any,
        write: Callable[..., Any],
        new_uuid: Callable[[], str],
        classic_groups: dict[str, Any],
    ) -> None:
        self.config = config
        self._mono_ms = mono_ms
        self._timers = timers
        self._write = write
        self._new_uuid = new_uuid
        self._classic = classic_groups
        self.groups: dict[str, ConsumerGroup] = {}
        # The online migration between the protocols (``pylog.group.migration``), set by
        # the coordinator: converts a classic group on a heartbeat, and a consumer group
        # back when its last consumer-protocol member leaves.
        self.migration: Any = None
        # Group configs (consumer.session.timeout.ms, consumer.heartbeat.interval.ms):
        # (group id, name, broker default) -> the group's value, set by the broker
        # (``pylog.group.group_configs``).
        self.group_setting: Callable[[str, str, int], int] = lambda gid, name, default: default

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_setting(group_id, "consumer.heartbeat.interval.ms",
                                  self.config.consumer_heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_setting(group_id, "consumer.session.timeout.ms",
                                  self.config.consumer_session_timeout_ms)

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: list[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        topic_partitions: list[Any] | None,
        client_id: str,
        client_host: str,
        topics: TopicsView,
    ) -> Pending[HeartbeatResult]:
        """ConsumerGroupHeartbeat (see the module docstring). ``topics`` is the broker's
        current topic metadata."""
        records: list[Record] = []
        try:
            self._validate(
                group_id,
                member_id,
                member_epoch,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                subscribed_topic_names,
                subscribed_topic_regex,
                server_assignor,
                topic_partitions,
            )
            if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(
                    group_id, member_id, member_epoch, instance_id, records, topics
                )
            else:
                result = self._heartbeat(
                    group_id,
                    member_id or self._new_uuid(),
                    member_epoch,
                    instance_id,
                    rack_id,
                    rebalance_timeout_ms,
                    subscribed_topic_names,
                    subscribed_topic_regex,
                    server_assignor,
                    _owned_from_request(topic_partitions),
                    client_id,
                    client_host,
                    topics,
                    records,
                )
        except _Error as e:
            if records:
                # Only a group conversion (or an empty classic group replaced) writes before a
                # refusal; it is applied in memory already, so its records must follow.
                self._write(group_id, records)
            return Pending.completed(HeartbeatResult(e.code, str(e)))
        if not records:
            return Pending.completed(result)
        pending: Pending[HeartbeatResult] = Pending()

        def on_done(code: int) -> None:
            if code != NONE:
                pending._complete(
                    HeartbeatResult(map_append_error(code), "the group's records were not written")
                )
            else:
                pending._complete(result)

        self._write(group_id, records, on_done)
        return pending

    def _validate(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        names: list[str] | None,
        regex: str | None,
        assignor: str | None,
        owned: list[Any] | None,
    ) -> None:
        bad = InvalidRequestError.code
        if not group_id:
            raise _Error(bad, "GroupId can't be empty.")
        if instance_id == "":
            raise _Error(bad, "InstanceId can't be empty.")
        if rack_id == "":
            raise _Error(bad, "RackId can't be empty.")
        # An empty regex is "no regex" (librdkafka sends "" with topic names, as Kafka reads it).
        if regex:
            try:
                compile_subscription(regex)
            except ValueError as exc:
                raise _Error(InvalidRegularExpressionError.code, str(exc)) from None
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not member_id:
                raise _Error(bad, "MemberId can't be empty.")
        elif epoch == 0:
            if rebalance_timeout_ms == -1:
                raise _Error(bad, "RebalanceTimeoutMs must be provided in first request.")
            if owned is None or any(tp.partitions for tp in owned):
                raise _Error(bad, "TopicPartitions must be empty when (re-)joining.")
            if not names and not regex:
                raise _Error(
                    bad,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not member_id:
                raise _Error(bad, "MemberId can't be empty.")
            if instance_id is None:
                raise _Error(bad, "InstanceId can't be null.")
        else:
            raise _Error(bad, "MemberEpoch is invalid.")
        if assignor is not None and assignor not in self.config.consumer_assignors:
            raise _Error(
                UnsupportedAssignorError.code,
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )

    def _group(self, group_id: str, create: bool, records: list[Record],
               topics: TopicsView | None = None) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self._classic.get(group_id)
        if (classic is not None and create and not classic.is_empty() and self.migration is not None
                and topics is not None):
            # Online upgrade: a consumer-protocol member joins a classic consumer group.
            converted = self.migration.upgrade(classic, topics, records)
            if converted is not None:
                return converted
        if classic is not None and not (create and classic.is_empty()):
            raise _Error(GroupIdNotFoundError.code, f"Group {group_id} is not a consumer group.")
        if not create:
            raise _Error(GroupIdNotFoundError.code, f"Consumer group {group_id} not found.")
        # An empty classic group (offsets only) becomes this consumer group; its offsets
        # stay where they are (keyed by group id), its metadata record is tombstoned so a
        # reload does not bring the classic group back (Kafka's maybeDeleteEmptyClassicGroup).
        if self._classic.pop(group_id, None) is not None:
            records.append(encode_group_metadata(group_id, None))
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def _heartbeat(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        names: list[str] | None,
        regex: str | None,
        assignor: str | None,
        owned: TopicPartitions | None,
        client_id: str,
        client_host: str,
        topics: TopicsView,
        records: list[Record],
    ) -> HeartbeatResult:
        joining = epoch == 0
        group = self._group(group_id, joining, records, topics)
        if (
            len(group.members) >= self.config.consumer_max_size
            and member_id not in group.members
            and group.static_member(instance_id) is None
        ):
            raise _Error(
                GroupMaxSizeReachedError.code,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members.",
            )
        member = self._member(group, member_id, epoch, instance_id, owned, joining, records)
        updated = dataclasses.replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms
            if rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=assignor if assignor is not None else member.server_assignor,
            subscribed_topic_names=list(names)
            if names is not None
            else member.subscribed_topic_names,
            # null: unchanged; "": no regex any more.
            subscribed_topic_regex=(regex or None)
            if regex is not None
            else member.subscribed_topic_regex,
            client_id=client_id,
            client_host=client_host,
            # A member heartbeating with this API no longer speaks the classic protocol.
            classic_session_timeout_ms=None,
            classic_protocols=None,
        )
        is_new = member_id not in group.members
        bump = is_new or updated.subscription_key() != member.subscription_key()
        if is_new or updated.metadata_key() != member.metadata_key():
            records.append(encode_consumer_group_member(group_id, member_id, updated))
        group.put_member(updated)
        bump = self._refresh_metadata(group, topics, records) or bump
        if bump:
            group.group_epoch += 1
            records.append(encode_consumer_group_epoch(group_id, group.group_epoch))
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, records)
        before = group.members[member_id]
        after = reconcile(
            before,
            group.assignment_epoch,
            group.target.get(member_id, {}),
            group.partition_epoch,
            owned,
        )
        if after is not before:
            group.put_member(after)
            records.append(encode_consumer_group_current_assignment(group_id, member_id, after))
            if after.state == MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(
                    group_id, member_id, after.member_epoch, after.rebalance_timeout_ms
                )
            else:
                self._timers.cancel(("cg-rebalance", group_id, member_id))
        self._schedule_session_timeout(group_id, member_id)
        full = joining or (rebalance_timeout_ms != -1 and names is not None and owned is not None)
        changed = after.assigned != member.assigned
        return HeartbeatResult(
            NONE,
            None,
            member_id,
            after.member_epoch,
            self.heartbeat_interval_ms(group_id),
            copy_partitions(after.assigned) if full or changed or is_new else None,
        )

    def _member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        instance_id: str | None,
        owned: TopicPartitions | None,
        joining: bool,
        records: list[Record],
    ) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise _Error(
                        UnknownMemberIdError.code,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerGroupMember(member_id)
            self._check_epoch(member, epoch, owned)
            return member
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(
                    member_id, instance_id=instance_id
                )
            if existing.member_id == member_id:
                return existing
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _Error(
                    UnreleasedInstanceIdError.code,
                    f"Static member {existing.member_id} with instance id {instance_id} is present in "
                    f"group {group.group_id}.",
                )
            # The instance comes back under a new member id: it takes over the old
            # member's subscription and assignment without a group epoch bump.
            replacement = dataclasses.replace(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            target = group.target.get(existing.member_id)
            self._remove(group, existing.member_id, records)
            group.put_member(replacement)
            if target is not None:
                group.target[member_id] = target
                records.append(
                    encode_consumer_group_target_member(group.group_id, member_id, target)
                )
            records.append(encode_consumer_group_member(group.group_id, member_id, replacement))
            records.append(
                encode_consumer_group_current_assignment(group.group_id, member_id, replacement)
            )
            return replacement
        if existing is None:
            raise _Error(UnknownMemberIdError.code, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise _Error(
                FencedInstanceIdError.code,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        self._check_epoch(existing, epoch, owned)
        return existing

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember, epoch: int, owned: TopicPartitions | None
    ) -> None:
        if epoch == 0:
            return  # a member rejoining under its id gets its current assignment back
        if epoch > member.member_epoch:
            raise _Error(
                FencedMemberEpochError.code,
                f"The member has a greater member epoch ({epoch}) than the coordinator's "
                f"({member.member_epoch}). It must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            subset = owned is not None and all(
                ps <= member.assigned.get(t, set()) for t, ps in owned.items()
            )
            if epoch != member.previous_member_epoch or not subset:
                raise _Error(
                    FencedMemberEpochError.code,
                    f"The member has a smaller member epoch ({epoch}) than the coordinator's "
                    f"({member.member_epoch}). It must abandon all its partitions and rejoin.",
                )

    def _refresh_metadata(
        self, group: ConsumerGroup, topics: TopicsView, records: list[Record]
    ) -> bool:
        """Recompute the subscribed topics' metadata; True (and a record) when it changed."""
        wanted = {
            name: topics[name]
            for name in group.subscribed_topic_names(topics, self.config.internal_topics)
        }
        if wanted == group.subscription_metadata:
            return False
        group.subscription_metadata = wanted
        records.append(encode_consumer_group_partition_metadata(group.group_id, wanted))
        return True

    def _assign(self, group: ConsumerGroup, records: list[Record]) -> None:
        """Compute the target assignment at the group epoch; write what changed."""
        by_id = {tid: (name, n) for name, (tid, n) in group.subscription_metadata.items()}
        internal = self.config.internal_topics
        subs = {
            m.member_id: {
                group.subscription_metadata[t][0] for t in group.member_topics(m, internal)
            }
            for m in group.members.values()
        }
        name = self.assignor_name(group)
        new = ASSIGNORS[name](subs, by_id, group.target)
        for mid, parts in new.items():
            if group.target.get(mid, {}) != parts or mid not in group.target:
                records.append(encode_consumer_group_target_member(group.group_id, mid, parts))
        group.target = new
        group.assignment_epoch = group.group_epoch
        records.append(encode_consumer_group_target_epoch(group.group_id, group.assignment_epoch))

    def assignor_name(self, group: ConsumerGroup) -> str:
        # Kafka: the assignor most members ask for, else the first configured one.
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda a: votes[a])
        return self.config.consumer_assignors[0]

    # ------------------------------------------------------------------ leaving and fencing

    def _leave(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        instance_id: str | None,
        records: list[Record],
        topics: TopicsView,
    ) -> HeartbeatResult:
        group = self._group(group_id, False, records)
        if instance_id is None:
            if member_id not in group.members:
                raise _Error(
                    UnknownMemberIdError.code,
                    f"Member {member_id} is not a member of group {group_id}.",
                )
            self._fence_or_downgrade(group, member_id, records, topics)
            return HeartbeatResult(NONE, None, member_id, epoch)
        member = group.static_member(instance_id)
        if member is None:
            raise _Error(UnknownMemberIdError.code, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise _Error(
                FencedInstanceIdError.code,
                f"Static member {member_id} with instance id {instance_id} was fenced.",
            )
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Temporarily away: it keeps its place (and partitions) until its session ends.
            away = dataclasses.replace(
                member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={}
            )
            group.put_member(away)
            records.append(encode_consumer_group_current_assignment(group_id, member_id, away))
            return HeartbeatResult(NONE, None, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self._fence_or_downgrade(group, member_id, records, topics)
        return HeartbeatResult(NONE, None, member_id, epoch)

    def _fence_or_downgrade(self, group: ConsumerGroup, member_id: str, records: list[Record],
                            topics: TopicsView | None) -> None:
        """A member leaves or is fenced. When it is the last consumer-protocol member and the
        policy allows, the group goes back to a classic group (Kafka's online downgrade)."""
        if self.migration is not None and self.migration.maybe_downgrade(group, member_id, records):
            return
        self._fence(group, member_id, records, topics)

    def cancel_member_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("cg-session", "cg-rebalance", "cg-join", "cg-sync"):
            self._timers.cancel((kind, group_id, member_id))

    def _remove(self, group: ConsumerGroup, member_id: str, records: list[Record]) -> None:
        group.remove_member(member_id)
        self.cancel_member_timers(group.group_id, member_id)
        records.append(encode_consumer_group_current_assignment(group.group_id, member_id, None))
        records.append(encode_consumer_group_target_member(group.group_id, member_id, None))
        records.append(encode_consumer_group_member(group.group_id, member_id, None))

    def _fence(
        self, group: ConsumerGroup, member_id: str, records: list[Record], topics: TopicsView | None
    ) -> None:
        """Remove a member (left, session expired, too slow to revoke) and bump the epoch:
        its partitions are free at once and go to the others on their next heartbeats."""
        self._remove(group, member_id, records)
        self.after_removal(group, records, topics)

    def after_removal(self, group: ConsumerGroup, records: list[Record], topics: TopicsView | None) -> None:
        """After members were removed: recompute the subscribed topics and bump the epoch."""
        if topics is not None:
            self._refresh_metadata(group, topics, records)
        else:
            kept = group.subscribed_topic_names(
                group.subscription_metadata, self.config.internal_topics
            )
            wanted = {n: v for n, v in group.subscription_metadata.items() if n in kept}
            if wanted != group.subscription_metadata:
                group.subscription_metadata = wanted
                records.append(encode_consumer_group_partition_metadata(group.group_id, wanted))
        group.group_epoch += 1
        records.append(encode_consumer_group_epoch(group.group_id, group.group_epoch))

    def _schedule_session_timeout(self, group_id: str, member_id: str,
                                  timeout_ms: int | None = None) -> None:
        # A classic member's session timeout is its JoinGroup's, not the group's.
        self._timers.schedule(
            ("cg-session", group_id, member_id),
            self._mono_ms() + (self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms),
            lambda: self._expire(group_id, member_id, None),
        )

    def _schedule_rebalance_timeout(
        self, group_id: str, member_id: str, epoch: int, timeout_ms: int
    ) -> None:
        self._timers.schedule(
            ("cg-rebalance", group_id, member_id),
            self._mono_ms() + max(timeout_ms, 0),
            lambda: self._expire(group_id, member_id, epoch),
        )

    def _expire(self, group_id: str, member_id: str, epoch: int | None) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        if epoch is not None and member.member_epoch != epoch:
            return  # it revoked in time and moved on
        records: list[Record] = []
        self._fence_or_downgrade(group, member_id, records, None)
        self._write(group_id, records)

    # ------------------------------------------------------------------ offsets, deletion

    def validate_offset_commit(
        self,
        group: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        api_version: int,
        transactional: bool = False,
    ) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: the member's epoch, not a
        generation. -1 without members is an admin or simple-consumer commit."""
        if member_epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UnknownMemberIdError.code
        if member.uses_classic_protocol:
            # A classic member commits with its generation (its member epoch), any version;
            # a wrong one is ILLEGAL_GENERATION as in a classic group (Kafka's validateMemberEpoch).
            return NONE if member_epoch == member.member_epoch else IllegalGenerationError.code
        if not transactional and api_version < 9:
            return UnsupportedVersionError.code
        if member_epoch != member.member_epoch:
            return StaleMemberEpochError.code
        return NONE

    @staticmethod
    def validate_offset_fetch(
        group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` (OffsetFetch v9+): without member
        id and epoch (admin tools, older versions) anything goes; else the member must be
        there at that epoch."""
        if member_id is None and member_epoch < 0:
            return NONE
        member = group.members.get(member_id or "")
        if member is None:
            return UnknownMemberIdError.code
        if member_epoch != member.member_epoch:
            return IllegalGenerationError.code if member.uses_classic_protocol else StaleMemberEpochError.code
        return NONE

    def delete_records(self, group: ConsumerGroup) -> list[Record]:
        """The tombstones that delete an (empty) group, and drop it from memory."""
        gid = group.group_id
        records = [
            encode_consumer_group_target_epoch(gid, None),
            encode_consumer_group_partition_metadata(gid, None),
            encode_consumer_group_epoch(gid, None),
        ]
        group.dead = True
        self.groups.pop(gid, None)
        return records

    # ------------------------------------------------------------------ loading

    def replay(self, rec: ConsumerGroupRecord) -> None:
        """Apply one consumer-group record read back from the log (log order)."""
        replay_record(self.groups, rec)

    def complete_load(self) -> None:
        """After a load: every member gets a fresh session (nobody could heartbeat while
        the partition loaded); members still revoking get their rebalance timeout again."""
        for gid, group in self.groups.items():
            for m in group.members.values():
                self._schedule_session_timeout(gid, m.member_id, m.classic_session_timeout_ms)
                if m.state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(
                        gid, m.member_id, m.member_epoch, m.rebalance_timeout_ms
                    )

    def delete_records_of(self, group: ConsumerGroup) -> list[Record]:
        """Tombstones for every record of the group, members first (Kafka's
        createGroupTombstoneRecords), for a conversion back to a classic group."""
        gid = group.group_id
        records: list[Record] = []
        for mid in group.members:
            records.append(encode_consumer_group_current_assignment(gid, mid, None))
        for mid in group.target:
            records.append(encode_consumer_group_target_member(gid, mid, None))
        records.append(encode_consumer_group_target_epoch(gid, None))
        for mid in group.members:
            records.append(encode_consumer_group_member(gid, mid, None))
        records.append(encode_consumer_group_partition_metadata(gid, None))
        records.append(encode_consumer_group_epoch(gid, None))
        return records

    def clear(self) -> None:
        for g in self.groups.values():
            g.dead = True
        self.groups.clear()
