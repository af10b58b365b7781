"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

The group coordinator runs one of them whenever the group epoch moves past the assignment
epoch (a member joined, left or changed its subscription; a subscribed topic grew). The
result is the group's *target* assignment; members then reconcile towards it
(``pylog.group.consumer_group.reconcile``), so an assignor only says where partitions should
end up, never how they get there.

Both take the same inputs, all plain data:

- ``members``: member id -> the topic ids it subscribes to;
- ``topics``: topic id -> (topic name, number of partitions) for every subscribed topic;
- ``current``: member id -> its current target assignment (topic id -> partitions), which
  the uniform assignor keeps where it can (stickiness).

and return member id -> topic id -> set of partitions, with an entry (possibly empty) for
every member. Deterministic: topics are walked by name, members by id.

``uniform`` (Kafka's ``UniformAssignor``, the default): every partition of the subscribed
topics goes to one subscriber; counts differ by at most one between members with the same
subscription; partitions stay where they are unless balance needs them to move. This
implementation keeps what is still valid, places the rest on the least-loaded subscriber,
then moves partitions from the most to the least loaded subscriber while that narrows the
gap by two or more. Kafka's builders reach the same balance by other means; the exact
placement can differ.

``range`` (Kafka's ``RangeAssignor``): per topic, the subscribers sorted by member id get
contiguous ranges, the first ``partitions % members`` one partition more; co-partitioned
topics land together. Kafka 4's server-side range assignor also tries to keep a member's
previous ranges; this one does not (a membership change can move more partitions).

Pure functions; thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Set

__all__ = ["ASSIGNORS", "Assignment", "range_assign", "uniform_assign"]

Assignment = dict[uuid.UUID, set[int]]


def _new(members: Mapping[str, Set[uuid.UUID]]) -> dict[str, Assignment]:
    return {m: {} for m in members}


def _ordered_partitions(
    members: Mapping[str, Set[uuid.UUID]], topics: Mapping[uuid.UUID, tuple[str, int]]
) -> list[tuple[uuid.UUID, int]]:
    subscribed = set().union(*members.values()) if members else set()
    out: list[tuple[uuid.UUID, int]] = []
    for tid in sorted((t for t in subscribed if t in topics), key=lambda t: topics[t][0]):
        out.extend((tid, p) for p in range(topics[tid][1]))
    return out


def uniform_assign(
    members: Mapping[str, Set[uuid.UUID]],
    topics: Mapping[uuid.UUID, tuple[str, int]],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The ``uniform`` assignor (see the module docstring)."""
    result = _new(members)
    if not members:
        return result
    partitions = _ordered_partitions(members, topics)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    count = dict.fromkeys(members, 0)
    # 1. Stickiness: a partition stays with its current owner while that member is still
    #    in the group and still subscribed (and the partition still exists).
    valid = set(partitions)
    for m in sorted(current):
        if m not in members:
            continue
        for tid, parts in current[m].items():
            if tid not in members[m]:
                continue
            for p in sorted(parts):
                if (tid, p) in valid and (tid, p) not in owner:
                    owner[(tid, p)] = m
                    count[m] += 1
    # 2. Every other partition goes to its least-loaded subscriber.
    subscribers = {tid: sorted(m for m in members if tid in members[m]) for tid in topics}
    for tp in partitions:
        if tp in owner:
            continue
        m = min(subscribers[tp[0]], key=lambda x: (count[x], x))
        owner[tp] = m
        count[m] += 1
    # 3. Balance: move a partition from a member to a subscriber holding two or more fewer,
    #    until no such move exists. Each move lowers the sum of squared counts, so it ends.
    held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in members}
    for tp in partitions:
        held[owner[tp]].append(tp)
    moved = True
    while moved:
        moved = False
        for src in sorted(members, key=lambda x: (-count[x], x)):
            for tp in reversed(held[src]):
                dst = min(subscribers[tp[0]], key=lambda x: (count[x], x))
                if count[dst] + 2 <= count[src]:
                    held[src].remove(tp)
                    held[dst].append(tp)
                    count[src] -= 1
                    count[dst] += 1
                    moved = True
                    break
            if moved:
                break
    for m, tps in held.items():
        for tid, p in tps:
            result[m].setdefault(tid, set()).add(p)
    return result


def range_assign(
    members: Mapping[str, Set[uuid.UUID]],
    topics: Mapping[uuid.UUID, tuple[str, int]],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The ``range`` assignor (see the module docstring); ``current`` is not used."""
    result = _new(members)
    for tid in sorted(topics, key=lambda t: topics[t][0]):
        subs = sorted(m for m in members if tid in members[m])
        if not subs:
            continue
        n = topics[tid][1]
        quota, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = quota + (1 if i < extra else 0)
            if size:
                result[m][tid] = set(range(start, start + size))
            start += size
    return result


# group.consumer.assignors names -> assignor; the first configured one is the default.
ASSIGNORS: dict[
    str,
    Callable[
        [
            Mapping[str, Set[uuid.UUID]],
            Mapping[uuid.UUID, tuple[str, int]],
            Mapping[str, Assignment],
        ],
        dict[str, Assignment],
    ],
] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
