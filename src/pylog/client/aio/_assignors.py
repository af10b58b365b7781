"""Partition assignors of Kafka's classic consumer protocol, and the ConsumerProtocol bytes.

The group leader turns every member's subscription into an assignment with the assignor the
coordinator selected (``JoinGroupResponse.protocol_name``). Three are built in, with the
names and results of the Java client's (``clients/.../consumer/RangeAssignor.java``,
``RoundRobinAssignor.java``, ``CooperativeStickyAssignor.java``):

- ``range``: per topic, the members subscribed to it (sorted: static members by
  ``group.instance.id`` first, then the others by member id) get consecutive ranges; the
  first ``partitions % members`` get one more. Rack-aware when members send
  ``client.rack`` and replicas have racks (KIP-881).
- ``roundrobin``: all partitions of all subscribed topics, sorted by topic then partition,
  dealt round the sorted members, skipping a member not subscribed to the topic.
- ``cooperative-sticky`` (``_sticky.py``): balanced and sticky, for the incremental
  cooperative protocol (KIP-429).

Wire formats (``ConsumerProtocol.java``): subscription = int16 version +
``ConsumerProtocolSubscription`` (topics sorted, user data, owned partitions (v1),
generation (v2), rack (v3)); assignment = int16 version + ``ConsumerProtocolAssignment``
(partitions grouped by topic in assignment order, user data). Both are written at version 3,
as the Java client does, and read at any version (a newer one as ours: versions only append).

Reproducing the Java results exactly needs two Java details where ties are broken: string
order is UTF-16 code-unit order (``java_key``), and where the Java code iterates a
``HashMap``/``HashSet`` the order is bucket order (``java_hash_order``), which follows from
``String.hashCode``/``TopicPartition.hashCode`` and the table size.

Thread-safety: assignors are used by one coordinator on one loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pylog.client.config import ConfigError
from pylog.client.records import TopicPartition
from pylog.protocol._schema import ConsumerProtocolAssignment, ConsumerProtocolSubscription

__all__ = ["EAGER", "COOPERATIVE", "MemberSubscription", "PartitionAssignor", "RangeAssignor",
           "RoundRobinAssignor", "PartitionRacks", "assignors_for", "rebalance_protocol",
           "encode_subscription", "decode_subscription", "encode_assignment",
           "decode_assignment", "java_key", "java_string_hash", "java_hash_order",
           "hashmap_capacity", "use_rack_aware"]

EAGER = "eager"
COOPERATIVE = "cooperative"
_PROTOCOL_RANK = {EAGER: 0, COOPERATIVE: 1}  # Java's RebalanceProtocol ids
PROTOCOL_VERSION = 3

# Per topic, per partition (index = partition id): the racks of its replicas.
PartitionRacks = dict[str, list[frozenset[str]]]

T = TypeVar("T")


# ----------------------------------------------------------------------------- Java order


def java_key(s: str) -> bytes:
    """A sort key giving Java's ``String.compareTo`` order (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (31 * h + UTF-16 unit, int32 wrap), as an unsigned int."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def tp_hash(tp: TopicPartition) -> int:
    """Java's ``TopicPartition.hashCode``: 31 * (31 + partition) + topic.hashCode()."""
    return (31 * (31 + tp.partition) + java_string_hash(tp.topic)) & 0xFFFFFFFF


def hashmap_capacity(size: int) -> int:
    """Table size of a default ``HashMap``/``HashSet`` after ``size`` insertions (16, doubled
    whenever the size passes three quarters of it)."""
    cap = 16
    while size > cap * 3 // 4:
        cap *= 2
    return cap


def java_hash_order(items: Sequence[T], hashes: Sequence[int], capacity: int) -> list[T]:
    """The iteration order of a Java ``HashMap`` holding ``items`` (in insertion order).

    Entries sit in bucket ``spread(hash) & (capacity - 1)``, with ``spread(h) = h ^ (h >>>
    16)``; a bucket keeps insertion order (resizing splits buckets without reordering them).
    Buckets turned into trees (8+ colliding keys in a 64+ table) are not modelled.
    """
    mask = capacity - 1
    keyed = [((h ^ (h >> 16)) & mask, i) for i, h in enumerate(hashes)]
    keyed.sort()
    return [items[i] for _, i in keyed]


def member_order(member_ids: Sequence[str]) -> list[str]:
    """Iteration order of the leader's ``Map<memberId, Subscription>`` (a default HashMap
    filled in JoinGroup response order)."""
    return java_hash_order(member_ids, [java_string_hash(m) for m in member_ids],
                           hashmap_capacity(len(member_ids)))


def use_rack_aware(consumer_racks: set[str], partition_racks: set[str],
                   racks_per_partition: Iterable[frozenset[str] | set[str]]) -> bool:
    """Kafka's ``useRackAwareAssignment``: members and replicas share a rack, and not every
    partition has replicas on every rack (then racks change nothing)."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    return not all(r == partition_racks for r in racks_per_partition)


# ----------------------------------------------------------------------------- subscriptions


class MemberSubscription:
    """One member's subscription as the leader reads it (Java's ``Subscription``).

    ``generation_id`` is None when the member sent none (subscription v0-1 or -1).
    """

    __slots__ = ("member_id", "group_instance_id", "topics", "user_data", "owned_partitions",
                 "generation_id", "rack_id")

    def __init__(self, member_id: str, topics: list[str], *, user_data: bytes | None = None,
                 owned_partitions: list[TopicPartition] | None = None,
                 generation_id: int | None = None, rack_id: str | None = None,
                 group_instance_id: str | None = None) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.topics = topics
        self.user_data = user_data
        self.owned_partitions = owned_partitions or []
        self.generation_id = generation_id if generation_id is not None and generation_id >= 0 else None
        self.rack_id = rack_id or None

    def __repr__(self) -> str:
        return (f"MemberSubscription({self.member_id!r}, {self.topics!r}, owned="
                f"{self.owned_partitions!r}, generation={self.generation_id})")

    def sort_key(self) -> tuple[int, bytes]:
        """Kafka's ``MemberInfo`` order: static members (by instance id) before dynamic ones
        (by member id)."""
        if self.group_instance_id is not None:
            return (0, java_key(self.group_instance_id))
        return (1, java_key(self.member_id))


def encode_subscription(topics: Iterable[str], user_data: bytes | None,
                        owned: Iterable[TopicPartition], generation_id: int,
                        rack_id: str | None) -> bytes:
    """JoinGroup protocol metadata: int16 version 3 + ConsumerProtocolSubscription v3."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(owned, key=lambda tp: (java_key(tp.topic), tp.partition)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    S = ConsumerProtocolSubscription
    sub = S(topics=sorted(topics, key=java_key), user_data=user_data,
            owned_partitions=[S.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()],
            generation_id=generation_id, rack_id=rack_id)
    return struct.pack(">h", PROTOCOL_VERSION) + sub.encode(PROTOCOL_VERSION)


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise ValueError(f"{what} of {len(data)} bytes has no version")
    (version,) = struct.unpack_from(">h", data)
    if version < 0:
        raise ValueError(f"{what} has version {version}")
    return min(version, PROTOCOL_VERSION)


def decode_subscription(member_id: str, group_instance_id: str | None,
                        data: bytes) -> MemberSubscription:
    """A member's JoinGroup metadata, read at its version (newer ones as ours).

    Raises:
        ValueError / RemoteProtocolError: the bytes are not a subscription.
    """
    version = _version(data, "subscription")
    sub, _ = ConsumerProtocolSubscription.decode_from(memoryview(data)[2:], 0, version)
    owned = [TopicPartition(t.topic, p) for t in sub.owned_partitions for p in t.partitions]
    return MemberSubscription(member_id, list(sub.topics), user_data=sub.user_data,
                              owned_partitions=owned, generation_id=sub.generation_id,
                              rack_id=sub.rack_id, group_instance_id=group_instance_id)


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None) -> bytes:
    """SyncGroup assignment: int16 version 3 + ConsumerProtocolAssignment (partitions
    grouped by topic in the order met)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    A = ConsumerProtocolAssignment
    a = A(assigned_partitions=[A.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()],
          user_data=user_data)
    return struct.pack(">h", PROTOCOL_VERSION) + a.encode(PROTOCOL_VERSION)


def decode_assignment(data: bytes) -> tuple[list[TopicPartition], bytes | None]:
    """The partitions and user data of a SyncGroup assignment.

    Raises:
        ValueError / RemoteProtocolError: the bytes are not an assignment.
    """
    version = _version(data, "assignment")
    a, _ = ConsumerProtocolAssignment.decode_from(memoryview(data)[2:], 0, version)
    return [TopicPartition(t.topic, p) for t in a.assigned_partitions for p in t.partitions], a.user_data


# ----------------------------------------------------------------------------- assignors


class PartitionAssignor:
    """Base of the built-in assignors (Java's ``ConsumerPartitionAssignor``)."""

    name = ""
    protocols: tuple[str, ...] = (EAGER,)

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """User data sent in this member's subscription."""
        return None

    def on_assignment(self, partitions: list[TopicPartition], generation_id: int) -> None:
        """Told of this member's assignment after each rebalance."""

    def assign(self, partitions: PartitionRacks,
               members: list[MemberSubscription]) -> dict[str, list[TopicPartition]]:
        """Each member's partitions.

        Args:
            partitions: the subscribed topics the leader has metadata for, each as a list
                (index = partition id) of replica racks.
            members: the subscriptions in JoinGroup response order.
        """
        raise NotImplementedError


class _TopicState:
    """Kafka's RangeAssignor ``TopicAssignmentState``: one topic being dealt out."""

    def __init__(self, topic: str, racks: list[frozenset[str]], members: list[MemberSubscription],
                 consumer_racks: dict[str, str]) -> None:
        self.topic = topic
        members = sorted(members, key=MemberSubscription.sort_key)
        self.consumers = [m.member_id for m in members]
        self.rack_of = {c: consumer_racks.get(c) for c in self.consumers}
        self.unassigned = [TopicPartition(topic, p) for p in range(len(racks))]
        self.count = dict.fromkeys(self.consumers, 0)
        n = len(self.consumers)
        self.per_consumer = len(racks) // n if n else 0
        self.with_extra = len(racks) % n if n else 0
        all_consumer_racks = {consumer_racks[c] for c in self.consumers if c in consumer_racks}
        self.partition_racks: dict[TopicPartition, frozenset[str]] = {}
        all_partition_racks: set[str] = set()
        if all_consumer_racks:
            for p, r in enumerate(racks):
                self.partition_racks[TopicPartition(topic, p)] = r
                all_partition_racks |= r
        self.needs_rack_aware = use_rack_aware(all_consumer_racks, all_partition_racks,
                                               self.partition_racks.values())

    def racks_match(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.rack_of[consumer]
        return rack is None or rack in self.partition_racks.get(tp, ())

    def max_assignable(self, consumer: str) -> int:
        return max(0, self.per_consumer + (1 if self.with_extra > 0 else 0) - self.count[consumer])

    def on_assigned(self, consumer: str, tps: list[TopicPartition]) -> None:
        self.count[consumer] += len(tps)
        if self.count[consumer] > self.per_consumer:
            self.with_extra -= 1
        taken = set(tps)
        self.unassigned = [tp for tp in self.unassigned if tp not in taken]


class RangeAssignor(PartitionAssignor):
    """Kafka's ``range`` assignor (the Java client's first default)."""

    name = "range"

    def assign(self, partitions: PartitionRacks,
               members: list[MemberSubscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        consumer_racks = {m.member_id: m.rack_id for m in members if m.rack_id}
        states = []
        for topic, racks in partitions.items():
            if racks:
                subscribed = [m for m in members if topic in m.topics]
                states.append(_TopicState(topic, racks, subscribed, consumer_racks))
        rack_aware = any(s.needs_rack_aware for s in states)
        if rack_aware:
            self._assign_with_rack_matching(states, out)
        for s in states:
            self._assign_ranges(s, lambda c, tp: True, out)
        if rack_aware:
            for tps in out.values():
                tps.sort(key=lambda tp: (java_key(tp.topic), tp.partition))
        return out

    @staticmethod
    def _give(consumer: str, tps: list[TopicPartition], state: _TopicState,
              out: dict[str, list[TopicPartition]]) -> None:
        out[consumer].extend(tps)
        state.on_assigned(consumer, tps)

    def _assign_ranges(self, state: _TopicState, may_assign: Any,
                       out: dict[str, list[TopicPartition]]) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            limit = state.max_assignable(consumer)
            tps = [tp for tp in state.unassigned if may_assign(consumer, tp)][:limit]
            if tps:
                self._give(consumer, tps, state, out)

    def _assign_with_rack_matching(self, states: list[_TopicState],
                                   out: dict[str, list[TopicPartition]]) -> None:
        # Topics with the same members and partition count are co-partitioned: partition p of
        # each goes to the same member where racks allow (joins on keys stay local).
        # Grouped by member set, then by the number of partitions with known racks (all of
        # them when a member has a rack, else none), as Kafka groups them.
        groups: dict[tuple[Any, int], list[_TopicState]] = {}
        for s in states:
            members = tuple(sorted(s.rack_of.items(), key=lambda kv: java_key(kv[0])))
            groups.setdefault((members, len(s.partition_racks)), []).append(s)
        for (_, num_partitions), group in groups.items():
            if len(group) > 1:
                self._co_partitioned(group[0].consumers, num_partitions, group, out)
            elif group[0].needs_rack_aware:
                self._assign_ranges(group[0], group[0].racks_match, out)

    def _co_partitioned(self, consumers: list[str], num_partitions: int,
                        group: list[_TopicState], out: dict[str, list[TopicPartition]]) -> None:
        remaining = list(consumers)
        for p in range(num_partitions):
            match = next((c for c in remaining
                          if all(s.racks_match(c, TopicPartition(s.topic, p)) and s.max_assignable(c) > 0
                                 for s in group)), None)
            if match is None:
                continue
            for s in group:
                self._give(match, [TopicPartition(s.topic, p)], s, out)
            if not any(s.max_assignable(match) > 0 for s in group):
                remaining.remove(match)
                if not remaining:
                    break


class RoundRobinAssignor(PartitionAssignor):
    """Kafka's ``roundrobin`` assignor."""

    name = "roundrobin"

    def assign(self, partitions: PartitionRacks,
               members: list[MemberSubscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        ring = sorted(members, key=MemberSubscription.sort_key)
        topics = sorted({t for m in members for t in m.topics}, key=java_key)
        i = 0
        for topic in topics:
            racks = partitions.get(topic)
            if racks is None:
                continue
            for p in range(len(racks)):
                while topic not in ring[i % len(ring)].topics:
                    i += 1
                out[ring[i % len(ring)].member_id].append(TopicPartition(topic, p))
                i += 1
        return out


# ----------------------------------------------------------------------------- names

def assignors_for(names: Sequence[str]) -> list[PartitionAssignor]:
    """Fresh assignor objects for ``partition.assignment.strategy`` (in preference order)."""
    from pylog.client.aio._sticky import CooperativeStickyAssignor

    table: dict[str, type[PartitionAssignor]] = {
        "range": RangeAssignor, "roundrobin": RoundRobinAssignor,
        "cooperative-sticky": CooperativeStickyAssignor}
    return [table[n]() for n in names]


def rebalance_protocol(assignors: Sequence[PartitionAssignor]) -> str:
    """The rebalance protocol every assignor supports, the most advanced if several
    (Kafka's ``ConsumerCoordinator`` rule): ``range`` + ``cooperative-sticky`` is eager.

    Raises:
        ConfigError: the assignors share no protocol.
    """
    common = set(assignors[0].protocols)
    for a in assignors[1:]:
        common &= set(a.protocols)
    if not common:
        raise ConfigError("partition.assignment.strategy: the assignors support no common "
                          "rebalance protocol")
    return max(common, key=_PROTOCOL_RANK.__getitem__)
