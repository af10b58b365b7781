"""pylog.cluster.assignment: Kafka's AdminUtils.assignReplicasToBrokers (the known answers of
Kafka's AdminZkClientTest / AdminRackAwareTest, and their spread checks)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pylog.cluster.assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
    validate_assignment,
)
from pylog.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


def _brokers(n: int, racks: dict[int, str] | None = None) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, (racks or {}).get(i)) for i in range(n)]


def test_rack_unaware_known_answer() -> None:
    # Kafka's testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start index 0.
    assert assign_replicas_to_brokers(_brokers(5), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_alternated_list_and_rack_aware_known_answer() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    got = assign_replicas_to_brokers(_brokers(6, racks), 7, 3, fixed_start_index=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                   5: [2, 0, 3], 6: [0, 4, 2]}


def test_broker_order_does_not_matter() -> None:
    brokers = _brokers(4)
    shuffled = brokers[::-1]
    assert assign_replicas_to_brokers(brokers, 8, 2, 1) == \
        assign_replicas_to_brokers(shuffled, 8, 2, 1)


def test_start_partition_id_continues_a_topic() -> None:
    whole = assign_replicas_to_brokers(_brokers(4), 8, 2, fixed_start_index=2)
    tail = assign_replicas_to_brokers(_brokers(4), 4, 2, fixed_start_index=2, start_partition_id=4)
    assert tail == {p: whole[p] for p in range(4, 8)}


def test_random_start_is_reproducible_with_a_seeded_rng() -> None:
    a = assign_replicas_to_brokers(_brokers(5), 20, 3, rng=random.Random(7))
    b = assign_replicas_to_brokers(_brokers(5), 20, 3, rng=random.Random(7))
    assert a == b


def test_leaders_and_replicas_spread_evenly() -> None:
    n, partitions, rf = 6, 60, 3
    got = assign_replicas_to_brokers(_brokers(n), partitions, rf, rng=random.Random(1))
    leaders = Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {partitions // n}
    replicas = Counter(b for r in got.values() for b in r)
    assert set(replicas.values()) == {partitions * rf // n}
    assert all(len(set(r)) == rf for r in got.values())


def test_rack_aware_spreads_over_racks() -> None:
    racks = {i: f"r{i % 3}" for i in range(9)}
    got = assign_replicas_to_brokers(_brokers(9, racks), 27, 3, rng=random.Random(3))
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3
    assert set(Counter(r[0] for r in got.values()).values()) == {3}
    # more replicas than racks: every rack used, then no broker twice
    got = assign_replicas_to_brokers(_brokers(4, {0: "a", 1: "a", 2: "b", 3: "b"}), 8, 3, 0)
    for replicas in got.values():
        assert len(set(replicas)) == 3 and {"a", "b"} == {("a" if b < 2 else "b") for b in replicas}


@pytest.mark.parametrize(("brokers", "parts", "rf", "error", "message"), [
    (_brokers(3), 0, 1, InvalidPartitionsError, "Number of partitions must be larger than 0."),
    (_brokers(3), 1, 0, InvalidReplicationFactorError, "must be larger than 0"),
    (_brokers(3), 1, 4, InvalidReplicationFactorError, "4 larger than available brokers: 3"),
    (_brokers(3, {0: "a"}), 1, 1, AdminOperationError, "Not all brokers have rack information"),
    ([BrokerMetadata(1), BrokerMetadata(1)], 1, 1, AdminOperationError, "twice"),
])
def test_refusals(brokers: list[BrokerMetadata], parts: int, rf: int, error: type[Exception],
                  message: str) -> None:
    with pytest.raises(error, match=message):
        assign_replicas_to_brokers(brokers, parts, rf, 0)


def test_validate_explicit_assignment() -> None:
    validate_assignment({0: [1, 2], 1: [2, 1]}, live_brokers=[1, 2])
    for bad, message in [
        ({}, "no partitions"),
        ({1: [1]}, "consecutive"),
        ({0: [1], 1: [1, 2]}, "same number of replicas"),
        ({0: [1, 1]}, "Duplicate brokers"),
        ({0: [7]}, "Unknown broker"),
    ]:
        with pytest.raises(InvalidReplicaAssignmentError, match=message):
            validate_assignment(bad, live_brokers=[1, 2])
