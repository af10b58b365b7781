"""Online migration between the classic and the consumer (KIP-848) group protocols.

Kafka 4's rules (``GroupMetadataManager``: ``validateOnlineUpgrade``, ``convertToConsumerGroup``,
``validateOnlineDowngradeWithFencedMember``, ``validateOnlineDowngradeWithReplacedMemberId``,
``convertToClassicGroup``), under the broker
setting ``group.consumer.migration.policy`` (``MigrationPolicy``; Kafka's default
``bidirectional``):

- **Upgrade.** A ConsumerGroupHeartbeat joining a non-empty classic group converts it to a
  consumer group when the policy allows upgrades, the group's protocol type is
  ``consumer`` and it has at most ``group.consumer.max.size`` members. Each classic member
  becomes a member of the consumer group at the group epoch = the classic generation, with
  its subscription (ConsumerProtocolSubscription of the selected protocol) and its current
  assignment (ConsumerProtocolAssignment) as both its assignment and its target; it keeps
  speaking the classic protocol (``pylog.group.classic_members``). Parked joins and syncs
  are answered REBALANCE_IN_PROGRESS. Otherwise the heartbeat gets GROUP_ID_NOT_FOUND.
- **Downgrade.** When the last consumer-protocol member leaves (or is fenced) and every
  other member speaks the classic protocol, the policy allows downgrades and there are at
  most ``group.max.size`` of them, the group becomes a classic group: Stable at generation
  = the group epoch, each member with its target assignment, protocol chosen by vote, and a
  rebalance starts at once (the members rejoin with JoinGroup).
- **Downgrade by replacement.** When a classic static member joins with a new member id
  and takes the place of the last consumer-protocol member (same ``group.instance.id``),
  the policy allows downgrades and the group has at most ``group.max.size`` members, the
  group becomes a classic group the same way, the joiner in place of the replaced member
  with its target partitions, but it stays Stable (the joiner just syncs, nobody rejoins).
- Empty groups are replaced whatever the policy (``ConsumerGroups._group`` and
  ``GroupCoordinator.join_group``).

Each conversion writes the new type's records after tombstones for the old type's, so a
coordinator that reloads the partition rebuilds the converted group.

Not thread-safe: called from the coordinator's thread only.
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pylog.errors import GroupIdNotFoundError, RebalanceInProgressError
from pylog.protocol._schema import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState, Member
from .consumer_coordinator import HeartbeatError
from .consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState, TopicPartitions
from .records import (
    encode_consumer_group_current_assignment,
    encode_consumer_group_epoch,
    encode_consumer_group_member,
    encode_consumer_group_target_epoch,
    encode_consumer_group_target_member,
    encode_group_metadata,
)
from .results import JoinGroupResult, SyncGroupResult

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

__all__ = ["MigrationPolicy", "Migration", "decode_subscription", "encode_assignment"]

Record = tuple[bytes, bytes | None]
_I16 = struct.Struct(">h")


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (Kafka's ``ConsumerGroupMigrationPolicy``)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @classmethod
    def parse(cls, name: str) -> MigrationPolicy:
        try:
            return cls(name.strip().lower())
        except ValueError:
            raise ValueError(f"group.consumer.migration.policy: {name!r} is not one of "
                             f"{', '.join(p.value for p in cls)}") from None

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


# --------------------------------------------------------------------------- ConsumerProtocol bytes


def _version(data: bytes) -> int:
    if len(data) < 2:
        raise ValueError(f"embedded consumer protocol of {len(data)} bytes has no version")
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        raise ValueError(f"embedded consumer protocol version {version}")
    return int(version)


def decode_subscription(data: bytes) -> Any:
    """A ConsumerProtocolSubscription (an int16 version, then the message). Versions above
    the highest known one are read as it, as Kafka does (later versions only append).

    Raises:
        ValueError: the bytes are not a subscription.
    """
    data = bytes(data)
    version = min(_version(data), ConsumerProtocolSubscription.VALID_VERSIONS[1])
    try:
        sub, _ = ConsumerProtocolSubscription.decode_from(memoryview(data)[2:], 0, version)
    except Exception as exc:  # noqa: BLE001 - any decoding failure of client bytes
        raise ValueError(f"malformed ConsumerProtocolSubscription: {exc}") from None
    return sub


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """Partitions by topic name of a ConsumerProtocolAssignment (empty bytes: none).

    Raises:
        ValueError: the bytes are not an assignment.
    """
    data = bytes(data)
    if not data:
        return {}
    version = min(_version(data), ConsumerProtocolAssignment.VALID_VERSIONS[1])
    try:
        a, _ = ConsumerProtocolAssignment.decode_from(memoryview(data)[2:], 0, version)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"malformed ConsumerProtocolAssignment: {exc}") from None
    out: dict[str, set[int]] = {}
    for tp in a.assigned_partitions:
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return out


def encode_assignment(partitions: Mapping[str, set[int]], subscription: bytes) -> bytes:
    """A ConsumerProtocolAssignment, in the version of the member's subscription bytes
    (capped at the highest known one), as Kafka's ``prepareAssignment`` does."""
    try:
        version = _version(bytes(subscription))
    except ValueError:
        version = 0
    version = min(version, ConsumerProtocolAssignment.VALID_VERSIONS[1])
    tp = ConsumerProtocolAssignment.TopicPartition
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[tp(topic=t, partitions=sorted(ps)) for t, ps in sorted(partitions.items()) if ps],
        user_data=None)
    return _I16.pack(version) + msg.encode(version)


def ids_to_names(partitions: TopicPartitions, names: Mapping[uuid.UUID, str]) -> dict[str, set[int]]:
    """Topic ids to names (partitions of topics no longer known are left out)."""
    return {names[t]: set(ps) for t, ps in partitions.items() if t in names and ps}


def names_to_ids(partitions: Mapping[str, Any], topics: Mapping[str, tuple[uuid.UUID, int]]) -> TopicPartitions:
    return {topics[t][0]: set(ps) for t, ps in partitions.items() if t in topics and ps}


# --------------------------------------------------------------------------- conversions


class Migration:
    """The conversions, with access to the coordinator's classic side and its consumer
    groups. See the module docstring."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._c = coordinator

    @property
    def policy(self) -> MigrationPolicy:
        return MigrationPolicy.parse(self._c.config.consumer_migration_policy)

    # ------------------------------------------------------------------ upgrade

    def upgrade(self, classic: ClassicGroup, topics: Mapping[str, tuple[uuid.UUID, int]],
                records: list[Record]) -> ConsumerGroup | None:
        """Convert ``classic`` (non-empty) to a consumer group, or None when the policy or
        the group does not allow it (the caller refuses the heartbeat).

        Raises:
            HeartbeatError: GROUP_ID_NOT_FOUND, a member's embedded protocol is malformed.
        """
        c = self._c
        if (not self.policy.upgrade_enabled or classic.protocol_type != CONSUMER_PROTOCOL_TYPE
                or len(classic.members) > c.config.consumer_max_size or classic.is_in(GroupState.DEAD)):
            return None
        gid = classic.group_id
        generation = classic.generation_id
        group = ConsumerGroup(gid)
        group.group_epoch = group.assignment_epoch = generation
        members: list[ConsumerGroupMember] = []
        for cm in classic.members.values():
            # The selected protocol's metadata (a group still in its first rebalance has
            # none selected: the member's preferred one).
            name = classic.protocol_name or (cm.protocols[0][0] if cm.protocols else "")
            try:
                sub = decode_subscription(cm.metadata(name))
                assigned = names_to_ids(decode_assignment(cm.assignment), topics)
            except ValueError:
                raise HeartbeatError(
                    GroupIdNotFoundError.code,
                    f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                    "consumer protocol is malformed.") from None
            members.append(ConsumerGroupMember(
                cm.member_id, instance_id=cm.group_instance_id, rack_id=getattr(sub, "rack_id", None),
                client_id=cm.client_id, client_host=cm.client_host, subscribed_topic_names=list(sub.topics),
                rebalance_timeout_ms=cm.rebalance_timeout_ms, member_epoch=generation,
                previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
                classic_session_timeout_ms=cm.session_timeout_ms, classic_protocols=list(cm.protocols)))
        # From here on the conversion happens: the classic group's parked requests are told
        # to rejoin (they rejoin the consumer group) and its timers stop.
        self._retire_classic(classic)
        for member in members:
            group.put_member(member)
            group.target[member.member_id] = {t: set(ps) for t, ps in member.assigned.items()}
        records.append(encode_group_metadata(gid, None))
        records.extend(encode_consumer_group_member(gid, m.member_id, m) for m in members)
        records.append(encode_consumer_group_epoch(gid, group.group_epoch))
        records.extend(encode_consumer_group_target_member(gid, m.member_id, group.target[m.member_id])
                       for m in members)
        records.append(encode_consumer_group_target_epoch(gid, group.assignment_epoch))
        records.extend(encode_consumer_group_current_assignment(gid, m.member_id, m) for m in members)
        c.consumer.groups[gid] = group
        for m in members:
            c.consumer._schedule_session_timeout(gid, m.member_id, m.classic_session_timeout_ms)
        return group

    def _retire_classic(self, classic: ClassicGroup) -> None:
        c = self._c
        gid = classic.group_id
        for m in classic.members.values():
            if m.join_pending is not None and not m.join_pending.done:
                m.join_pending._complete(JoinGroupResult(RebalanceInProgressError.code, member_id=m.member_id))
            if m.sync_pending is not None and not m.sync_pending.done:
                m.sync_pending._complete(SyncGroupResult(RebalanceInProgressError.code))
            m.join_pending = m.sync_pending = None
            c._timers.cancel(("heartbeat", gid, m.member_id))
        for mid in classic.pending_members:
            c._timers.cancel(("heartbeat", gid, mid))
        c._timers.cancel(("join", gid))
        c._timers.cancel(("sync", gid))
        classic.transition_to(GroupState.DEAD, c._wall_ms())
        c._groups.pop(gid, None)

    # ------------------------------------------------------------------ downgrade

    def maybe_downgrade(self, group: ConsumerGroup, leaving: str, records: list[Record]) -> bool:
        """Convert ``group`` to a classic group without ``leaving`` if it is the last
        consumer-protocol member (Kafka's ``validateOnlineDowngradeWithFencedMember``; see
        the module docstring); True when converted, with the conversion's records appended.
        The classic group rebalances at once."""
        if not group.all_classic_except(leaving) or len(group.members) <= 1:
            return False
        if not self.policy.downgrade_enabled or len(group.members) - 1 > self._c.config.max_size:
            return False
        classic = self._downgrade(group, leaving, records)
        # Kafka: a downgrade after a member left starts a rebalance at once.
        self._c._prepare_rebalance(classic)
        return True

    def maybe_downgrade_on_replacement(self, group: ConsumerGroup, joining: str,
                                       records: list[Record]) -> ClassicGroup | None:
        """After the classic static member ``joining`` took the place of the member that held
        its group.instance.id (already swapped in ``group``): if that was the last
        consumer-protocol member, convert ``group`` to a classic group that keeps every
        member, ``joining`` with the target partitions it inherited (Kafka's
        ``validateOnlineDowngradeWithReplacedMemberId``). The classic group stays Stable: no
        rebalance. The classic group when converted, else None."""
        if not all(m.uses_classic_protocol for m in group.members.values()) or joining not in group.members:
            return None
        if not self.policy.downgrade_enabled or len(group.members) > self._c.config.max_size:
            return None
        return self._downgrade(group, None, records)

    def _downgrade(self, group: ConsumerGroup, leaving: str | None, records: list[Record]) -> ClassicGroup:
        """The conversion itself: a Stable classic group at generation = the group epoch with
        every member but ``leaving``, each assigned its target; the records (tombstones for
        every consumer-group record, then the GroupMetadataValue) appended to ``records``,
        which the caller writes through the coordinator like any group records."""
        c = self._c
        gid = group.group_id
        names = {tid: name for name, (tid, _n) in group.subscription_metadata.items()}
        now = c._wall_ms()
        members = []
        for m in group.members.values():
            if m.member_id == leaving:
                continue
            members.append(Member(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.classic_session_timeout_ms or c.config.min_session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                list(m.classic_protocols or [])))
        classic = ClassicGroup.loaded(gid, CONSUMER_PROTOCOL_TYPE, group.group_epoch, None, None, members, now)
        classic.protocol_name = classic.select_protocol()
        for km in classic.members.values():
            target = ids_to_names(group.target.get(km.member_id, {}), names)
            km.assignment = encode_assignment(target, km.metadata(classic.protocol_name))
        records.extend(c.consumer.delete_records_of(group))
        records.append(encode_group_metadata(gid, classic.metadata_value()))
        for mid in group.members:
            c.consumer.cancel_member_timers(gid, mid)
        group.dead = True
        c.consumer.groups.pop(gid, None)
        c._groups[gid] = classic
        for km in classic.members.values():
            c._session_timer(classic, km)
        return classic
