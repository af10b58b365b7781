"""Kafka's ``cooperative-sticky`` assignor: balanced, sticky, incremental (KIP-429).

The algorithm of the Java client's ``AbstractStickyAssignor`` and
``CooperativeStickyAssignor`` (``clients/.../consumer/internals/AbstractStickyAssignor.java``),
rewritten here from its description, giving the same assignments for the same input:

1. Ownership: each member's owned partitions (subscription v1+) count if their topic is still
   assigned. Two members claiming one partition: the higher generation (v2+ field, else the
   int32 in the user data) keeps it; the same generation: neither keeps it.
2. When every member subscribes to the same topics (the usual case), the *constrained*
   builder: with ``min = partitions // members`` and ``max = ceil(partitions / members)``,
   members keep up to ``min`` (or ``max``, while fewer than ``partitions % members`` members
   have more than ``min``) of what they own, sorted by partition then topic; the rest is
   dealt round-robin over the sorted members below ``min``, then to members at ``min``.
3. Otherwise the *general* builder: keep valid ownership, give each unassigned partition
   (topics with fewest candidates first) to the least loaded candidate, then move
   partitions from members with 2+ more than a candidate until balanced, preferring to move
   a partition back to the member that had it in an older generation, and keeping the
   result only if it is more balanced.
4. Cooperative adjustment: a partition moving from one member to another is left out of
   this round's assignment; its owner revokes it, rejoins, and the next round gives it to
   the new member.

Rack awareness (KIP-881) is part of both builders: when members send ``client.rack`` and
replicas have racks, owned partitions on another rack are given up and new ones are dealt to
members on a replica's rack first.

Where the Java code iterates a hash map or set, the same order is used
(``_assignors.java_hash_order``, ``_JavaHashSet``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from pylog.client.aio._assignors import (
    COOPERATIVE,
    EAGER,
    MemberSubscription,
    PartitionAssignor,
    PartitionRacks,
    hashmap_capacity,
    java_hash_order,
    java_key,
    member_order,
    tp_hash,
    use_rack_aware,
)
from pylog.client.records import TopicPartition
from pylog.errors import KafkaError

__all__ = ["CooperativeStickyAssignor"]

DEFAULT_GENERATION = -1


class StickyAssignmentError(KafkaError):
    """The sticky algorithm reached a state it should not (Kafka throws
    IllegalStateException there): a bug, never expected."""


def _tp_key(tp: TopicPartition) -> tuple[bytes, int]:
    return java_key(tp.topic), tp.partition


class _JavaHashSet:
    """A set iterated in ``java.util.HashSet`` order (bucket, then insertion)."""

    def __init__(self) -> None:
        self.items: list[TopicPartition] = []
        self.capacity = 16

    def add(self, tp: TopicPartition) -> None:
        if tp not in self.items:
            self.items.append(tp)
            self.capacity = max(self.capacity, hashmap_capacity(len(self.items)))

    def remove(self, tp: TopicPartition) -> None:
        self.items.remove(tp)

    def first(self) -> TopicPartition:
        return java_hash_order(self.items, [tp_hash(t) for t in self.items], self.capacity)[0]


class _Owner(NamedTuple):
    consumer: str
    generation: int


class _RackInfo:
    """Which rack each member is on and where each partition's replicas are."""

    def __init__(self, partitions: PartitionRacks, members: list[MemberSubscription]) -> None:
        by_rack: dict[str, list[str]] = {}
        for m in members:
            if m.rack_id:
                by_rack.setdefault(m.rack_id, []).append(m.member_id)
        partition_racks: dict[TopicPartition, frozenset[str]] = {}
        all_racks: set[str] = set()
        if by_rack:
            for topic, racks in partitions.items():
                for p, r in enumerate(racks):
                    partition_racks[TopicPartition(topic, p)] = r
                    all_racks |= r
        if use_rack_aware(set(by_rack), all_racks, partition_racks.values()):
            self.consumer_racks = {c: rack for rack, cs in by_rack.items() for c in cs}
            self.partition_racks = partition_racks
        else:
            self.consumer_racks = {}
            self.partition_racks = {}
        self.consumers_by_partition = {
            tp: sum(len(by_rack.get(r, ())) for r in racks) for tp, racks in partition_racks.items()}

    def mismatch(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return False
        replicas = self.partition_racks.get(tp)
        return replicas is None or rack not in replicas

    def sort_by_rack_consumers(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        if not self.consumers_by_partition:
            return tps
        return sorted(tps, key=lambda tp: self.consumers_by_partition.get(tp, 0))

    def next_rack_consumer(self, tp: TopicPartition, consumers: list[str], first: int) -> int:
        racks = self.partition_racks.get(tp)
        if not racks:
            return -1
        for i in range(len(consumers)):
            index = (first + i) % len(consumers)
            rack = self.consumer_racks.get(consumers[index])
            if rack is not None and rack in racks:
                return index
        return -1


class CooperativeStickyAssignor(PartitionAssignor):
    """Kafka's ``cooperative-sticky`` assignor (the Java client's second default)."""

    name = "cooperative-sticky"
    protocols = (COOPERATIVE, EAGER)

    def __init__(self) -> None:
        self.generation = DEFAULT_GENERATION  # the group generation this member last joined
        # Never reset between rebalances, as in Kafka: the highest generation seen.
        self.max_generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        # COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0: the generation, for members reading
        # subscriptions below v2.
        return struct.pack(">i", self.generation)

    def on_assignment(self, partitions: list[TopicPartition], generation_id: int) -> None:
        self.generation = generation_id

    @staticmethod
    def member_generation(sub: MemberSubscription) -> int | None:
        if sub.generation_id is not None:
            return sub.generation_id
        if sub.user_data is None:
            return None
        if len(sub.user_data) < 4:
            return DEFAULT_GENERATION
        return int(struct.unpack_from(">i", sub.user_data)[0])

    # ------------------------------------------------------------------ entry point

    def assign(self, partitions: PartitionRacks,
               members: list[MemberSubscription]) -> dict[str, list[TopicPartition]]:
        by_id = {m.member_id: m for m in members}
        ordered = [by_id[m] for m in member_order([m.member_id for m in members])]
        rack = _RackInfo(partitions, ordered)
        counts = {t: len(r) for t, r in partitions.items()}
        owned: dict[str, list[TopicPartition]] = {}
        multi_owned: set[TopicPartition] = set()
        if self._all_subscriptions_equal(set(counts), ordered, owned, multi_owned):
            assignment, transferring = _constrained(counts, rack, owned, multi_owned)
        else:
            general = _General(counts, rack, owned, ordered, self)
            assignment = general.build()
            transferring = _transferring(by_id, assignment)
        for tp, consumer in transferring.items():
            assignment[consumer].remove(tp)
        return assignment

    def _all_subscriptions_equal(self, all_topics: set[str], members: list[MemberSubscription],
                                 owned: dict[str, list[TopicPartition]],
                                 multi_owned: set[TopicPartition]) -> bool:
        equal = True
        topics: set[str] = set()
        owner_of: dict[TopicPartition, str] = {}
        by_id = {m.member_id: m for m in members}
        for m in members:
            if not topics:
                topics.update(m.topics)
            elif equal and not (len(m.topics) == len(topics) and topics.issuperset(m.topics)):
                equal = False
            gen = self.member_generation(m)
            generation = DEFAULT_GENERATION if gen is None else gen
            self.max_generation = max(self.max_generation, generation)
            mine: list[TopicPartition] = []
            owned[m.member_id] = mine
            for tp in m.owned_partitions:
                if tp.topic not in all_topics:
                    continue
                other = owner_of.get(tp)
                if other is None:
                    mine.append(tp)
                    owner_of[tp] = m.member_id
                    continue
                other_gen = by_id[other].generation_id
                other_generation = DEFAULT_GENERATION if other_gen is None else other_gen
                if generation == other_generation:
                    # Claimed twice in one generation: neither keeps it.
                    multi_owned.add(tp)
                    _remove_first(owned[other], tp)
                    owner_of[tp] = m.member_id
                elif generation > other_generation:
                    mine.append(tp)
                    _remove_first(owned[other], tp)
                    owner_of[tp] = m.member_id
        return equal


def _remove_first(items: list[TopicPartition], tp: TopicPartition) -> None:
    if tp in items:
        items.remove(tp)


def _transferring(subs: dict[str, MemberSubscription],
                  assignment: dict[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    """Partitions assigned to a member that another member still owns (to be revoked
    first)."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for consumer, assigned in assignment.items():
        owned = subs[consumer].owned_partitions
        owned_set = set(owned)
        for tp in assigned:
            if tp not in owned_set:
                added[tp] = consumer
        assigned_set = set(assigned)
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: c for tp, c in added.items() if tp in revoked}


def _unassigned(counts: dict[str, int], sorted_topics: list[str], assigned: list[TopicPartition],
                key: Callable[[TopicPartition], Any]) -> list[TopicPartition]:
    """All partitions of ``sorted_topics`` in order, minus ``assigned`` (Kafka's two-pointer
    walk over both sorted lists)."""
    everything = [TopicPartition(t, p) for t in sorted_topics for p in range(counts[t])]
    if not assigned:
        return everything
    assigned.sort(key=key)
    out = []
    i = 0
    done = False
    for tp in everything:
        if done or tp != assigned[i]:
            out.append(tp)
        elif i + 1 < len(assigned):
            i += 1
        else:
            done = True
    return out


# ----------------------------------------------------------------------------- constrained


def _constrained(counts: dict[str, int], rack: _RackInfo, owned: dict[str, list[TopicPartition]],
                 multi_owned: set[TopicPartition]
                 ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """Every member subscribes to the same topics: fill to min/max quotas."""
    total = sum(counts.values())
    n = len(owned)
    min_q, max_q = total // n, -(-total // n)
    expected_over = total % n
    over = 0
    assignment: dict[str, list[TopicPartition]] = {c: [] for c in owned}
    assigned: list[TopicPartition] = []
    maybe_revoked: dict[TopicPartition, str] = {}
    transferring: dict[TopicPartition, str] = {}
    under: list[str] = []  # below min quota
    exactly: list[str] = []  # at min quota, may take one more

    for consumer, mine in owned.items():
        keep = []
        for tp in mine:
            if rack.mismatch(consumer, tp):
                maybe_revoked[tp] = consumer
            else:
                keep.append(tp)
        keep.sort(key=lambda tp: (tp.partition, java_key(tp.topic)))
        for tp in multi_owned:
            if tp in keep:
                keep.remove(tp)
        if len(keep) < min_q:
            assignment[consumer].extend(keep)
            assigned.extend(keep)
            under.append(consumer)
        elif len(keep) >= max_q and over < expected_over:
            over += 1
            if over == expected_over:
                exactly.clear()
            assignment[consumer].extend(keep[:max_q])
            assigned.extend(keep[:max_q])
            for tp in keep[max_q:]:
                maybe_revoked[tp] = consumer
        else:
            assignment[consumer].extend(keep[:min_q])
            assigned.extend(keep[:min_q])
            for tp in keep[min_q:]:
                maybe_revoked[tp] = consumer
            if over < expected_over:
                exactly.append(consumer)

    def give(tp: TopicPartition, consumer: str) -> int:
        assignment[consumer].append(tp)
        if (tp in maybe_revoked and maybe_revoked[tp] != consumer) or tp in multi_owned:
            transferring[tp] = consumer
        return len(assignment[consumer])

    unassigned = _unassigned(counts, sorted(counts, key=java_key), assigned, _tp_key)
    under.sort(key=java_key)
    exactly.sort(key=java_key)
    unassigned = rack.sort_by_rack_consumers(unassigned)

    # Rack-aware round robin: members below min, then members at min, on a replica's rack.
    if rack.consumer_racks:
        nxt = 0
        rest: list[TopicPartition] = []
        for tp in unassigned:
            chosen: str | None = None
            index = rack.next_rack_consumer(tp, under, nxt)
            if index >= 0:
                chosen = under[index]
                count = len(assignment[chosen]) + 1
                if count >= min_q:
                    under.remove(chosen)
                    if count < max_q and over < expected_over:
                        exactly.append(chosen)
                else:
                    index += 1
                nxt = index % len(under) if under else 0
            elif exactly:
                first = rack.next_rack_consumer(tp, exactly, 0)
                if first >= 0:
                    chosen = exactly[first]
                    if len(assignment[chosen]) + 1 == max_q:
                        del exactly[first]
                        over += 1
                        if over == expected_over:
                            exactly.clear()
            if chosen is None:
                rest.append(tp)
            else:
                give(tp, chosen)
        unassigned = rest

    # Round robin over the members below min (restarting at the first), then those at min.
    pos = 0
    for tp in unassigned:
        if pos < len(under):
            consumer = under[pos]
            pos += 1
        elif not under and not exactly:
            raise StickyAssignmentError(f"no member left for {tp}")
        elif not under:
            consumer = exactly.pop(0)
        else:
            consumer = under[0]
            pos = 1
        count = give(tp, consumer)
        if count == min_q:
            pos -= 1
            del under[pos]
            exactly.append(consumer)
        elif count == max_q:
            over += 1

    if under and over != expected_over:
        raise StickyAssignmentError("members below quota but no partitions left")
    for consumer in under:
        if len(assignment[consumer]) != min_q:
            raise StickyAssignmentError(f"{consumer} ends below the minimum quota")
    return assignment, transferring


# ----------------------------------------------------------------------------- general


class _SortedMembers:
    """Kafka's ``TreeSet`` of members ordered by (partitions held, member id)."""

    def __init__(self, assignment: dict[str, list[TopicPartition]]) -> None:
        self.assignment = assignment
        self.keys: dict[str, tuple[int, bytes]] = {}
        self.order: list[tuple[int, bytes, str]] = []

    def add(self, c: str) -> None:
        if c in self.keys:
            return
        key = (len(self.assignment[c]), java_key(c))
        self.keys[c] = key
        self.order.append((key[0], key[1], c))
        self.order.sort()

    def remove(self, c: str) -> None:
        key = self.keys.pop(c, None)
        if key is not None:
            self.order.remove((key[0], key[1], c))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([c for _, _, c in self.order])

    def first(self) -> str:
        return self.order[0][2]

    def last(self) -> str:
        return self.order[-1][2]


class _General:
    """Subscriptions differ: keep valid ownership, assign, then rebalance by moves."""

    def __init__(self, counts: dict[str, int], rack: _RackInfo,
                 current: dict[str, list[TopicPartition]], members: list[MemberSubscription],
                 assignor: CooperativeStickyAssignor) -> None:
        self.counts = counts
        self.total = sum(counts.values())
        self.rack = rack
        self.current = current
        self.members = members
        self.subs = {m.member_id: m for m in members}
        self.assignor = assignor
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in counts}
        self.consumer_topics: dict[str, list[str]] = {}
        for m in members:
            mine = [t for t in m.topics if t in counts]
            self.consumer_topics[m.member_id] = mine
            for t in mine:
                self.topic_consumers[t].append(m.member_id)
            current.setdefault(m.member_id, [])
        self.partition_consumer = {tp: c for c, tps in current.items() for tp in tps}
        sorted_topics = sorted(counts, key=lambda t: (len(self.topic_consumers[t]), java_key(t)))
        self.sorted_topics = sorted_topics
        self.all_partitions = [TopicPartition(t, p) for t in sorted_topics for p in range(counts[t])]
        self.sorted_members = _SortedMembers(current)
        self.revocation_required = False
        self.by_topic_moves: dict[str, dict[tuple[str, str], _JavaHashSet]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _partition_key(self, tp: TopicPartition) -> tuple[int, bytes, int]:
        return len(self.topic_consumers[tp.topic]), java_key(tp.topic), tp.partition

    def build(self) -> dict[str, list[TopicPartition]]:
        prev: dict[TopicPartition, _Owner] = {}
        for m in self.members:
            gen = self.assignor.member_generation(m)
            if gen is not None and gen < self.assignor.max_generation:
                self._update_prev(prev, m.owned_partitions, m.member_id, gen)
            elif gen is None and self.assignor.max_generation > DEFAULT_GENERATION:
                self._update_prev(prev, m.owned_partitions, m.member_id, DEFAULT_GENERATION)
        assigned = self._keep_owned()
        if assigned:
            unassigned = _unassigned(self.counts, self.sorted_topics, assigned, self._partition_key)
        else:
            unassigned = self.all_partitions  # the same list, as in Kafka
        for c in list(self.current):
            self.sorted_members.add(c)
        self._balance(prev, unassigned)
        return self.current

    @staticmethod
    def _update_prev(prev: dict[TopicPartition, _Owner], tps: list[TopicPartition],
                     consumer: str, generation: int) -> None:
        for tp in tps:
            known = prev.get(tp)
            if known is None or generation > known.generation:
                prev[tp] = _Owner(consumer, generation)

    def _keep_owned(self) -> list[TopicPartition]:
        assigned = []
        for consumer in list(self.current):
            sub = self.subs.get(consumer)
            tps = self.current[consumer]
            if sub is None:
                for tp in tps:
                    self.partition_consumer.pop(tp, None)
                del self.current[consumer]
                continue
            keep = []
            for tp in tps:
                if tp.topic not in self.topic_consumers:
                    self.partition_consumer.pop(tp, None)
                elif tp.topic not in sub.topics or self.rack.mismatch(consumer, tp):
                    self.revocation_required = True
                else:
                    keep.append(tp)
                    assigned.append(tp)
            tps[:] = keep
        return assigned

    def _max_size(self, topics: list[str]) -> int:
        if len(topics) == len(self.counts):
            return self.total
        return sum(self.counts[t] for t in topics)

    def _is_balanced(self) -> bool:
        sizes = self.current
        if len(sizes[self.sorted_members.first()]) >= len(sizes[self.sorted_members.last()]) - 1:
            return True
        owner = {tp: c for c, tps in sizes.items() for tp in tps}
        for consumer in self.sorted_members:
            mine = sizes[consumer]
            topics = self.consumer_topics[consumer]
            if len(mine) == self._max_size(topics):
                continue
            for topic in topics:
                for p in range(self.counts[topic]):
                    tp = TopicPartition(topic, p)
                    if tp in mine:
                        continue
                    other = owner.get(tp)
                    if other is not None and len(mine) + 1 < len(sizes[other]):
                        return False
        return True

    @staticmethod
    def _score(assignment: dict[str, list[TopicPartition]]) -> int:
        sizes = [len(v) for v in assignment.values()]
        return sum(abs(sizes[i] - sizes[j]) for i in range(len(sizes)) for j in range(i + 1, len(sizes)))

    def _maybe_assign(self, tps: list[TopicPartition], rack: _RackInfo | None, remove: bool) -> None:
        keep = []
        for tp in tps:
            placed = False
            if self.topic_consumers[tp.topic]:
                for consumer in self.sorted_members:
                    if tp.topic in self.consumer_topics[consumer] and (
                            rack is None or not rack.mismatch(consumer, tp)):
                        self.sorted_members.remove(consumer)
                        self.current[consumer].append(tp)
                        self.partition_consumer[tp] = consumer
                        self.sorted_members.add(consumer)
                        placed = True
                        break
            if not (placed and remove):
                keep.append(tp)
        if remove:
            tps[:] = keep

    def _topic_can_move(self, topic: str) -> bool:
        return len(self.topic_consumers[topic]) >= 2

    def _consumer_can_move(self, consumer: str) -> bool:
        mine = self.current[consumer]
        if len(mine) < self._max_size(self.consumer_topics[consumer]):
            return True
        return any(self._topic_can_move(tp.topic) for tp in mine)

    def _balance(self, prev: dict[TopicPartition, _Owner], unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members.last()]
        to_assign = unassigned
        if self.rack.consumer_racks:
            to_assign = list(unassigned)
            self._maybe_assign(to_assign, self.rack, True)
        self._maybe_assign(to_assign, None, False)

        fixed = {TopicPartition(t, p) for t in self.topic_consumers if not self._topic_can_move(t)
                 for p in range(self.counts[t])}
        self.all_partitions[:] = [tp for tp in self.all_partitions if tp not in fixed]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed]
        fixed_assignments = {}
        for consumer in self.consumer_topics:
            if not self._consumer_can_move(consumer):
                self.sorted_members.remove(consumer)
                fixed_assignments[consumer] = self.current.pop(consumer)

        before = {c: list(tps) for c, tps in self.current.items()}
        before_owner = dict(self.partition_consumer)
        if not self.revocation_required:
            self._reassign_until_balanced(unassigned, prev)
        moved = self._reassign_until_balanced(self.all_partitions, prev)
        if not initializing and moved and self._score(self.current) >= self._score(before):
            self.current.clear()
            self.current.update(before)
            self.partition_consumer = before_owner
        for consumer, tps in fixed_assignments.items():
            self.current[consumer] = tps
            self.sorted_members.add(consumer)

    def _reassign_until_balanced(self, tps: list[TopicPartition], prev: dict[TopicPartition, _Owner]) -> bool:
        moved = False
        while True:
            modified = False
            for tp in tps:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer[tp]
                mine = len(self.current[consumer])
                owner = prev.get(tp)
                if owner is not None and owner.consumer in self.current and (
                        mine > len(self.current[owner.consumer]) + 1):
                    self._reassign(tp, owner.consumer)
                    moved = modified = True
                    continue
                found = False
                consumer_rack = self.rack.consumer_racks.get(consumer)
                racks = self.rack.partition_racks.get(tp, frozenset())
                if consumer_rack is not None and racks and consumer_rack in racks:
                    for other in self.topic_consumers[tp.topic]:
                        other_rack = self.rack.consumer_racks.get(other)
                        if other_rack is None or other_rack not in racks:
                            continue
                        if other in self.current and mine > len(self.current[other]) + 1:
                            self._reassign_to_least_loaded(tp)
                            moved = modified = found = True
                            break
                if not found:
                    for other in self.topic_consumers[tp.topic]:
                        if other in self.current and mine > len(self.current[other]) + 1:
                            self._reassign_to_least_loaded(tp)
                            moved = modified = True
                            break
            if not modified:
                return moved

    def _reassign_to_least_loaded(self, tp: TopicPartition) -> None:
        new = next(c for c in self.sorted_members if tp.topic in self.consumer_topics[c])
        self._reassign(tp, new)

    def _reassign(self, tp: TopicPartition, new: str) -> None:
        old = self.partition_consumer[tp]
        self._move(self._actual_partition_to_move(tp, old, new), new)

    def _actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        # Stickiness: if partitions of this topic already moved new -> old, move one of them
        # back instead of moving this one away.
        moves = self.by_topic_moves.get(tp.topic)
        if moves is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = moves.get((new, old))
        return tp if reverse is None else reverse.first()

    def _move(self, tp: TopicPartition, new: str) -> None:
        old = self.partition_consumer[tp]
        self.sorted_members.remove(old)
        self.sorted_members.remove(new)
        self._record_move(tp, old, new)
        self.current[old].remove(tp)
        self.current[new].append(tp)
        self.partition_consumer[tp] = new
        self.sorted_members.add(new)
        self.sorted_members.add(old)

    def _record_move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _ = self._forget_move(tp)
            if src != new:  # not moving back to where it came from
                self._add_move(tp, (src, new))
        else:
            self._add_move(tp, (old, new))

    def _forget_move(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        topic_moves = self.by_topic_moves[tp.topic]
        topic_moves[pair].remove(tp)
        if not topic_moves[pair].items:
            del topic_moves[pair]
        if not topic_moves:
            del self.by_topic_moves[tp.topic]
        return pair

    def _add_move(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic_moves.setdefault(tp.topic, {}).setdefault(pair, _JavaHashSet()).add(tp)
