"""The KIP-848 server-side assignors (pylog.group.assignors): uniform and range."""

from __future__ import annotations

import uuid

from pylog.group.assignors import range_assign, uniform_assign

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {T1: ("a", 6), T2: ("b", 3)}


def _counts(result: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in tp.values()) for m, tp in result.items()}


def _owners(result: dict[str, dict[uuid.UUID, set[int]]]) -> dict[tuple[uuid.UUID, int], str]:
    out: dict[tuple[uuid.UUID, int], str] = {}
    for m, tp in result.items():
        for t, ps in tp.items():
            for p in ps:
                assert (t, p) not in out, "a partition assigned twice"
                out[(t, p)] = m
    return out


def test_uniform_assigns_every_partition_once_and_balances() -> None:
    members = {"m1": {T1, T2}, "m2": {T1, T2}, "m3": {T1, T2}}
    r = uniform_assign(members, TOPICS, {})
    assert len(_owners(r)) == 9
    assert sorted(_counts(r).values()) == [3, 3, 3]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    two = uniform_assign({"m1": {T1}, "m2": {T1}}, {T1: ("a", 6)}, {})
    three = uniform_assign({"m1": {T1}, "m2": {T1}, "m3": {T1}}, {T1: ("a", 6)}, two)
    assert sorted(_counts(three).values()) == [2, 2, 2]
    # Each old member keeps two of its three partitions: only two partitions move.
    for m in ("m1", "m2"):
        assert three[m][T1] <= two[m][T1]
    assert len(three["m3"][T1]) == 2


def test_uniform_moves_only_the_leavers_partitions() -> None:
    three = uniform_assign({"m1": {T1}, "m2": {T1}, "m3": {T1}}, {T1: ("a", 6)}, {})
    two = uniform_assign({"m1": {T1}, "m2": {T1}}, {T1: ("a", 6)}, three)
    for m in ("m1", "m2"):
        assert three[m][T1] <= two[m][T1]
    assert sorted(_counts(two).values()) == [3, 3]


def test_uniform_heterogeneous_subscriptions() -> None:
    # m1 alone reads b; a is shared: m2 gets more of a to even the counts.
    r = uniform_assign({"m1": {T1, T2}, "m2": {T1}}, TOPICS, {})
    assert r["m1"][T2] == {0, 1, 2}
    assert T2 not in r["m2"]
    assert sorted(_counts(r).values()) == [4, 5]
    assert len(_owners(r)) == 9


def test_uniform_drops_partitions_of_unsubscribed_topics() -> None:
    before = {"m1": {T1: {0, 1, 2}, T2: {0}}}
    r = uniform_assign({"m1": {T1}}, {T1: ("a", 3)}, before)
    assert r == {"m1": {T1: {0, 1, 2}}}


def test_uniform_member_without_topics_gets_nothing() -> None:
    r = uniform_assign({"m1": {T1}, "m2": set()}, {T1: ("a", 4)}, {})
    assert r["m2"] == {} and r["m1"] == {T1: {0, 1, 2, 3}}


def test_range_gives_contiguous_ranges_first_members_one_more() -> None:
    r = range_assign({"m1": {T1, T2}, "m2": {T1, T2}}, {T1: ("a", 5), T2: ("b", 3)}, {})
    assert r["m1"] == {T1: {0, 1, 2}, T2: {0, 1}}
    assert r["m2"] == {T1: {3, 4}, T2: {2}}


def test_range_with_more_members_than_partitions() -> None:
    r = range_assign({"m1": {T1}, "m2": {T1}, "m3": {T1}}, {T1: ("a", 2)}, {})
    assert r == {"m1": {T1: {0}}, "m2": {T1: {1}}, "m3": {}}
