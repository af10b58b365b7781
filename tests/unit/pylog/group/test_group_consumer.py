"""KIP-848 consumer groups in the coordinator (pylog.group.consumer_coordinator and
consumer_group): epochs, incremental reconciliation, leaving, static members, fencing,
offset commits by member epoch, and replay from the log. Driven with a manual clock.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from _harness.groups import GroupHarness

from pylog.config import BrokerConfig, ConfigError
from pylog.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InconsistentGroupProtocolError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from pylog.group.consumer_group import ConsumerGroupMember, MemberState, reconcile
from pylog.group.offsets import OffsetCommitPartition
from pylog.group.service import coordinator_config
from pylog.group.topic_regex import compile_subscription
from pylog.protocol.messages import ConsumerGroupHeartbeatRequest

T = uuid.UUID(int=7)
TOPICS = {"t": (T, 6)}
_TP = ConsumerGroupHeartbeatRequest.TopicPartitions


def hb(
    h: GroupHarness,
    member: str,
    epoch: int,
    *,
    owned: set[int] | None = None,
    topics: Any = None,
    names: list[str] | None = None,
    instance: str | None = None,
    assignor: str | None = None,
    rebalance: int = -1,
    group: str = "g",
) -> Any:
    if epoch == 0:
        names = names or ["t"]
        rebalance = 30_000 if rebalance == -1 else rebalance
        owned = set() if owned is None else owned
    pending = h.call(
        "consumer_group_heartbeat",
        group,
        member,
        epoch,
        TOPICS if topics is None else topics,
        instance_id=instance,
        rack_id=None,
        rebalance_timeout_ms=rebalance,
        subscribed_topic_names=names,
        subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=None if owned is None else [_TP(topic_id=T, partitions=sorted(owned))],
        client_id="c",
        client_host="/127.0.0.1",
    )
    assert pending.done
    return pending.result


def parts(r: Any) -> set[int] | None:
    return None if r.assignment is None else set(r.assignment.get(T, set()))


def test_first_member_gets_everything_at_epoch_1() -> None:
    h = GroupHarness()
    r = hb(h, "m1", 0)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (
        0,
        "m1",
        1,
        5000,
    )
    assert parts(r) == {0, 1, 2, 3, 4, 5}
    assert h.coord.consumer.groups["g"].state.value == "Stable"
    # An unchanged heartbeat carries no assignment.
    r = hb(h, "m1", 1)
    assert (r.error_code, r.member_epoch, r.assignment) == (0, 1, None)


def test_empty_member_id_is_chosen_by_the_coordinator() -> None:
    h = GroupHarness()
    r = hb(h, "", 0)
    assert r.error_code == 0 and r.member_id == "u1"


def test_new_member_waits_for_revocation_before_getting_partitions() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    r2 = hb(h, "m2", 0)
    # m2 is at the new epoch but its target partitions are still owned by m1: unreleased.
    assert r2.member_epoch == 2 and parts(r2) == set()
    g = h.coord.consumer.groups["g"]
    assert g.members["m2"].state == MemberState.UNRELEASED_PARTITIONS
    assert g.state.value == "Reconciling"
    # m1 is told to keep three partitions (the others are pending revocation), epoch unchanged.
    r1 = hb(h, "m1", 1)
    kept = parts(r1)
    assert r1.member_epoch == 1 and len(kept) == 3
    assert g.members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    # Still owning the revoked ones: nothing moves.
    r1 = hb(h, "m1", 1, owned={0, 1, 2, 3, 4, 5})
    assert r1.member_epoch == 1 and r1.assignment is None
    # Revoked: m1 moves to epoch 2 with its three, m2 then gets the other three.
    r1 = hb(h, "m1", 1, owned=kept)
    assert r1.member_epoch == 2 and r1.assignment is None  # same partitions: not resent
    assert g.members["m1"].assigned == {T: kept} and g.members["m1"].state == MemberState.STABLE
    r2 = hb(h, "m2", 2)
    assert r2.member_epoch == 2 and parts(r2) == {0, 1, 2, 3, 4, 5} - kept
    assert g.state.value == "Stable"


def test_reconcile_never_gives_an_owned_partition() -> None:
    m = ConsumerGroupMember("m2", member_epoch=1, previous_member_epoch=0)
    owned_elsewhere = {(T, 0)}
    step = reconcile(m, 2, {T: {0, 1}}, lambda t, p: 1 if (t, p) in owned_elsewhere else -1, None)
    assert (step.member_epoch, step.state, step.assigned) == (
        2,
        MemberState.UNRELEASED_PARTITIONS,
        {T: {1}},
    )
    step2 = reconcile(step, 2, {T: {0, 1}}, lambda t, p: -1, None)
    assert (step2.state, step2.assigned) == (MemberState.STABLE, {T: {0, 1}})
    assert reconcile(step2, 2, {T: {0, 1}}, lambda t, p: -1, None) is step2


def test_leave_frees_partitions_for_the_others() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    hb(h, "m2", 0)
    kept = parts(hb(h, "m1", 1))
    hb(h, "m1", 1, owned=kept)
    hb(h, "m2", 2)
    r = hb(h, "m2", -1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    g = h.coord.consumer.groups["g"]
    assert set(g.members) == {"m1"} and g.group_epoch == 3
    r1 = hb(h, "m1", 2)
    assert r1.member_epoch == 3 and parts(r1) == {0, 1, 2, 3, 4, 5}


def test_session_timeout_fences_a_silent_member() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    hb(h, "m2", 0)
    for _ in range(10):  # m1 heartbeats, m2 does not
        h.advance(5_000)
        r1 = hb(
            h,
            "m1",
            h.coord.consumer.groups["g"].members["m1"].member_epoch,
            owned=h.coord.consumer.groups["g"].members["m1"].assigned.get(T, set()),
        )
    assert set(h.coord.consumer.groups["g"].members) == {"m1"}
    assert parts(r1) == {0, 1, 2, 3, 4, 5} or h.coord.consumer.groups["g"].members["m1"].assigned[
        T
    ] == set(range(6))
    assert hb(h, "m2", 2).error_code == UnknownMemberIdError.code


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = GroupHarness()
    hb(h, "m1", 0, rebalance=10_000)
    hb(h, "m2", 0)
    hb(h, "m1", 1)  # told to revoke
    h.advance(10_000)
    assert "m1" not in h.coord.consumer.groups["g"].members
    assert hb(h, "m2", 2).member_epoch > 2


def test_fenced_epochs() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    assert hb(h, "m1", 5).error_code == FencedMemberEpochError.code
    hb(h, "m2", 0)
    kept = parts(hb(h, "m1", 1))
    assert hb(h, "m1", 1, owned=kept).member_epoch == 2
    # The previous epoch with owned partitions inside the assignment: a lost response.
    assert hb(h, "m1", 1, owned=kept).error_code == 0
    # The previous epoch claiming more: fenced.
    assert hb(h, "m1", 1, owned=set(range(6))).error_code == FencedMemberEpochError.code
    assert hb(h, "nobody", 1).error_code == UnknownMemberIdError.code


def test_invalid_requests() -> None:
    h = GroupHarness()
    assert hb(h, "m1", 0, names=[]).error_code == 0  # default topics given by hb
    r = h.call(
        "consumer_group_heartbeat",
        "g",
        "m9",
        0,
        TOPICS,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=["t"],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
        client_id="c",
        client_host="h",
    ).result
    assert r.error_code == InvalidRequestError.code
    assert hb(h, "m2", 0, assignor="sticky").error_code == UnsupportedAssignorError.code
    assert hb(h, "m2", -3).error_code == InvalidRequestError.code
    assert hb(h, "m2", 0, owned={1}).error_code == InvalidRequestError.code


def test_static_member_leaves_with_minus_2_and_comes_back_with_its_partitions() -> None:
    h = GroupHarness()
    hb(h, "a", 0, instance="i1")
    hb(h, "b", 0, instance="i2")
    kept = parts(hb(h, "a", 1, instance="i1"))
    hb(h, "a", 1, instance="i1", owned=kept)
    b_parts = parts(hb(h, "b", 2, instance="i2"))
    g = h.coord.consumer.groups["g"]
    epoch = g.group_epoch
    # Another process with the same instance id while "a" is present: refused.
    assert hb(h, "a2", 0, instance="i1").error_code == UnreleasedInstanceIdError.code
    r = hb(h, "a", -2, instance="i1")
    assert (r.error_code, r.member_epoch) == (0, -2)
    r = hb(h, "a2", 0, instance="i1")
    assert r.error_code == 0 and parts(r) == kept and r.member_epoch == epoch
    assert g.group_epoch == epoch and "a" not in g.members
    # The old member id is fenced now.
    assert hb(h, "a", 2, instance="i1").error_code == FencedInstanceIdError.code
    assert parts(hb(h, "b", 2, instance="i2", owned=b_parts)) in (None, b_parts)


def test_offset_commit_is_checked_against_the_member_epoch() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    commit = [OffsetCommitPartition("t", 0, 42, -1, "")]
    ok = h.call("offset_commit", "g", 1, "m1", commit).result
    assert [p.error_code for p in ok] == [0]
    assert [p.error_code for p in h.call("offset_commit", "g", 0, "m1", commit).result] == [
        StaleMemberEpochError.code
    ]
    assert [p.error_code for p in h.call("offset_commit", "g", 1, "zz", commit).result] == [
        UnknownMemberIdError.code
    ]
    assert [p.error_code for p in h.call("offset_commit", "g", -1, "", commit).result] == [
        UnknownMemberIdError.code
    ]
    assert h.coord.committed_offsets("g")[("t", 0)].offset == 42


def test_classic_and_consumer_groups_side_by_side() -> None:
    h = GroupHarness()
    hb(h, "m1", 0, group="new")
    h.stable_group("old", 1)
    listed = {(g.group_id, g.group_type, g.group_state) for g in h.coord.list_groups()}
    assert listed == {("new", "consumer", "Stable"), ("old", "classic", "Stable")}
    assert [g.group_id for g in h.coord.list_groups(types_filter=["consumer"])] == ["new"]
    # A classic member may join the consumer group (Kafka 4: it is served there,
    # test_group_protocol_migration.py); a non-consumer protocol type may not.
    assert h.join("new").result.error_code == 79  # MEMBER_ID_REQUIRED: accepted
    assert h.join("new", protocol_type="connect").result.error_code == InconsistentGroupProtocolError.code
    # This classic group's assignments are not ConsumerProtocol bytes: it cannot be upgraded.
    assert hb(h, "m2", 0, group="old").error_code == GroupIdNotFoundError.code
    # An offsets-only (empty, simple) group becomes a consumer group.
    h.call("offset_commit", "simple", -1, "", [OffsetCommitPartition("t", 0, 5, -1, "")])
    assert hb(h, "m3", 0, group="simple").error_code == 0
    assert h.coord.committed_offsets("simple")[("t", 0)].offset == 5


def test_group_is_restored_from_the_log() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    hb(h, "m2", 0, instance="s2")
    kept = parts(hb(h, "m1", 1))
    g = h.coord.consumer.groups["g"]
    before = {
        m: (
            x.member_epoch,
            x.previous_member_epoch,
            x.state,
            x.assigned,
            x.pending_revocation,
            x.instance_id,
            x.subscribed_topic_names,
        )
        for m, x in g.members.items()
    }
    fresh = h.replayed()
    g2 = fresh.consumer.groups["g"]
    after = {
        m: (
            x.member_epoch,
            x.previous_member_epoch,
            x.state,
            x.assigned,
            x.pending_revocation,
            x.instance_id,
            x.subscribed_topic_names,
        )
        for m, x in g2.members.items()
    }
    assert after == before
    assert (g2.group_epoch, g2.assignment_epoch, g2.target, g2.subscription_metadata) == (
        g.group_epoch,
        g.assignment_epoch,
        g.target,
        g.subscription_metadata,
    )
    # The restored coordinator continues the reconciliation where it was.
    h.coord = fresh
    r = hb(h, "m1", 1, owned=kept)
    assert r.member_epoch == 2
    assert parts(hb(h, "m2", 2, instance="s2")) == set(range(6)) - kept


def test_deleting_an_empty_consumer_group() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    h.call("offset_commit", "g", 1, "m1", [OffsetCommitPartition("t", 0, 1, -1, "")])
    assert h.call("delete_groups", ["g"]).result == [("g", 68)]  # NON_EMPTY_GROUP
    hb(h, "m1", -1)
    assert h.call("delete_groups", ["g"]).result == [("g", 0)]
    assert "g" not in h.coord.consumer.groups
    fresh = h.replayed()
    assert "g" not in fresh.consumer.groups and fresh.committed_offsets("g") == {}


def test_the_protocol_can_be_disabled() -> None:
    h = GroupHarness(rebalance_protocols=("classic",))
    assert hb(h, "m1", 0).error_code == UnsupportedVersionError.code
    assert "g" not in h.coord.consumer.groups


def test_consumer_group_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="group.consumer.session.timeout.ms"):
        BrokerConfig({"group.consumer.session.timeout.ms": "1000"})
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms"):
        BrokerConfig({"group.consumer.heartbeat.interval.ms": "20000"})
    with pytest.raises(ConfigError, match="group.coordinator.rebalance.protocols"):
        BrokerConfig({"group.coordinator.rebalance.protocols": "consumer"})
    with pytest.raises(ConfigError, match="group.consumer.assignors"):
        BrokerConfig({"group.consumer.assignors": "sticky"})
    ok = BrokerConfig(
        {
            "group.consumer.session.timeout.ms": "1000",
            "group.consumer.min.session.timeout.ms": "500",
            "group.consumer.heartbeat.interval.ms": "100",
            "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        }
    )
    cfg = coordinator_config(ok)
    assert (
        cfg.consumer_session_timeout_ms,
        cfg.consumer_heartbeat_interval_ms,
        cfg.consumer_assignors,
    ) == (1000, 100, ("range",))
    h = GroupHarness(cfg)
    hb(h, "m1", 0)
    hb(h, "m2", 0)
    assert h.coord.consumer.assignor_name(h.coord.consumer.groups["g"]) == "range"


def test_a_member_may_ask_for_another_assignor() -> None:
    h = GroupHarness()
    hb(h, "m1", 0, assignor="range")
    hb(h, "m2", 0, assignor="range")
    g = h.coord.consumer.groups["g"]
    assert h.coord.consumer.assignor_name(g) == "range"
    assert g.target == {"m1": {T: {0, 1, 2}}, "m2": {T: {3, 4, 5}}}


def test_an_emptied_classic_group_becomes_a_consumer_group_for_good() -> None:
    h = GroupHarness()
    (mid,) = h.stable_group("old", 1)
    h.call("leave_group", "old", [(mid, None)])
    assert h.coord.group("old").is_empty()
    assert hb(h, "m1", 0, group="old").error_code == 0
    fresh = h.replayed()
    assert fresh.group("old") is None and "old" in fresh.consumer.groups
    assert [(g.group_id, g.group_type) for g in fresh.list_groups()] == [("old", "consumer")]


def test_offset_fetch_checks_the_member_epoch_when_given() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    h.call("offset_commit", "g", 1, "m1", [OffsetCommitPartition("t", 0, 9, -1, "")])
    assert h.coord.offset_fetch("g", None).error_code == 0  # admin tools: no member
    assert h.coord.offset_fetch("g", None, member_id="m1", member_epoch=1).error_code == 0
    assert (
        h.coord.offset_fetch("g", None, member_id="m1", member_epoch=0).error_code
        == StaleMemberEpochError.code
    )
    assert (
        h.coord.offset_fetch("g", None, member_id="zz", member_epoch=1).error_code
        == UnknownMemberIdError.code
    )


def test_a_subscribed_topic_growing_or_going_bumps_the_group_epoch() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    g = h.coord.consumer.groups["g"]
    grown = {"t": (T, 8)}
    r = hb(h, "m1", 1, topics=grown)
    assert (g.group_epoch, r.member_epoch, parts(r)) == (2, 2, set(range(8)))
    assert g.subscription_metadata == grown
    # The topic is deleted: nothing to assign, the member gives everything up.
    r = hb(h, "m1", 2, topics={})
    assert g.group_epoch == 3 and g.subscription_metadata == {}
    assert parts(r) == set() and r.member_epoch == 2
    r = hb(h, "m1", 2, topics={}, owned=set())
    assert r.member_epoch == 3 and g.state.value == "Stable"


def test_regex_subscriptions_follow_the_topics_that_match() -> None:
    h = GroupHarness()
    a, b = uuid.UUID(int=21), uuid.UUID(int=22)
    topics = {"rx-a": (a, 2), "other": (T, 6), "__consumer_offsets": (uuid.UUID(int=9), 3)}

    def beat(epoch: int, view: Any, **kw: Any) -> Any:
        return h.call(
            "consumer_group_heartbeat",
            "g",
            "m1",
            epoch,
            view,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30_000 if epoch == 0 else -1,
            subscribed_topic_names=[] if epoch == 0 else None,
            server_assignor=None,
            topic_partitions=[] if epoch == 0 else None,
            client_id="c",
            client_host="h",
            **kw,
        ).result

    r = beat(0, topics, subscribed_topic_regex="(^rx-.*)")
    assert r.error_code == 0 and r.assignment == {a: {0, 1}}
    # A new matching topic: the next heartbeat bumps the epoch and assigns it.
    r = beat(r.member_epoch, {**topics, "rx-b": (b, 1)}, subscribed_topic_regex=None)
    assert r.member_epoch == 2 and r.assignment == {a: {0, 1}, b: {0}}
    # Internal topics never match a regex.
    r = beat(2, topics, subscribed_topic_regex=".*")
    assert set(r.assignment or h.coord.consumer.groups["g"].members["m1"].assigned) <= {a, T}
    assert h.replayed().consumer.groups["g"].members["m1"].subscribed_topic_regex == ".*"


@pytest.mark.parametrize(
    "regex",
    [r"(a)\1", r"(?=x)t", r"(?<!x)t", r"(?>t)", "t*+", r"\p{L}+", r"\Qa\E", r"t\z", "(unclosed"],
)
def test_regexes_python_and_re2_read_differently_are_refused(regex: str) -> None:
    h = GroupHarness()
    r = h.call(
        "consumer_group_heartbeat",
        "g",
        "m1",
        0,
        TOPICS,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[],
        subscribed_topic_regex=regex,
        server_assignor=None,
        topic_partitions=[],
        client_id="c",
        client_host="h",
    ).result
    assert r.error_code == InvalidRegularExpressionError.code, regex
    assert compile_subscription(r"t\\1").fullmatch(
        "t\\1"
    )  # an escaped backslash is no backreference


def test_offsets_of_a_consumer_group_expire_and_the_empty_group_goes() -> None:
    h = GroupHarness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    hb(h, "m1", 0)
    h.call(
        "offset_commit",
        "g",
        1,
        "m1",
        [OffsetCommitPartition("t", 0, 3, -1, ""), OffsetCommitPartition("gone", 0, 4, -1, "")],
    )
    for _ in range(7):  # 70 s, the member heartbeating
        h.advance(10_000)
        hb(h, "m1", 1)
    # A subscribed topic's offset stays; the other expires by its commit time.
    assert set(h.coord.committed_offsets("g")) == {("t", 0)}
    assert "g" in h.coord.consumer.groups
    hb(h, "m1", -1)
    h.advance(10_000)
    # Empty: nothing keeps the old commit, and the group goes with its last offset.
    assert h.coord.committed_offsets("g") == {} and "g" not in h.coord.consumer.groups
    fresh = h.replayed()
    assert "g" not in fresh.consumer.groups and fresh.committed_offsets("g") == {}


def test_offset_delete_refuses_the_topics_members_subscribe_to() -> None:
    h = GroupHarness()
    hb(h, "m1", 0)
    commit = [OffsetCommitPartition("t", 0, 3, -1, ""), OffsetCommitPartition("old", 0, 4, -1, "")]
    h.call("offset_commit", "g", 1, "m1", commit)
    r = h.call("offset_delete", "g", [("t", 0), ("old", 0)]).result
    assert r.error_code == 0
    assert [(p.topic, p.error_code) for p in r.partitions] == [
        ("t", GroupSubscribedToTopicError.code),
        ("old", 0),
    ]
    assert set(h.coord.committed_offsets("g")) == {("t", 0)}
