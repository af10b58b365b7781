"""Classic group membership (pylog.group.coordinator): JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, timers and static members, driven with a manual clock.

The cases follow the kinds Kafka's GroupMetadataManagerTest / ClassicGroupTest check (each
error in the state Kafka returns it); the tests themselves are our own.
"""

from __future__ import annotations

import pytest
from _harness.groups import GroupHarness, subscription

from pylog.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from pylog.group.classic import (
    LEGAL_PREVIOUS,
    ClassicGroup,
    GroupState,
    IllegalStateTransitionError,
)
from pylog.group.config import GroupCoordinatorConfig, partition_for

S = GroupState


# --------------------------------------------------------------------------- basics


def test_partition_for_matches_java_string_hash_code() -> None:
    # "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE,
    # which Kafka's Utils.abs maps to 0.
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("", 50) == 0
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(100))


def test_config_refuses_inconsistent_values() -> None:
    with pytest.raises(ValueError):
        GroupCoordinatorConfig(min_session_timeout_ms=10, max_session_timeout_ms=5)
    with pytest.raises(ValueError):
        GroupCoordinatorConfig(max_size=0)


def test_transition_table_refuses_illegal_moves() -> None:
    g = ClassicGroup("g", 0)
    with pytest.raises(IllegalStateTransitionError):
        g.transition_to(S.STABLE, 1)
    g.transition_to(S.PREPARING_REBALANCE, 5)
    assert (g.state, g.previous_state, g.state_timestamp_ms) == (S.PREPARING_REBALANCE, S.EMPTY, 5)
    assert S.STABLE not in LEGAL_PREVIOUS[S.EMPTY] and S.EMPTY not in LEGAL_PREVIOUS[S.STABLE]


# --------------------------------------------------------------------------- JoinGroup


def test_member_id_required_then_join_after_initial_delay() -> None:
    h = GroupHarness()
    first = h.join("g")
    assert first.done and first.result.error_code == MemberIdRequiredError.code
    mid = first.result.member_id
    assert mid == "client-u1"
    second = h.join("g", mid)
    assert not second.done and h.coord.group("g").state == S.PREPARING_REBALANCE
    h.advance(2_999)
    assert not second.done  # group.initial.rebalance.delay.ms is 3000
    h.advance(1)
    r = second.result
    assert (r.error_code, r.generation_id, r.protocol_type, r.protocol_name, r.leader, r.member_id) == (
        0, 1, "consumer", "range", mid, mid)
    assert [m.member_id for m in r.members] == [mid]
    assert h.coord.group("g").state == S.COMPLETING_REBALANCE


def test_pending_member_id_expires_after_session_timeout() -> None:
    h = GroupHarness()
    mid = h.join("g").result.member_id
    h.advance(10_000)
    assert mid not in h.coord.group("g").pending_members
    assert h.join("g", mid).result.error_code == UnknownMemberIdError.code


def test_old_join_versions_add_the_member_at_once() -> None:
    h = GroupHarness()
    p = h.join("g", version=3)
    assert not p.done
    h.advance(3_000)
    assert p.result.error_code == 0 and p.result.member_id.startswith("client-")


def test_initial_delay_is_extended_by_new_members_up_to_the_rebalance_timeout() -> None:
    h = GroupHarness(initial_rebalance_delay_ms=3_000)
    a = h.join_new("g", client_id="a", rebalance=7_000)
    h.advance(2_000)
    b = h.join_new("g", client_id="b", rebalance=7_000)
    h.advance(1_000)  # first delay ends, but b joined: wait min(3000, remaining 4000)
    assert not a.done
    h.advance(3_000)
    assert a.done and b.done
    assert a.result.generation_id == b.result.generation_id == 1
    assert a.result.leader == a.result.member_id
    assert len(a.result.members) == 2 and b.result.members == []


def test_join_validation_errors() -> None:
    h = GroupHarness()
    assert h.join("").result.error_code == InvalidGroupIdError.code
    assert h.join("g", session=5_999).result.error_code == InvalidSessionTimeoutError.code
    assert h.join("g", session=1_800_001).result.error_code == InvalidSessionTimeoutError.code
    # A member id for a group that does not exist.
    assert h.join("nope", "someone").result.error_code == UnknownMemberIdError.code
    # An empty group needs a protocol type and at least one protocol.
    assert h.join("g", protocol_type="").result.error_code == InconsistentGroupProtocolError.code
    assert h.join("g", protocols=[]).result.error_code == InconsistentGroupProtocolError.code
    assert h.coord.group("g") is None  # refused joins create nothing
    assert h.log == []


def test_inconsistent_protocols_are_refused_once_the_group_has_members() -> None:
    h = GroupHarness()
    h.stable_group("g", 1)
    other_type = h.join_new("g", protocol_type="connect")
    assert other_type.result.error_code == InconsistentGroupProtocolError.code
    no_common = h.join_new("g", protocols=[("roundrobin", b"")])
    assert no_common.result.error_code == InconsistentGroupProtocolError.code


def test_protocol_selection_by_votes_among_protocols_all_support() -> None:
    h = GroupHarness()
    both = [("roundrobin", b"x"), ("range", b"y")]
    p1 = h.join_new("g", client_id="a", protocols=both)
    p2 = h.join_new("g", client_id="b", protocols=[("range", b"y"), ("roundrobin", b"x")])
    p3 = h.join_new("g", client_id="c", protocols=[("roundrobin", b"x"), ("sticky", b""), ("range", b"y")])
    h.advance(3_000)
    assert not p1.done  # the later joiners extended the initial delay once
    h.advance(3_000)
    assert p1.result.protocol_name == p2.result.protocol_name == p3.result.protocol_name == "roundrobin"
    # The leader's member list carries each member's metadata for the chosen protocol.
    assert {m.metadata for m in p1.result.members} == {b"x"}


def test_unknown_member_and_wrong_instance_on_join() -> None:
    h = GroupHarness()
    h.stable_group("g", 1)
    assert h.join("g", "ghost").result.error_code == UnknownMemberIdError.code


def test_group_max_size() -> None:
    h = GroupHarness(max_size=2)
    h.stable_group("g", 2)
    third = h.join_new("g", client_id="c3")
    assert third.result.error_code == GroupMaxSizeReachedError.code


def test_group_max_size_counts_joined_members_during_a_rebalance() -> None:
    h = GroupHarness(max_size=1)
    first = h.join_new("g", client_id="a")
    second = h.join_new("g", client_id="b")
    assert second.result.error_code == GroupMaxSizeReachedError.code
    h.advance(3_000)
    assert first.result.error_code == 0


def test_follower_rejoin_in_stable_with_same_metadata_gets_the_current_generation() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    p = h.join("g", follower, client_id="c1")
    r = p.result
    assert (r.error_code, r.generation_id, r.leader, r.members) == (0, 1, leader, [])
    assert h.coord.group("g").state == S.STABLE


def test_leader_rejoin_in_stable_starts_a_rebalance() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    p = h.join("g", leader, client_id="c0")
    assert not p.done and h.coord.group("g").state == S.PREPARING_REBALANCE
    assert h.call("heartbeat", "g", 1, follower) == RebalanceInProgressError.code
    q = h.join("g", follower, client_id="c1")
    # Everyone rejoined: the next generation is chosen at once (not the initial rebalance).
    assert p.result.generation_id == q.result.generation_id == 2


def test_changed_subscription_in_stable_starts_a_rebalance() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    p = h.join("g", follower, protocols=[("range", subscription("t", "u"))], client_id="c1")
    assert not p.done and h.coord.group("g").state == S.PREPARING_REBALANCE


# --------------------------------------------------------------------------- SyncGroup


def test_sync_parks_followers_until_the_leader_assignment_is_stored() -> None:
    h = GroupHarness()
    a = h.join_new("g", client_id="a")
    b = h.join_new("g", client_id="b")
    h.advance(6_000)  # two joiners: the initial delay runs twice
    leader, follower = a.result.member_id, b.result.member_id
    fs = h.call("sync_group", "g", 1, follower)
    assert not fs.done
    # The leader's record must be durable before anyone gets an assignment.
    ls = h.coord.sync_group("g", 1, leader, [(leader, b"LA")])  # follower left out: empty
    assert not ls.done and not fs.done
    h.flush()
    assert ls.result.assignment == b"LA" and fs.result.assignment == b""
    assert (ls.result.protocol_type, ls.result.protocol_name) == ("consumer", "range")
    assert h.coord.group("g").state == S.STABLE
    # In Stable a sync just returns the stored assignment.
    again = h.call("sync_group", "g", 1, leader)
    assert again.result.assignment == b"LA"


def test_sync_errors_in_kafka_order() -> None:
    h = GroupHarness()
    assert h.call("sync_group", "nope", 1, "m").result.error_code == UnknownMemberIdError.code
    assert h.call("sync_group", "", 1, "m").result.error_code == InvalidGroupIdError.code
    leader, _ = h.stable_group("g", 2)
    assert h.call("sync_group", "g", 1, "ghost").result.error_code == UnknownMemberIdError.code
    assert h.call("sync_group", "g", 7, leader).result.error_code == IllegalGenerationError.code
    bad = h.call("sync_group", "g", 1, leader, protocol_type="consumer", protocol_name="roundrobin")
    assert bad.result.error_code == InconsistentGroupProtocolError.code
    h.join("g", leader, client_id="c0")  # leader rejoins: PreparingRebalance
    assert h.call("sync_group", "g", 1, leader).result.error_code == RebalanceInProgressError.code


def test_failed_assignment_write_propagates_the_error_and_rebalances() -> None:
    h = GroupHarness()
    a = h.join_new("g", client_id="a")
    b = h.join_new("g", client_id="b")
    h.advance(6_000)  # two joiners: the initial delay runs twice
    fs = h.call("sync_group", "g", 1, b.result.member_id)
    h.fail_code = 6  # NOT_LEADER_OR_FOLLOWER from the partition append
    ls = h.call("sync_group", "g", 1, a.result.member_id, [])
    assert ls.result.error_code == fs.result.error_code == NotCoordinatorError.code
    assert h.coord.group("g").state == S.PREPARING_REBALANCE


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = GroupHarness()
    a = h.join_new("g", client_id="a", rebalance=20_000)
    b = h.join_new("g", client_id="b", rebalance=20_000)
    h.advance(6_000)  # two joiners: the initial delay runs twice
    leader, follower = a.result.member_id, b.result.member_id
    h.call("sync_group", "g", 1, leader, [(leader, b"x"), (follower, b"y")])
    # Keep the leader alive; the follower heartbeats but never syncs.
    for _ in range(4):
        h.advance(5_000)
        assert h.call("heartbeat", "g", 1, leader) in (0, RebalanceInProgressError.code)
        h.call("heartbeat", "g", 1, follower)
    assert not h.coord.group("g").has_member(follower)
    assert h.coord.group("g").state == S.PREPARING_REBALANCE


# --------------------------------------------------------------------------- Heartbeat and timeouts


def test_heartbeat_errors_by_state() -> None:
    h = GroupHarness()
    assert h.call("heartbeat", "nope", 1, "m") == UnknownMemberIdError.code
    a = h.join_new("g", client_id="a")
    mid = a.result.member_id if a.done else h.coord.group("g").leader_id
    assert h.call("heartbeat", "g", 0, mid) == RebalanceInProgressError.code  # PreparingRebalance
    h.advance(3_000)
    assert h.call("heartbeat", "g", 1, mid) == 0  # CompletingRebalance
    assert h.call("heartbeat", "g", 2, mid) == IllegalGenerationError.code
    assert h.call("heartbeat", "g", 1, "ghost") == UnknownMemberIdError.code
    assert h.call("heartbeat", "g", 1, mid, "not-static") == UnknownMemberIdError.code


def test_session_timeout_removes_a_silent_member_and_rebalances() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    for _ in range(2):
        h.advance(4_000)
        assert h.call("heartbeat", "g", 1, leader) == 0
    h.advance(4_000)
    # The follower said nothing for 12 s > its 10 s session timeout.
    assert not h.coord.group("g").has_member(follower)
    assert h.call("heartbeat", "g", 1, leader) == RebalanceInProgressError.code
    p = h.join("g", leader, client_id="c0")
    assert p.result.generation_id == 2 and [m.member_id for m in p.result.members] == [leader]


def test_everyone_gone_leaves_an_empty_group_with_a_record() -> None:
    h = GroupHarness()
    h.stable_group("g", 1)
    h.advance(10_000)
    g = h.coord.group("g")
    assert g.state == S.EMPTY and g.generation_id == 2 and g.protocol_name is None
    loaded = h.replayed().group("g")
    assert loaded.state == S.EMPTY and loaded.generation_id == 2 and not loaded.members


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2, rebalance=15_000, session=30_000)
    p = h.join("g", leader, client_id="c0", rebalance=15_000, session=30_000)
    h.call("heartbeat", "g", 1, follower)
    h.advance(15_000)
    assert p.result.generation_id == 2 and [m.member_id for m in p.result.members] == [leader]
    assert h.call("heartbeat", "g", 1, follower) == UnknownMemberIdError.code


def test_leader_that_does_not_rejoin_is_replaced() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2, rebalance=15_000, session=30_000)
    p = h.join("g", follower, protocols=[("range", subscription("x"))], client_id="c1",
               rebalance=15_000, session=30_000)
    h.advance(15_000)
    assert p.result.leader == follower and p.result.generation_id == 2


# --------------------------------------------------------------------------- LeaveGroup


def test_leave_group_batch_with_per_member_errors() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    r = h.call("leave_group", "g", [(follower, None), ("ghost", None), ("", "unknown-instance")])
    assert r.error_code == 0
    assert [m.error_code for m in r.members] == [0, UnknownMemberIdError.code, UnknownMemberIdError.code]
    assert h.coord.group("g").state == S.PREPARING_REBALANCE
    missing = h.call("leave_group", "nope", [("a", None)])
    assert missing.error_code == 0 and missing.members[0].error_code == UnknownMemberIdError.code


def test_last_member_leaving_empties_the_group() -> None:
    h = GroupHarness()
    (only,) = h.stable_group("g", 1)
    assert h.call("leave_group", "g", [(only, None)]).members[0].error_code == 0
    assert h.coord.group("g").state == S.EMPTY


def test_leave_of_a_parked_joiner_answers_its_join() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    p = h.join("g", leader, client_id="c0")
    h.call("leave_group", "g", [(leader, None)])
    assert p.result.error_code == UnknownMemberIdError.code


# --------------------------------------------------------------------------- static membership


def test_static_member_restart_in_stable_keeps_generation_and_assignment() -> None:
    h = GroupHarness()
    a = h.join("g", instance="i-a", client_id="a")
    b = h.join("g", instance="i-b", client_id="b")
    assert not a.done  # static members skip MEMBER_ID_REQUIRED
    h.advance(6_000)  # two joiners: the initial delay runs twice
    old_a, old_b = a.result.member_id, b.result.member_id
    assert old_a == "i-a-u1"
    h.call("sync_group", "g", 1, old_a, [(old_a, b"A"), (old_b, b"B")])
    h.call("sync_group", "g", 1, old_b)
    # The follower's process restarts and rejoins with an empty member id.
    again = h.join("g", instance="i-b", client_id="b")
    r = again.result
    assert r.error_code == 0 and r.generation_id == 1 and r.member_id != old_b and r.leader == old_a
    g = h.coord.group("g")
    assert g.state == S.STABLE and g.members[r.member_id].assignment == b"B"
    # The old process is fenced; the new id syncs straight to its assignment.
    assert h.call("heartbeat", "g", 1, old_b, "i-b") == FencedInstanceIdError.code
    assert h.call("sync_group", "g", 1, r.member_id, group_instance_id="i-b").result.assignment == b"B"
    # The replacement is persisted: a reload knows the new id.
    assert r.member_id in h.replayed().group("g").members


@pytest.mark.parametrize("version, skip", [(9, True), (8, False)])
def test_static_leader_restart_in_stable(version: int, skip: bool) -> None:
    h = GroupHarness()
    a = h.join("g", instance="i-a", client_id="a", version=version)
    h.advance(3_000)
    old = a.result.member_id
    h.call("sync_group", "g", 1, old, [(old, b"A")])
    r = h.join("g", instance="i-a", client_id="a", version=version).result
    assert r.error_code == 0 and r.generation_id == 1 and r.skip_assignment is skip
    if skip:
        # KIP-814: the leader gets the members but must not compute a new assignment.
        assert r.leader == r.member_id and [m.member_id for m in r.members] == [r.member_id]
    else:
        # Older leaders are told the previous leader id so that they act as followers.
        assert r.leader == old and r.members == []


def test_static_member_replacement_fences_the_parked_old_join() -> None:
    h = GroupHarness()
    x = h.join("g", instance="i-x")
    y = h.join("g", instance="i-x")  # same instance id while the first join is parked
    assert x.result.error_code == FencedInstanceIdError.code
    h.advance(3_000)
    assert y.result.error_code == 0 and y.result.member_id != x.result.member_id


def test_static_member_with_changed_protocol_triggers_a_rebalance() -> None:
    h = GroupHarness()
    a = h.join("g", instance="i-a", client_id="a", protocols=[("range", b""), ("roundrobin", b"")])
    h.advance(3_000)
    h.call("sync_group", "g", 1, a.result.member_id, [])
    p = h.join("g", instance="i-a", client_id="a", protocols=[("roundrobin", b""), ("range", b"")])
    # Only member, it changes what the group would select: rebalance, all rejoined.
    assert p.result.generation_id == 2 and p.result.protocol_name == "roundrobin"


def test_static_leave_by_instance_id_and_fencing_on_leave() -> None:
    h = GroupHarness()
    a = h.join("g", instance="i-a", client_id="a")
    b = h.join("g", instance="i-b", client_id="b")
    h.advance(6_000)  # two joiners: the initial delay runs twice
    r = h.call("leave_group", "g", [("wrong-id", "i-a"), ("", "i-b")])
    assert [m.error_code for m in r.members] == [FencedInstanceIdError.code, 0]
    assert h.coord.group("g").has_member(a.result.member_id)
    assert not h.coord.group("g").has_member(b.result.member_id)


def test_static_members_are_not_dropped_for_not_rejoining() -> None:
    h = GroupHarness()
    a = h.join("g", instance="i-a", client_id="a", session=60_000, rebalance=10_000)
    b = h.join("g", instance="i-b", client_id="b", session=60_000, rebalance=10_000)
    h.advance(6_000)  # two joiners: the initial delay runs twice
    ida, idb = a.result.member_id, b.result.member_id
    h.call("sync_group", "g", 1, ida, [])
    h.call("sync_group", "g", 1, idb)
    p = h.join("g", ida, instance="i-a", client_id="a", session=60_000, rebalance=10_000,
               protocols=[("range", subscription("other"))])
    h.advance(10_000)
    assert p.result.generation_id == 2
    assert h.coord.group("g").has_member(idb)  # static: kept until its session expires


# --------------------------------------------------------------------------- loading


def test_requests_while_loading_and_after_unload() -> None:
    h = GroupHarness()
    leader, follower = h.stable_group("g", 2)
    parked = h.join("g", leader, client_id="c0")
    assert not parked.done
    log_before_unload = list(h.log)
    h.coord.unload()
    assert parked.result.error_code == NotCoordinatorError.code
    h.coord.begin_load()
    assert h.join("g").result.error_code == CoordinatorLoadInProgressError.code
    assert h.call("sync_group", "g", 1, leader).result.error_code == CoordinatorLoadInProgressError.code
    assert h.call("heartbeat", "g", 1, leader) == 0  # Kafka answers heartbeats with NONE
    assert h.call("leave_group", "g", [(leader, None)]).error_code == CoordinatorLoadInProgressError.code
    for key, value in log_before_unload:
        h.coord.replay(key, value)
    h.coord.complete_load()
    g = h.coord.group("g")
    assert g.state == S.STABLE and g.members[leader].assignment == f"A-{leader}".encode()
    # Loaded members must heartbeat within their session timeout or go.
    h.advance(10_000)
    assert h.coord.group("g").state in (S.EMPTY, S.PREPARING_REBALANCE)


def test_new_member_parked_too_long_is_dropped_with_unknown_member_id() -> None:
    h = GroupHarness()
    (old,) = h.stable_group("g", 1, session=600_000, rebalance=600_000)
    newcomer = h.join_new("g", client_id="late", session=600_000, rebalance=600_000)
    assert not newcomer.done and h.coord.group("g").state == S.PREPARING_REBALANCE
    h.advance(299_000)
    assert not newcomer.done
    h.advance(1_000)  # the fixed 5-minute new-member join timeout
    assert newcomer.result.error_code == UnknownMemberIdError.code
    assert h.call("heartbeat", "g", 1, old) == RebalanceInProgressError.code
