"""Online migration between the classic and consumer group protocols (pylog.group.migration)
and classic members in a consumer group (pylog.group.classic_members): the conversion rules,
the policy, the records a conversion writes and their replay. Driven with a manual clock.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from _harness.groups import GroupHarness, assignment, subscription

from pylog.errors import (
    FencedInstanceIdError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownServerError,
)
from pylog.group.classic import GroupState
from pylog.group.config import GroupCoordinatorConfig
from pylog.group.consumer_group import MemberState
from pylog.group.migration import (
    MigrationPolicy,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from pylog.group.offsets import OffsetCommitPartition
from pylog.group.records import decode_record
from pylog.protocol.messages import ConsumerGroupHeartbeatRequest

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 6)}
_TP = ConsumerGroupHeartbeatRequest.TopicPartitions


def hb(h: GroupHarness, member: str, epoch: int, *, owned: set[int] | None = None, group: str = "g") -> Any:
    first = epoch == 0
    pending = h.call(
        "consumer_group_heartbeat", group, member, epoch, TOPICS, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30_000 if first else -1, subscribed_topic_names=["t"] if first else None,
        subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=[_TP(topic_id=T, partitions=sorted(owned or set()))] if (first or owned is not None)
        else None,
        client_id="c", client_host="/127.0.0.1")
    assert pending.done
    return pending.result


def classic_join(h: GroupHarness, member_id: str = "", *, group: str = "g", version: int = 5,
                 protocol_type: str = "consumer", protocols: list[tuple[str, bytes]] | None = None,
                 instance: str | None = None, session: int = 10_000) -> Any:
    return h.call("join_group", group, member_id, protocol_type,
                  protocols if protocols is not None else [("range", subscription("t"))],
                  session, 30_000, instance, "client", "/127.0.0.1", version, topics=TOPICS)


def classic_group(h: GroupHarness, split: list[list[int]]) -> list[str]:
    """A Stable classic group, one member per entry of ``split`` holding those partitions
    of "t" (real ConsumerProtocol bytes). Returns the member ids, leader first."""
    pendings = [h.join_new("g", client_id=f"c{i}") for i in range(len(split))]
    h.advance(h.config.initial_rebalance_delay_ms * 2)
    results = [p.result for p in pendings]
    leader = results[0].leader
    ids = sorted((r.member_id for r in results), key=lambda m: m != leader)
    gen = results[0].generation_id
    for m in ids[1:]:
        h.call("sync_group", "g", gen, m)
    h.call("sync_group", "g", gen, leader, [(m, assignment(t=p)) for m, p in zip(ids, split, strict=True)])
    assert h.coord.group("g").is_in(GroupState.STABLE)
    return ids


def synced(h: GroupHarness, member_id: str, generation: int) -> set[int]:
    r = h.call("sync_group", "g", generation, member_id, None, None, "consumer", "range").result
    assert r.error_code == 0, r
    return decode_assignment(r.assignment).get("t", set())


# --------------------------------------------------------------------------- upgrade


def test_a_consumer_member_upgrades_a_classic_group_and_the_classic_members_follow() -> None:
    h = GroupHarness()
    a, b = classic_group(h, [[0, 1, 2], [3, 4, 5]])
    gen = h.coord.group("g").generation_id
    r = hb(h, "n1", 0)
    assert r.error_code == 0
    assert h.coord.group("g") is None
    g = h.coord.consumer.groups["g"]
    # The classic members are members of the consumer group, at epoch = generation, with
    # their partitions; the newcomer bumped the epoch and waits for partitions to be freed.
    assert {m: (x.member_epoch, x.assigned, x.uses_classic_protocol) for m, x in g.members.items() if m != "n1"} == {
        a: (gen, {T: {0, 1, 2}}, True), b: (gen, {T: {3, 4, 5}}, True)}
    assert g.group_epoch > gen and r.member_epoch == g.group_epoch
    # Kafka 4: ListGroups names it a consumer group; DescribeGroups (v0-5) answers Dead for
    # it, classic members or not (ConsumerGroupDescribe describes it).
    assert [(x.group_id, x.group_type) for x in h.coord.list_groups()] == [("g", "consumer")]
    assert [x.group_id for x in h.coord.list_groups(types_filter=["classic"])] == []
    assert h.coord.describe_groups(["g"])[0].group_state == "Dead"
    assert sum(len(p) for p in g.target.values() for p in p.values()) == 6
    # Classic members are told to rejoin; rejoining moves them to the new target.
    assert h.call("heartbeat", "g", gen, a) == RebalanceInProgressError.code
    assert h.call("heartbeat", "g", gen - 1, a) == IllegalGenerationError.code
    epochs = {}
    for m in (a, b):
        j = classic_join(h, m).result
        assert j.error_code == 0 and j.leader == "" and not j.members and j.protocol_name == "range"
        epochs[m] = j.generation_id
        got = synced(h, m, j.generation_id)
        assert got <= {0, 1, 2, 3, 4, 5}
    # The newcomer gets what the classic members gave up; nobody owns a partition twice.
    final = parts_of(h, hb(h, "n1", r.member_epoch))
    owned = [final] + [set().union(*g.members[m].assigned.values()) if g.members[m].assigned else set()
                       for m in (a, b)]
    assert sum(len(o) for o in owned) == len(set().union(*owned))
    assert final, "the consumer member got partitions"
    assert h.call("heartbeat", "g", g.members[a].member_epoch, a) in (0, RebalanceInProgressError.code)


def parts_of(h: GroupHarness, r: Any) -> set[int]:
    g = h.coord.consumer.groups["g"]
    return set(g.members["n1"].assigned.get(T, set())) if r.assignment is None else set(r.assignment.get(T, set()))


def test_the_upgraded_group_is_restored_from_the_log() -> None:
    h = GroupHarness()
    a, b = classic_group(h, [[0, 1, 2], [3, 4, 5]])
    hb(h, "n1", 0)
    fresh = h.replayed()
    assert fresh.group("g") is None
    g, g2 = h.coord.consumer.groups["g"], fresh.consumer.groups["g"]
    assert set(g2.members) == {a, b, "n1"}
    for m in (a, b):
        x, y = g.members[m], g2.members[m]
        assert (y.member_epoch, y.assigned, y.classic_protocols, y.classic_session_timeout_ms) == (
            x.member_epoch, x.assigned, x.classic_protocols, 10_000)
    assert not g2.members["n1"].uses_classic_protocol
    assert (g2.group_epoch, g2.assignment_epoch, g2.target) == (g.group_epoch, g.assignment_epoch, g.target)


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_no_upgrade_unless_the_policy_allows_it(policy: str) -> None:
    h = GroupHarness(consumer_migration_policy=policy)
    classic_group(h, [[0, 1, 2], [3, 4, 5]])
    r = hb(h, "n1", 0)
    assert r.error_code == GroupIdNotFoundError.code
    assert h.coord.group("g").is_in(GroupState.STABLE) and "g" not in h.coord.consumer.groups


def test_a_malformed_embedded_protocol_refuses_the_upgrade() -> None:
    h = GroupHarness()
    h.stable_group("g", 2)  # assignments b"A-<id>": not ConsumerProtocol bytes
    r = hb(h, "n1", 0)
    assert r.error_code == GroupIdNotFoundError.code and "malformed" in r.error_message
    assert h.coord.group("g").is_in(GroupState.STABLE)


def test_a_non_consumer_protocol_type_is_not_upgraded() -> None:
    h = GroupHarness()
    h.stable_group("g", 1, protocol_type="connect")
    assert hb(h, "n1", 0).error_code == GroupIdNotFoundError.code


def test_parked_classic_joins_are_told_to_rejoin_on_upgrade() -> None:
    h = GroupHarness()
    a, b = classic_group(h, [[0, 1, 2], [3, 4, 5]])
    parked = classic_join(h, a, protocols=[("range", subscription("t", "u"))])  # starts a rebalance
    assert not parked.done
    assert hb(h, "n1", 0).error_code == 0
    assert parked.done and parked.result.error_code == RebalanceInProgressError.code


# --------------------------------------------------------------------------- classic members


def test_classic_joins_to_a_consumer_group() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    # v4+ dynamic members get an id first; the protocol type must be "consumer".
    first = classic_join(h, version=5).result
    assert first.error_code == MemberIdRequiredError.code and first.member_id
    assert classic_join(h, protocol_type="connect").result.error_code == InconsistentGroupProtocolError.code
    # A malformed ConsumerProtocolSubscription: Kafka answers UNKNOWN_SERVER_ERROR (its
    # deserializeSubscription throws an IllegalStateException), and nothing changes.
    epoch, seen = h.coord.consumer.groups["g"].group_epoch, h.writes_seen
    assert classic_join(h, first.member_id, protocols=[("range", b"\x00")]).result.error_code == (
        UnknownServerError.code)
    assert first.member_id not in h.coord.consumer.groups["g"].members
    assert h.coord.consumer.groups["g"].group_epoch == epoch and h.writes_seen == seen
    j = classic_join(h, first.member_id).result
    assert j.error_code == 0 and j.member_id == first.member_id
    g = h.coord.consumer.groups["g"]
    assert g.members[j.member_id].uses_classic_protocol and j.generation_id == g.group_epoch
    # Another classic member must share an assignor with the classic members.
    other = classic_join(h, version=3, protocols=[("roundrobin", subscription("t"))]).result
    assert other.error_code == InconsistentGroupProtocolError.code
    # Sync checks the generation and protocol; a consumer-protocol member is unknown to it.
    assert h.call("sync_group", "g", j.generation_id + 5, j.member_id).result.error_code == (
        IllegalGenerationError.code)
    assert h.call("sync_group", "g", j.generation_id, j.member_id, None, None, "consumer",
                  "roundrobin").result.error_code == InconsistentGroupProtocolError.code
    assert h.call("sync_group", "g", 1, "n1").result.error_code == UnknownMemberIdError.code
    assert h.call("heartbeat", "g", 1, "n1") == UnknownMemberIdError.code


def test_a_classic_member_that_does_not_sync_is_fenced() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    j = classic_join(h, "x", version=3).result
    assert "x" in h.coord.consumer.groups["g"].members
    h.advance(30_000)  # its rebalance timeout
    assert "x" not in h.coord.consumer.groups["g"].members
    assert h.call("heartbeat", "g", j.generation_id, "x") == UnknownMemberIdError.code


def test_a_classic_member_told_to_rejoin_that_does_not_is_fenced() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    j = classic_join(h, "x", version=3).result
    synced(h, "x", j.generation_id)
    hb(h, "n2", 0)  # bumps the epoch
    assert h.call("heartbeat", "g", j.generation_id, "x") == RebalanceInProgressError.code
    h.advance(9_000)
    assert h.call("heartbeat", "g", j.generation_id, "x") == RebalanceInProgressError.code
    h.advance(22_000)  # past the rebalance timeout since it was first told
    assert "x" not in h.coord.consumer.groups["g"].members


def test_classic_session_timeout_is_the_join_groups() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    j = classic_join(h, "x", version=3, session=7_000).result
    synced(h, "x", j.generation_id)
    h.advance(6_000)
    assert "x" in h.coord.consumer.groups["g"].members
    h.advance(2_000)
    assert "x" not in h.coord.consumer.groups["g"].members


def test_classic_leave_and_offset_commits_in_a_consumer_group() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    j = classic_join(h, "x", version=3).result
    commit = [OffsetCommitPartition("t", 0, 9, -1, "")]
    bad = h.call("offset_commit", "g", j.generation_id + 1, "x", commit, api_version=7).result
    assert [p.error_code for p in bad] == [IllegalGenerationError.code]
    ok = h.call("offset_commit", "g", j.generation_id, "x", commit, api_version=7).result
    assert [p.error_code for p in ok] == [0]
    epoch = h.coord.consumer.groups["g"].group_epoch
    r = h.call("leave_group", "g", [("x", None), ("n1", None), ("nobody", None)])
    assert [m.error_code for m in r.members] == [0, UnknownMemberIdError.code, UnknownMemberIdError.code]
    g = h.coord.consumer.groups["g"]
    assert set(g.members) == {"n1"} and g.group_epoch == epoch + 1


def test_static_classic_member_replaced_and_fenced() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    j = classic_join(h, "", instance="i1").result
    assert j.error_code == 0
    assert classic_join(h, "other", instance="i1").result.error_code == FencedInstanceIdError.code
    # The member checks come before the subscription is read (Kafka's order).
    assert classic_join(h, "other", instance="i1", protocols=[("range", b"\x00")]).result.error_code == (
        FencedInstanceIdError.code)
    assert classic_join(h, "n1", protocols=[("range", b"\x00")]).result.error_code == UnknownMemberIdError.code
    again = classic_join(h, "", instance="i1").result
    assert again.error_code == 0 and again.member_id != j.member_id
    g = h.coord.consumer.groups["g"]
    assert j.member_id not in g.members and g.static_member("i1").member_id == again.member_id


def test_an_empty_consumer_group_is_replaced_by_a_classic_join() -> None:
    h = GroupHarness(consumer_migration_policy="disabled")
    hb(h, "n1", 0)
    hb(h, "n1", -1)
    assert h.coord.consumer.groups["g"].is_empty()
    r = h.join_new("g")
    assert "g" not in h.coord.consumer.groups and h.coord.group("g") is not None
    h.advance(3_000)
    assert r.result.error_code == 0
    assert "g" not in h.replayed().consumer.groups


# --------------------------------------------------------------------------- downgrade


def upgraded(h: GroupHarness) -> tuple[str, str]:
    a, b = classic_group(h, [[0, 1, 2], [3, 4, 5]])
    assert hb(h, "n1", 0).error_code == 0
    return a, b


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    h = GroupHarness()
    a, b = upgraded(h)
    epoch = h.coord.consumer.groups["g"].group_epoch
    assert hb(h, "n1", -1).error_code == 0
    assert "g" not in h.coord.consumer.groups
    cg = h.coord.group("g")
    assert cg is not None and cg.is_in(GroupState.PREPARING_REBALANCE)
    assert set(cg.members) == {a, b} and cg.protocol_type == "consumer" and cg.generation_id == epoch
    # The classic members see the rebalance (or a generation they lost) and rejoin.
    assert h.call("heartbeat", "g", epoch, a) == RebalanceInProgressError.code
    ja, jb = classic_join(h, a), classic_join(h, b)
    assert ja.done and jb.done and ja.result.error_code == 0
    assert ja.result.generation_id == epoch + 1
    fresh = h.replayed()
    assert "g" not in fresh.consumer.groups and set(fresh.group("g").members) == {a, b}
    assert [(x.group_id, x.group_type) for x in h.coord.list_groups()] == [("g", "classic")]
    assert h.coord.describe_groups(["g"])[0].group_state == "CompletingRebalance"


def test_the_downgraded_group_members_keep_their_target_as_assignment() -> None:
    h = GroupHarness()
    a, b = upgraded(h)
    g = h.coord.consumer.groups["g"]
    target = {m: set(g.target[m].get(T, set())) for m in (a, b)}
    hb(h, "n1", -1)
    cg = h.coord.group("g")
    assert {m: decode_assignment(cg.members[m].assignment).get("t", set()) for m in (a, b)} == target


def test_a_consumer_member_session_expiry_downgrades_too() -> None:
    h = GroupHarness()
    a, b = upgraded(h)
    for m in (a, b):  # keep the classic members alive
        j = classic_join(h, m).result
        synced(h, m, j.generation_id)
    for _ in range(5):
        h.advance(9_000)
        for m in (a, b):
            member = h.coord.consumer.groups.get("g")
            if member is not None:
                h.call("heartbeat", "g", member.members[m].member_epoch, m)
    assert "g" not in h.coord.consumer.groups and set(h.coord.group("g").members) == {a, b}


@pytest.mark.parametrize("policy", ["disabled", "upgrade"])
def test_no_downgrade_unless_the_policy_allows_it(policy: str) -> None:
    h = GroupHarness(consumer_migration_policy="bidirectional")
    a, b = upgraded(h)
    h.coord.config = GroupCoordinatorConfig(consumer_migration_policy=policy)
    assert hb(h, "n1", -1).error_code == 0
    g = h.coord.consumer.groups["g"]
    assert set(g.members) == {a, b} and h.coord.group("g") is None


def test_no_downgrade_while_another_consumer_member_stays() -> None:
    h = GroupHarness()
    upgraded(h)
    hb(h, "n2", 0)
    hb(h, "n1", -1)
    assert "g" in h.coord.consumer.groups
    hb(h, "n2", -1)
    assert "g" not in h.coord.consumer.groups


# --------------------------------------------------------------------------- helpers and config


def test_policy_parsing_and_config() -> None:
    assert MigrationPolicy.parse("BIDIRECTIONAL").upgrade_enabled
    assert not MigrationPolicy.parse("downgrade").upgrade_enabled
    assert MigrationPolicy.parse("downgrade").downgrade_enabled
    with pytest.raises(ValueError, match="migration.policy"):
        MigrationPolicy.parse("sideways")
    with pytest.raises(ValueError, match="migration.policy"):
        GroupCoordinatorConfig(consumer_migration_policy="sideways")
    assert GroupCoordinatorConfig().consumer_migration_policy == "bidirectional"


def test_consumer_protocol_bytes() -> None:
    sub = decode_subscription(subscription("t", "u"))
    assert list(sub.topics) == ["t", "u"]
    with pytest.raises(ValueError):
        decode_subscription(b"\x00")
    with pytest.raises(ValueError):
        decode_assignment(b"\x00\x00\x00")
    data = encode_assignment({"t": {2, 0}, "u": set()}, b"\x00\x01" + b"\x00" * 10)
    assert data[:2] == b"\x00\x01" and decode_assignment(data) == {"t": {0, 2}}
    assert decode_assignment(b"") == {}


def owning(*partitions: int) -> bytes:
    """A v1 subscription to "t" that says it owns ``partitions`` (a cooperative member)."""
    from pylog.protocol._schema import ConsumerProtocolSubscription as Sub

    sub = Sub(topics=["t"], owned_partitions=[Sub.TopicPartition(topic="t", partitions=list(partitions))])
    return b"\x00\x01" + sub.encode(1)


def test_a_classic_member_revokes_before_it_moves_to_the_new_epoch() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    j = classic_join(h, "x", version=3).result
    # x waits for partitions n1 still owns: nothing yet, and no rejoin while it waits.
    assert synced(h, "x", j.generation_id) == set()
    assert h.call("heartbeat", "g", j.generation_id, "x") == 0
    g = h.coord.consumer.groups["g"]
    for _ in range(2):  # n1 heartbeats what it owns: told to revoke, then revoked
        n1 = g.members["n1"]
        hb(h, "n1", n1.member_epoch, owned=set(n1.assigned.get(T, set())))
    # Released: x is told to rejoin, and gets them.
    assert h.call("heartbeat", "g", j.generation_id, "x") == RebalanceInProgressError.code
    j = classic_join(h, "x", version=3).result
    mine = synced(h, "x", j.generation_id)
    assert len(mine) == 3
    x = g.members["x"]
    assert x.member_epoch == j.generation_id and x.state == MemberState.STABLE
    # A third member: x must give some partitions up. Rejoining while still owning them,
    # it stays at its epoch with those pending revocation and gets only what it keeps.
    hb(h, "n2", 0)
    assert h.call("heartbeat", "g", j.generation_id, "x") == RebalanceInProgressError.code
    r = classic_join(h, "x", version=3, protocols=[("range", owning(*sorted(mine)))]).result
    g = h.coord.consumer.groups["g"]
    x = g.members["x"]
    assert r.generation_id == j.generation_id and x.state == MemberState.UNREVOKED_PARTITIONS
    kept = synced(h, "x", r.generation_id)
    assert kept < mine and kept == x.assigned.get(T, set())
    # It revoked; its heartbeat sends it to rejoin, and the rejoin owning only what it kept
    # moves it to the group's epoch.
    assert h.call("heartbeat", "g", r.generation_id, "x") == RebalanceInProgressError.code
    r2 = classic_join(h, "x", version=3, protocols=[("range", owning(*sorted(kept)))]).result
    assert r2.generation_id == g.assignment_epoch and g.members["x"].state != MemberState.UNREVOKED_PARTITIONS
    assert h.call("heartbeat", "g", r2.generation_id, "x") in (0, RebalanceInProgressError.code)


def test_up_down_and_up_again_replays_to_the_last_conversion() -> None:
    h = GroupHarness()
    a, b = upgraded(h)
    hb(h, "n1", -1)  # down
    pa, pb = classic_join(h, a), classic_join(h, b)
    ja = pa.result
    assert pb.result.error_code == 0 and ja.leader in (a, b)
    leader = ja.leader
    other = b if leader == a else a
    h.call("sync_group", "g", ja.generation_id, other)
    h.call("sync_group", "g", ja.generation_id, leader, [(a, assignment(t=[0, 1, 2])), (b, assignment(t=[3, 4, 5]))])
    assert h.coord.group("g").is_in(GroupState.STABLE)
    down = h.replayed()
    assert "g" not in down.consumer.groups and set(down.group("g").members) == {a, b}
    assert hb(h, "n9", 0).error_code == 0  # up again
    up = h.replayed()
    assert up.group("g") is None and set(up.consumer.groups["g"].members) == {a, b, "n9"}
    assert {m: up.consumer.groups["g"].members[m].assigned for m in (a, b)} == {a: {T: {0, 1, 2}}, b: {T: {3, 4, 5}}}


# --------------------------------------------------------------------------- static replacement


def static_hb(h: GroupHarness, member: str, epoch: int, instance: str) -> Any:
    pending = h.call(
        "consumer_group_heartbeat", "g", member, epoch, TOPICS, instance_id=instance, rack_id=None,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1, subscribed_topic_names=["t"] if epoch == 0 else None,
        subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=[_TP(topic_id=T, partitions=[])] if epoch == 0 else None,
        client_id="c", client_host="/127.0.0.1")
    assert pending.done and pending.result.error_code == 0, pending.result
    return pending.result


def upgraded_by_static(h: GroupHarness) -> tuple[str, str]:
    """A classic group of two upgraded by the static consumer-protocol member "s1" (i1)."""
    a, b = classic_group(h, [[0, 1, 2], [3, 4, 5]])
    static_hb(h, "s1", 0, "i1")
    # The classic members rejoin and give up what the newcomer is to get.
    for m in (a, b):
        j = classic_join(h, m).result
        synced(h, m, j.generation_id)
    g = h.coord.consumer.groups["g"]
    static_hb(h, "s1", g.members["s1"].member_epoch, "i1")
    return a, b


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    h = GroupHarness()
    a, b = upgraded_by_static(h)
    g = h.coord.consumer.groups["g"]
    inherited = set(g.target["s1"].get(T, set()))
    assert inherited, "the consumer member has a target to hand over"
    j = classic_join(h, "", instance="i1").result
    assert j.error_code == 0 and j.member_id not in ("", "s1")
    # A Stable classic group (no rebalance): the others keep their generation and the
    # joiner syncs with the group's generation and protocol.
    assert "g" not in h.coord.consumer.groups
    cg = h.coord.group("g")
    assert cg.is_in(GroupState.STABLE) and set(cg.members) == {a, b, j.member_id}
    assert j.generation_id == cg.generation_id and j.protocol_name == cg.protocol_name == "range"
    assert cg.static_members == {"i1": j.member_id}
    assert synced(h, j.member_id, j.generation_id) == inherited
    for m in (a, b):
        assert h.call("heartbeat", "g", cg.generation_id, m) == 0
    # The replaced member is gone; the log rebuilds the classic group.
    assert h.call("heartbeat", "g", cg.generation_id, "s1") == UnknownMemberIdError.code
    fresh = h.replayed()
    assert "g" not in fresh.consumer.groups
    assert set(fresh.group("g").members) == {a, b, j.member_id}
    assert decode_assignment(fresh.group("g").members[j.member_id].assignment).get("t", set()) == inherited


@pytest.mark.parametrize("policy", ["disabled", "upgrade"])
def test_no_downgrade_by_replacement_unless_the_policy_allows_it(policy: str) -> None:
    h = GroupHarness()
    a, b = upgraded_by_static(h)
    h.coord.config = GroupCoordinatorConfig(consumer_migration_policy=policy)
    j = classic_join(h, "", instance="i1").result
    assert j.error_code == 0
    g = h.coord.consumer.groups["g"]
    assert set(g.members) == {a, b, j.member_id} and h.coord.group("g") is None
    assert g.members[j.member_id].uses_classic_protocol


def test_no_downgrade_by_replacement_while_another_consumer_member_stays() -> None:
    h = GroupHarness()
    upgraded_by_static(h)
    hb(h, "n2", 0)
    j = classic_join(h, "", instance="i1").result
    assert j.error_code == 0 and h.coord.group("g") is None
    assert set(h.coord.consumer.groups["g"].members) >= {j.member_id, "n2"}


def test_no_downgrade_by_replacement_over_the_classic_max_size() -> None:
    h = GroupHarness(max_size=2)
    upgraded_by_static(h)
    j = classic_join(h, "", instance="i1").result
    assert j.error_code == 0 and h.coord.group("g") is None and "g" in h.coord.consumer.groups


# --------------------------------------------------------------------------- after a restart


def test_a_classic_member_that_must_rejoin_is_fenced_after_a_restart_without_a_heartbeat() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    x = classic_join(h, "x", version=3, session=45_000).result
    synced(h, "x", x.generation_id)
    y = classic_join(h, "y", version=3, session=45_000).result
    synced(h, "y", y.generation_id)
    g = h.coord.consumer.groups["g"]
    # x must rejoin (behind the group epoch); y is up to date.
    assert g.members["x"].member_epoch < g.group_epoch == g.members["y"].member_epoch
    h.coord = h.replayed()
    h.advance(29_000)
    assert {"x", "y"} <= set(h.coord.consumer.groups["g"].members)
    h.advance(2_000)  # past x's rebalance timeout, within both sessions
    assert set(h.coord.consumer.groups["g"].members) == {"n1", "y"}


def test_a_classic_member_rejoining_after_a_restart_keeps_its_place() -> None:
    h = GroupHarness()
    hb(h, "n1", 0)
    x = classic_join(h, "x", version=3, session=45_000).result
    synced(h, "x", x.generation_id)
    classic_join(h, "y", version=3, session=45_000)
    h.coord = h.replayed()
    h.advance(20_000)
    j = classic_join(h, "x", version=3, session=45_000).result
    assert j.error_code == 0
    synced(h, "x", j.generation_id)
    h.advance(15_000)  # past the restored rebalance timeout: the rejoin cancelled it
    assert "x" in h.coord.consumer.groups["g"].members


# --------------------------------------------------------------------------- the write path


def test_each_conversion_is_one_coordinator_write_with_its_requests_records() -> None:
    """Upgrade, downgrade on a leave and downgrade by replacement hand their records out
    through ``take_writes()`` in the same Write as the request's own records, and the
    request's answer waits for that write (a failed write is the client's error)."""
    def kinds(write: Any) -> list[str]:
        return [type(decode_record(k, v)).__name__ for k, v in write.records]

    h = GroupHarness()
    classic_group(h, [[0, 1, 2], [3, 4, 5]])
    p = h.coord.consumer_group_heartbeat(
        "g", "s1", 0, TOPICS, instance_id="i1", rack_id=None, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["t"], subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=[_TP(topic_id=T, partitions=[])], client_id="c", client_host="/127.0.0.1")
    writes = h.coord.take_writes()
    assert not p.done and len(writes) == 1
    # The classic group's tombstone, then the consumer group's records, with the newcomer's.
    assert kinds(writes[0])[0] == "GroupMetadataRecord" and writes[0].records[0][1] is None
    assert set(kinds(writes[0])[1:]) == {"ConsumerGroupRecord"}
    writes[0].fail(6)  # NOT_LEADER_OR_FOLLOWER
    assert p.done and p.result.error_code != 0

    h2 = GroupHarness()
    upgraded_by_static(h2)
    j = h2.coord.join_group("g", "", "consumer", [("range", subscription("t"))], 10_000, 30_000, "i1",
                            "client", "/127.0.0.1", 5, topics=TOPICS)
    writes = h2.coord.take_writes()
    assert not j.done and len(writes) == 1
    # The join's records, the consumer group's tombstones, then the classic group's value.
    assert kinds(writes[0])[-1] == "GroupMetadataRecord" and writes[0].records[-1][1] is not None
    assert set(kinds(writes[0])[:-1]) == {"ConsumerGroupRecord"}
    writes[0].fail(6)
    assert j.done and j.result.error_code != 0

    h3 = GroupHarness()
    upgraded(h3)
    leave = h3.coord.consumer_group_heartbeat(
        "g", "n1", -1, TOPICS, instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
        subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None, client_id="c", client_host="/127.0.0.1")
    writes = h3.coord.take_writes()
    assert not leave.done and len(writes) == 1
    assert kinds(writes[0])[-1] == "GroupMetadataRecord" and writes[0].records[-1][1] is not None
    writes[0].complete(0)
    assert leave.done and leave.result.error_code == 0
