"""Replica assignment on topic creation: which brokers hold each partition, leader first.

Kafka's ``AdminUtils.assignReplicasToBrokers`` (``server-common/.../admin/AdminUtils.java``),
the algorithm a ZooKeeper-mode broker uses for CreateTopics without an explicit assignment.
Sans-IO and deterministic once the start index is given (tests pass it; otherwise a
``random.Random`` the caller may seed picks it, as Kafka picks it at random).

Rack-unaware (no broker has ``broker.rack``), over brokers sorted by id:

1. Leaders go round-robin from a start index: partition p's first replica is
   ``brokers[(p + start) % n]``, so leaders spread evenly.
2. Followers are shifted from the leader by ``1 + (shift + j) % (n - 1)`` for the j-th
   follower: never the leader's own slot, all distinct. The shift starts at the start index
   (or at random) and grows by one each time the partition id wraps past a multiple of n, so
   the followers of a broker's leaders spread over the other brokers instead of always
   landing on its neighbour.

Rack-aware (every broker has a rack): brokers are first arranged rack-alternated (racks
sorted, one broker from each rack in turn, brokers sorted by id within a rack), then the
same leader rule applies; each follower is the next candidate (by the shifted index, shift
scaled by the number of racks) that is on a rack without a replica yet, unless every rack
has one, and on a broker without a replica yet, unless every broker has one. So a partition
spans min(replication factor, racks) racks.

Mixed (some brokers with a rack, some without) is refused, as Kafka refuses it by default.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pylog.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


class AdminOperationError(ValueError):
    """Kafka's ``AdminOperationException``: the brokers' rack information is inconsistent."""


@dataclass(frozen=True)
class BrokerMetadata:
    broker_id: int
    rack: str | None = None


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                   n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def assign_replicas_to_brokers(brokers: Sequence[BrokerMetadata], n_partitions: int,
                               replication_factor: int, fixed_start_index: int = -1,
                               start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """Partition id -> replica list (head = preferred leader).

    Args:
        brokers: the live brokers (any order; sorted by id here as Kafka's
            ``getBrokerMetadatas`` sorts them).
        fixed_start_index: >= 0 fixes both the leader start and the follower shift (tests,
            reproducible plans); -1 draws both from ``rng``.
        start_partition_id: the first partition id to assign (CreatePartitions adds
            partitions after the existing ones); -1 means 0.

    Raises:
        InvalidPartitionsError: n_partitions <= 0.
        InvalidReplicationFactorError: replication_factor <= 0 or more than the brokers.
        AdminOperationError: some brokers have a rack and others do not.
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.")
    ids = [b.broker_id for b in brokers]
    if len(set(ids)) != len(ids):
        raise AdminOperationError(f"broker ids {sorted(ids)} name a broker twice")
    ordered = sorted(brokers, key=lambda b: b.broker_id)
    rng = rng or random.Random()
    if all(b.rack is None for b in ordered):
        return _rack_unaware(n_partitions, replication_factor, [b.broker_id for b in ordered],
                             fixed_start_index, start_partition_id, rng)
    if any(b.rack is None for b in ordered):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment: set "
            "broker.rack on every broker, or on none")
    return _rack_aware(n_partitions, replication_factor,
                       {b.broker_id: b.rack for b in ordered if b.rack is not None},
                       fixed_start_index, start_partition_id, rng)


def _starts(n: int, fixed_start_index: int, rng: random.Random) -> tuple[int, int]:
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    return start_index, shift


def _rack_unaware(n_partitions: int, rf: int, broker_list: list[int], fixed_start_index: int,
                  start_partition_id: int, rng: random.Random) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index, next_replica_shift = _starts(n, fixed_start_index, rng)
    current = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        replicas = [broker_list[first]]
        for j in range(rf - 1):
            replicas.append(broker_list[_replica_index(first, next_replica_shift, j, n)])
        out[current] = replicas
        current += 1
    return out


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so consecutive entries alternate racks (Kafka's
    ``getRackAlternatedBrokerList``): racks sorted by name, brokers sorted within a rack."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    iters = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iters)
    out: list[int] = []
    i = 0
    while len(out) < len(broker_racks):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(racks)
    return out


def _rack_aware(n_partitions: int, rf: int, broker_racks: Mapping[int, str],
                fixed_start_index: int, start_partition_id: int,
                rng: random.Random) -> dict[int, list[int]]:
    num_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    start_index, next_replica_shift = _starts(n, fixed_start_index, rng)
    current = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {broker_racks[leader]}
        brokers_with = {leader}
        k = 0
        for _j in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, next_replica_shift * num_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip a broker on a rack that already has a replica while some rack has none,
                # and a broker that already has one while some broker has none.
                if (rack not in racks_with or len(racks_with) == num_racks) and \
                        (broker not in brokers_with or len(brokers_with) == n):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[current] = replicas
        current += 1
    return out


def validate_assignment(assignment: Mapping[int, Sequence[int]],
                        live_brokers: Sequence[int] | None = None) -> None:
    """Checks an explicit assignment (CreateTopics with one) as Kafka's
    ``validateTopicCreate`` / ``validateReplicaAssignment`` do.

    Raises:
        InvalidReplicaAssignmentError: partitions not 0..n-1, a broker named twice, replica
            counts that differ, or (``live_brokers`` given) an unknown broker.
    """
    if not assignment:
        raise InvalidReplicaAssignmentError("the assignment has no partitions")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError(
            f"partitions should be a consecutive 0-based integer sequence, got {sorted(assignment)}")
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas (and at least one)")
    for p, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Duplicate brokers not allowed in replica assignment: {list(replicas)} "
                f"for partition id {p}.")
        if live_brokers is not None:
            unknown = sorted(set(replicas) - set(live_brokers))
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) {unknown} in replica assignment of partition {p}: the "
                    f"live brokers are {sorted(live_brokers)}")
