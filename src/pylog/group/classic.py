"""One classic consumer group: its members, generation and state (Kafka's ``ClassicGroup``).

This module holds the group's data and the table of legal state transitions; it decides
nothing on its own. ``pylog.group.coordinator`` is the only caller of ``transition_to``, so
every state change of every group goes through the single ``_set_state`` below, which
refuses a transition the table does not list (that would be a coordinator bug).

States (Kafka's ``ClassicGroupState``; the names are what ListGroups/DescribeGroups show)::

    Empty ---------------> PreparingRebalance <----------------+
      ^                     |        |                          |
      +---------------------+        v                          |
                         CompletingRebalance ----> Stable ------+
    any state ------------------------------------------------> Dead

- Empty: no members (may still hold committed offsets). A join starts a rebalance.
- PreparingRebalance: joins are parked until every member has rejoined, the rebalance
  timeout passes, or (first rebalance) ``group.initial.rebalance.delay.ms`` has passed.
- CompletingRebalance: the generation is chosen; syncs are parked until the leader's
  SyncGroup brings the assignment.
- Stable: everyone has an assignment for the current generation.
- Dead: the group was deleted or its partition unloaded; it takes no requests.

Not thread-safe: a group belongs to its coordinator (one event loop or test thread).
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass

from pylog.protocol._records import GroupMetadataValue
from pylog.protocol._schema import ConsumerProtocolSubscription

from .results import JoinGroupResult, Pending, SyncGroupResult

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
# For each target state, the states it may be entered from (Kafka's validPreviousStates).
# A group reaches Stable only through a completed sync, and leaves Empty only by a join.
LEGAL_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.COMPLETING_REBALANCE, _S.STABLE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.EMPTY, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.STABLE, _S.DEAD}),
}


class IllegalStateTransitionError(RuntimeError):
    """The coordinator asked for a transition the table forbids (a bug, never a client error)."""


@dataclass(eq=False)
class Member:
    """A member of a classic group (Kafka's ``ClassicGroupMember``).

    ``protocols`` are (name, metadata) in the member's order of preference; ``join_pending``
    and ``sync_pending`` are the member's parked JoinGroup / SyncGroup, if any.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_pending: Pending[JoinGroupResult] | None = None
    sync_pending: Pending[SyncGroupResult] | None = None
    # A member added by this rebalance that has never been answered: its session timer
    # does not apply yet (it cannot heartbeat without its id), the new-member timeout does.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_pending is not None and not self.join_pending.done

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_pending is not None and not self.sync_pending.done

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise IllegalStateTransitionError(f"member {self.member_id} supports none of {sorted(candidates)}")


class ClassicGroup:
    """A classic group's state. Mutated only by ``pylog.group.coordinator``."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state: GroupState | None = None
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        # None for a "simple" group (only offset commits, no member ever joined).
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        # Insertion order matters: the first member added leads.
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # Member ids handed out with MEMBER_ID_REQUIRED (JoinGroup v4+) and not joined yet.
        self.pending_members: set[str] = set()
        # Members of the current generation that have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        # Set when a member joins during the first rebalance: extends the initial delay.
        self.new_member_added = False

    @classmethod
    def loaded(cls, group_id: str, protocol_type: str, generation_id: int, protocol_name: str | None,
               leader_id: str | None, members: list[Member], state_timestamp_ms: int) -> ClassicGroup:
        """A group rebuilt from its last GroupMetadataValue: Stable with its members, or
        Empty. This is where a loaded group starts, not a transition (Kafka's fromRecord)."""
        group = cls(group_id, state_timestamp_ms)
        group.protocol_type = protocol_type
        group.generation_id = generation_id
        group.protocol_name = protocol_name
        for m in members:
            group.members[m.member_id] = m
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.leader_id = leader_id if leader_id in group.members else next(iter(group.members), None)
        group.state = GroupState.STABLE if members else GroupState.EMPTY
        return group

    # ------------------------------------------------------------------ state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self._set_state(target, now_ms)

    def _set_state(self, target: GroupState, now_ms: int) -> None:
        # The single place a group's state changes; each change stamps the time (it is the
        # base of offset expiry for a group that became Empty).
        if self.state not in LEGAL_PREVIOUS[target]:
            raise IllegalStateTransitionError(
                f"group {self.group_id!r}: {self.state.value} -> {target.value} is not a legal transition"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in LEGAL_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------ members

    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            # Next leader: the oldest remaining member (completion may pick a rejoined one).
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id, keeping its assignment and leadership."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of any member: how long a rebalance may take."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for m in self.members.values():
            mine = {n for n, _ in m.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a joiner with these protocols may join (else INCONSISTENT_GROUP_PROTOCOL)."""
        if self.is_empty():
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's ``selectProtocol``: each member votes for its most preferred protocol among
        those all support; the most votes wins. Ties go to the protocol voted first in
        member order (Kafka leaves ties to its map's order; ours is deterministic)."""
        candidates = self.candidate_protocols()
        votes = [m.vote(candidates) for m in self.members.values()]
        counts = Counter(votes)
        best = max(counts.values())
        return next(v for v in votes if counts[v] == best)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only), or None when unknown.

        Parsed as ConsumerProtocolSubscription v0 (later versions only append fields), as
        Kafka does; an unparsable subscription makes the set unknown, which callers treat
        as "may be subscribed to anything" (offsets kept, deletes refused).
        """
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            data = m.metadata(self.protocol_name)
            try:
                # int16 version prefix, then the v0 fields (topics, user data).
                sub, _ = ConsumerProtocolSubscription.decode_from(memoryview(data)[2:], 0, 0)
            except Exception:  # noqa: BLE001 - any malformed client bytes mean "unknown"
                return None
            topics.update(sub.topics)
        return topics

    # ------------------------------------------------------------------ records

    def metadata_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka writes for this group (``assignments`` overrides the
        members' current assignments, for the leader's sync before it is applied)."""
        mm = GroupMetadataValue.MemberMetadata
        members = [
            mm(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=bytes(m.metadata(self.protocol_name)),
                assignment=bytes(assignments.get(m.member_id, b"") if assignments is not None else m.assignment),
            )
            for m in self.members.values()
        ]
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=members,
        )

