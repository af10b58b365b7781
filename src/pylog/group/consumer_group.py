"""A KIP-848 consumer group and its members: the data and the reconciliation rules.

The broker owns the assignment (``pylog.group.assignors`` computes the *target*); each member
moves towards its target in steps, and this module says what the next step is
(``reconcile``, Kafka's ``CurrentAssignmentBuilder``):

- a member first gives up what its target no longer holds: it stays at its epoch in
  ``UNREVOKED_PARTITIONS`` with those partitions *pending revocation* until a heartbeat's
  owned partitions no longer list them;
- it then moves to the target epoch and receives the target's partitions, except those
  another member still owns (assigned or pending revocation): *unreleased* partitions,
  which it gets on a later heartbeat once they are free (``UNRELEASED_PARTITIONS``);
- with nothing to revoke or wait for it is ``STABLE`` at the target epoch.

So a partition is never owned by two members at once, and members that keep their
partitions keep consuming during a rebalance (no stop-the-world).

Epochs: the *group epoch* rises on every change of membership, subscriptions or subscribed
topic metadata; the *assignment epoch* is the group epoch the target assignment was
computed at; a member's *member epoch* is the assignment epoch it has reconciled to
(0 before its first assignment, -2 a static member that left temporarily).

Group states (``ConsumerGroup.state``) follow Kafka: Empty (no members), Assigning (group
epoch ahead of the assignment epoch), Reconciling (some member not at the assignment
epoch and stable), Stable; Dead once deleted or unloaded.

Not thread-safe: owned by one coordinator.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field

from .topic_regex import compile_subscription

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "TopicPartitions",
    "reconcile",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
]

TopicPartitions = dict[uuid.UUID, set[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """A member's reconciliation state; the values are the ``State`` byte of the
    ``ConsumerGroupCurrentMemberAssignmentValue`` record (Kafka's ``MemberState``)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def copy_partitions(tp: TopicPartitions) -> TopicPartitions:
    return {t: set(p) for t, p in tp.items() if p}


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None  # None: no regex ("" is read as None)
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # Reconciliation state (the CurrentMemberAssignment record).
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    # A member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this group
    # (Kafka's ClassicMemberMetadata): its JoinGroup session timeout and protocols (name,
    # ConsumerProtocolSubscription bytes). None for a ConsumerGroupHeartbeat member.
    classic_session_timeout_ms: int | None = None
    classic_protocols: list[tuple[str, bytes]] | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    def subscription_key(self) -> tuple[object, ...]:
        """What, when it changes, bumps the group epoch (Kafka's ``hasMemberSubscriptionChanged``)."""
        return (
            tuple(sorted(self.subscribed_topic_names)),
            self.subscribed_topic_regex,
            self.server_assignor,
            self.rack_id,
        )

    def metadata_key(self) -> tuple[object, ...]:
        """Every field of the member metadata record: a change is written."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            tuple(self.subscribed_topic_names),
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic_session_timeout_ms,
            None if self.classic_protocols is None else tuple(self.classic_protocols),
        )

    def assignment_key(self) -> tuple[object, ...]:
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            _frozen(self.assigned),
            _frozen(self.pending_revocation),
        )

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == assignment_epoch


def _frozen(tp: TopicPartitions) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t, p) for t, ps in tp.items() for p in ps)


class ConsumerGroup:
    """One consumer-protocol group. The coordinator mutates it; this class keeps the
    derived indexes (static members, partition owners) consistent."""

    group_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, TopicPartitions] = {}  # member id -> target assignment
        # The subscribed topics' metadata the target was computed from (the
        # ConsumerGroupPartitionMetadata record): topic name -> (topic id, partitions).
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        # (topic id, partition) -> epoch of the member owning it (assigned or pending
        # revocation); absent = free. Kafka's currentPartitionEpoch.
        self._owners: dict[tuple[uuid.UUID, int], int] = {}
        self.dead = False

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(
        self, names: Iterable[str], internal: Set[str] = frozenset()
    ) -> set[str]:
        """The topics among ``names`` some member subscribes to: by name, or by its regex
        (whole-name match; internal topics are never matched by a regex, as in Kafka)."""
        out = {t for m in self.members.values() for t in m.subscribed_topic_names}
        patterns = {
            m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex
        }
        for regex in patterns:
            pattern = compile_subscription(regex)
            out.update(n for n in names if n not in internal and pattern.fullmatch(n))
        return out & set(names)

    def member_topics(
        self, member: ConsumerGroupMember, internal: Set[str] = frozenset()
    ) -> set[str]:
        """The topics of the subscription metadata ``member`` subscribes to."""
        known = self.subscription_metadata
        out = {t for t in member.subscribed_topic_names if t in known}
        if member.subscribed_topic_regex:
            pattern = compile_subscription(member.subscribed_topic_regex)
            out.update(n for n in known if n not in internal and pattern.fullmatch(n))
        return out

    # ------------------------------------------------------------------ members

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        mid = self.static_members.get(instance_id) if instance_id is not None else None
        return None if mid is None else self.members.get(mid)

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member (same id), keeping the partition owners in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _own(self, member: ConsumerGroupMember) -> None:
        for tp in (member.assigned, member.pending_revocation):
            for t, ps in tp.items():
                for p in ps:
                    self._owners[(t, p)] = member.member_epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in (member.assigned, member.pending_revocation):
            for t, ps in tp.items():
                for p in ps:
                    self._owners.pop((t, p), None)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, -1 if it is free."""
        return self._owners.get((topic_id, partition), -1)

    # ------------------------------------------------------------------ classic members

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.uses_classic_protocol]

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka's ``allMembersUseClassicProtocolExcept``: ``member_id`` is a consumer-protocol
        member and every other member speaks the classic protocol."""
        member = self.members.get(member_id)
        if member is None or member.uses_classic_protocol:
            return False
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid != member_id)

    def supports_classic_protocols(self, protocol_type: str, names: Set[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: a classic joiner must use the ``consumer``
        protocol type and name an assignor every classic member supports."""
        if protocol_type != "consumer":
            return False
        classic = self.classic_members()
        if not classic:
            return bool(names)
        return any(all(n in {p for p, _ in (m.classic_protocols or [])} for m in classic) for n in names)

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: some partition of the member's target
        is still owned by another member."""
        if member.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        for t, ps in self.target.get(member.member_id, {}).items():
            mine = member.assigned.get(t, set())
            if any(p not in mine and self.partition_epoch(t, p) != -1 for p in ps):
                return True
        return False


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: TopicPartitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: TopicPartitions | None,
) -> ConsumerGroupMember:
    """The member's next step towards ``target`` (Kafka's ``CurrentAssignmentBuilder``).

    Args:
        member: the member as it is (not modified).
        target_epoch, target: the group's assignment epoch and this member's target.
        partition_epoch: the group's ``partition_epoch`` (who owns what now).
        owned: the partitions the member's heartbeat says it owns, None if the heartbeat
            did not say (then pending revocations are assumed still owned).

    Returns:
        The member with its new epoch, state and partitions (a copy), or ``member``
        itself when nothing changes.
    """
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: TopicPartitions | None, partitions: TopicPartitions) -> bool:
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, ps in owned.items() for p in ps)


def _next(
    member: ConsumerGroupMember,
    epoch: int,
    target_epoch: int,
    target: TopicPartitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: TopicPartitions | None,
) -> ConsumerGroupMember:
    keep: TopicPartitions = {}
    revoke: TopicPartitions = {}
    add: TopicPartitions = {}
    unreleased = False
    for t in set(target) | set(member.assigned):
        tgt = target.get(t, set())
        cur = member.assigned.get(t, set())
        if cur & tgt:
            keep[t] = cur & tgt
        if cur - tgt:
            revoke[t] = cur - tgt
        free = {p for p in tgt - cur if partition_epoch(t, p) == -1}
        if len(free) < len(tgt - cur):
            unreleased = True
        if free:
            add[t] = free
    if revoke and _owns_any(owned, revoke):
        # Give up first; the epoch stays until the member confirms the revocation.
        return _transition(member, MemberState.UNREVOKED_PARTITIONS, epoch, keep, revoke)
    for t, ps in add.items():
        keep.setdefault(t, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _transition(member, state, target_epoch, keep, {})


def _transition(
    member: ConsumerGroupMember,
    state: MemberState,
    epoch: int,
    assigned: TopicPartitions,
    pending_revocation: TopicPartitions,
) -> ConsumerGroupMember:
    """The one place a member's reconciliation state changes: a new member object. As
    Kafka's updateMemberEpoch, the previous epoch is the one before this step, even when
    the step keeps the epoch."""
    return dataclasses.replace(
        member,
        state=state,
        member_epoch=epoch,
        previous_member_epoch=member.member_epoch,
        assigned=assigned,
        pending_revocation=pending_revocation,
    )
