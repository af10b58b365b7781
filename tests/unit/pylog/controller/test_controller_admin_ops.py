"""The sans-IO controller's admin decisions: ElectLeaders (Kafka's
``processReplicaLeaderElection``), partition reassignment (KIP-455's phases, the shapes of
Kafka's ReassignPartitionsIntegrationTest) and topic deletion that waits for down replicas
(TopicDeletionManager). The 'service' here applies every planned write at once."""

from __future__ import annotations

from pylog.cluster import election as el
from pylog.cluster import zk_data as z
from pylog.controller import core as c
from pylog.controller.core import ControllerCore, Plan, StateWrite, reassign_to


def reg(b: int, epoch: int = 100) -> tuple[z.BrokerRegistration, int]:
    return z.BrokerRegistration(b, (z.EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)), epoch + b


def brokers(*ids: int, epoch: int = 100) -> dict[int, tuple[z.BrokerRegistration, int]]:
    return {b: reg(b, epoch) for b in ids}


def topic(parts: dict[int, tuple[int, ...]]) -> z.TopicAssignment:
    return z.TopicAssignment({p: z.ReplicaAssignment(r) for p, r in parts.items()})


def apply(core: ControllerCore, writes: list[StateWrite]) -> None:
    for w in writes:
        core.written(w, w.expected_version + 1 if w.expected_version >= 0 else 0)


def make(live=(1, 2, 3), parts=None, unclean: bool = False) -> ControllerCore:
    core = ControllerCore(1, 5, lambda t: unclean)
    apply(core, core.startup(brokers(*live), {}, {}))
    if parts is not None:
        apply(core, core.topics_changed({"t": topic(parts)}))
    core.requests()
    return core


# -- ElectLeaders --------------------------------------------------------------------------

def test_preferred_election_outcomes_per_partition() -> None:
    core = make(parts={0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    core.states[("t", 0)] = el.LeaderAndIsr(2, 3, (2, 3, 1), partition_epoch=4)  # can move
    core.states[("t", 2)] = el.LeaderAndIsr(1, 1, (1, 2), partition_epoch=2)  # 3 not in ISR
    writes, out = core.elect_leaders([("t", 0), ("t", 1), ("t", 2), ("t", 9), ("u", 0)],
                                     c.PREFERRED)
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(1, 4, (2, 3, 1), partition_epoch=4),
                                 4, "preferred")]
    assert out[("t", 1)] == (c.ELECTION_NOT_NEEDED, None)
    assert out[("t", 2)][0] == c.PREFERRED_LEADER_NOT_AVAILABLE and "not in the ISR" in out[("t", 2)][1]
    assert out[("t", 9)][0] == out[("u", 0)][0] == c.UNKNOWN_TOPIC_OR_PARTITION
    assert ("t", 0) not in out


def test_preferred_replica_dead_is_not_available() -> None:
    core = make(parts={0: (1, 2)})
    apply(core, core.brokers_changed(brokers(2, 3))[0])
    assert core.states[("t", 0)].leader == 2
    writes, out = core.elect_leaders([("t", 0)], c.PREFERRED)
    assert writes == [] and out[("t", 0)][0] == c.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_only_for_leaderless_partitions_and_outside_the_isr() -> None:
    core = make(parts={0: (1, 2), 1: (2, 3)})
    core.states[("t", 0)] = el.LeaderAndIsr(1, 3, (1,), partition_epoch=4)
    apply(core, core.brokers_changed(brokers(2, 3))[0])  # 1 dies: offline, unclean off
    assert core.states[("t", 0)].leader == el.NO_LEADER
    writes, out = core.elect_leaders([("t", 0), ("t", 1)], c.UNCLEAN)
    assert out == {("t", 1): (c.ELECTION_NOT_NEEDED, None)}
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(
        2, 5, (2,), z.LEADER_RECOVERY_RECOVERING, partition_epoch=5), 5, "unclean")]
    # Nobody live at all: ELIGIBLE_LEADERS_NOT_AVAILABLE.
    core2 = make(parts={0: (1,)})
    apply(core2, core2.brokers_changed(brokers(2, 3))[0])
    writes, out = core2.elect_leaders([("t", 0)], c.UNCLEAN)
    assert writes == [] and out[("t", 0)][0] == c.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_unclean_election_prefers_a_live_isr_member() -> None:
    core = make(parts={0: (1, 2, 3)})
    core.states[("t", 0)] = el.LeaderAndIsr(el.NO_LEADER, 2, (1, 3), partition_epoch=3)
    writes, _ = core.elect_leaders([("t", 0)], c.UNCLEAN)
    assert writes[0].new == el.LeaderAndIsr(1, 3, (1, 3), partition_epoch=3)  # clean


def test_election_skips_topics_being_deleted() -> None:
    core = make(parts={0: (1, 2)})
    core.delete_topics(["t"])
    writes, out = core.elect_leaders([("t", 0)], c.PREFERRED)
    assert writes == [] and out[("t", 0)][0] == c.INVALID_TOPIC


def test_lost_election_write_is_decided_again() -> None:
    core = make(parts={0: (1, 2, 3)})
    core.states[("t", 0)] = el.LeaderAndIsr(2, 3, (2, 3, 1), partition_epoch=4)
    writes, _ = core.elect_leaders([("t", 0)], c.PREFERRED)
    # The leader shrank the ISR meanwhile (1 left it): the preferred replica is not eligible.
    core.reread(("t", 0), el.LeaderAndIsr(2, 3, (2, 3), partition_epoch=5))
    assert core.replan(("t", 0), writes[0].kind) is None
    core.reread(("t", 0), el.LeaderAndIsr(2, 3, (2, 1), partition_epoch=6))
    assert core.replan(("t", 0), "preferred") == StateWrite(
        ("t", 0), el.LeaderAndIsr(1, 4, (2, 1), partition_epoch=6), 6, "preferred")


# -- reassignment --------------------------------------------------------------------------

def run(core: ControllerCore, plan: Plan):
    apply(core, plan.writes)
    return core.requests()


def test_reassign_to_matches_kafka() -> None:
    ra = reassign_to(z.ReplicaAssignment((1, 2, 3)), [3, 4, 5])
    assert ra == z.ReplicaAssignment((3, 4, 5, 1, 2), (4, 5), (1, 2))
    assert ra.target_replicas == (3, 4, 5)
    # A new target replaces the ongoing one; the original replicas cancel it.
    assert reassign_to(ra, [1, 2, 4]) == z.ReplicaAssignment((1, 2, 4, 3), (4,), (3,))
    assert reassign_to(ra, [1, 2, 3]) == z.ReplicaAssignment((1, 2, 3))


def test_growing_rf1_to_rf3_runs_phase_a_then_b() -> None:
    core = make(parts={0: (1,)})
    plan, out = core.alter_reassignments({("t", 0): [1, 2, 3]})
    assert out == {("t", 0): (0, None)}
    # Phase A: RS = TRS + ORS written first, leader epoch bumped, every replica told.
    assert plan.assignments_before == {"t"} and plan.assignments_after == set()
    ra = core.assignments["t"].partitions[0]
    assert ra == z.ReplicaAssignment((1, 2, 3), (2, 3), ())
    assert plan.writes == [StateWrite(("t", 0), el.LeaderAndIsr(1, 1, (1,)), 0, "reassign")]
    req = run(core, plan)
    assert sorted(req.leader_and_isr) == [1, 2, 3]
    info = req.leader_and_isr[2][0]
    assert info.replicas == (1, 2, 3) and info.adding == (2, 3) and info.removing == ()
    assert core.reassignments() == {("t", 0): ra}
    # One new replica joins the ISR: not complete yet.
    core.isr_changed({("t", 0): el.LeaderAndIsr(1, 1, (1, 2), partition_epoch=2)})
    assert core.check_reassignments().empty()
    # Both joined: phase B: RS = TRS, one more epoch, nothing to stop, RS written last.
    core.isr_changed({("t", 0): el.LeaderAndIsr(1, 1, (1, 2, 3), partition_epoch=3)})
    plan = core.check_reassignments()
    assert plan.assignments_after == {"t"} and plan.stops == {}
    assert plan.writes == [StateWrite(("t", 0), el.LeaderAndIsr(1, 2, (1, 2, 3), partition_epoch=3),
                                      3, "reassign")]
    req = run(core, plan)
    assert core.assignments["t"].partitions[0] == z.ReplicaAssignment((1, 2, 3))
    assert core.reassignments() == {}
    assert req.leader_and_isr[3][0].adding == ()


def test_moving_away_from_the_leader_elects_from_the_target_and_deletes_removed() -> None:
    core = make(live=(1, 2, 3, 4), parts={0: (1, 2)})
    plan, _ = core.alter_reassignments({("t", 0): [3, 4]})
    run(core, plan)
    assert core.assignments["t"].partitions[0] == z.ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))
    core.isr_changed({("t", 0): el.LeaderAndIsr(1, 1, (1, 2, 3, 4), partition_epoch=5)})
    plan = core.check_reassignments()
    # Leader 1 is not a target: the first live target in the ISR leads; ISR = target only.
    assert plan.writes[0].new == el.LeaderAndIsr(3, 2, (3, 4), partition_epoch=5)
    assert plan.stops == {1: [(("t", 0), True)], 2: [(("t", 0), True)]}
    req = run(core, plan)
    assert sorted(req.leader_and_isr) == [3, 4]
    assert core.replicas(("t", 0)) == (3, 4)


def test_only_removing_a_replica_completes_at_once() -> None:
    core = make(parts={0: (1, 2, 3)})
    plan, _ = core.alter_reassignments({("t", 0): [1, 2]})
    assert plan.assignments_before == set() and plan.assignments_after == {"t"}
    assert plan.writes[0].new == el.LeaderAndIsr(1, 1, (1, 2))
    assert plan.stops == {3: [(("t", 0), True)]}


def test_cancel_reverts_and_deletes_the_added_replica() -> None:
    core = make(parts={0: (1, 2)})
    run(core, core.alter_reassignments({("t", 0): [1, 3]})[0])
    assert core.reassignments()[("t", 0)] == z.ReplicaAssignment((1, 3, 2), (3,), (2,))
    plan, out = core.alter_reassignments({("t", 0): None})
    assert out == {("t", 0): (0, None)}
    assert plan.stops == {3: [(("t", 0), True)]}
    run(core, plan)
    assert core.assignments["t"].partitions[0] == z.ReplicaAssignment((1, 2))
    # Nothing left to cancel.
    assert core.alter_reassignments({("t", 0): None})[1] == {
        ("t", 0): (c.NO_REASSIGNMENT_IN_PROGRESS, None)}


def test_invalid_targets_are_refused() -> None:
    core = make(parts={0: (1, 2)})
    _, out = core.alter_reassignments({("t", 0): [], ("t", 1): [1, 1]})
    assert out[("t", 0)][0] == c.INVALID_REPLICA_ASSIGNMENT and "Empty" in out[("t", 0)][1]
    assert out[("t", 1)][0] == c.INVALID_REPLICA_ASSIGNMENT and "Duplicate" in out[("t", 1)][1]
    _, out = core.alter_reassignments({("t", 0): [1, 7], ("t", 1): [-1]})
    assert out[("t", 0)][0] == c.INVALID_REPLICA_ASSIGNMENT and "not alive" in out[("t", 0)][1]
    assert out[("t", 1)][0] == c.INVALID_REPLICA_ASSIGNMENT
    _, out = core.alter_reassignments({("t", 5): [1, 2], ("x", 0): [1]})
    assert out == {("t", 5): (c.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
                   ("x", 0): (c.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")}
    assert core.reassignments() == {}


def test_failover_resumes_an_ongoing_reassignment() -> None:
    core = ControllerCore(2, 6, lambda t: False)
    ongoing = z.TopicAssignment({0: z.ReplicaAssignment((1, 2, 3), (3,), ())})
    apply(core, core.startup(brokers(1, 2, 3), {"t": ongoing},
                             {("t", 0): el.LeaderAndIsr(1, 2, (1, 2), partition_epoch=4)}))
    plan = core.resume_reassignments()
    assert plan.writes[0].new.leader_epoch == 3 and plan.assignments_after == set()
    core.requests()
    run(core, plan)
    core.isr_changed({("t", 0): el.LeaderAndIsr(1, 3, (1, 2, 3), partition_epoch=6)})
    assert core.check_reassignments().assignments_after == {"t"}


# -- deletion with a replica down ----------------------------------------------------------

def test_deletion_waits_for_a_down_replica_and_resumes_when_it_returns() -> None:
    core = make(parts={0: (1, 2), 1: (2, 3)})
    apply(core, core.brokers_changed(brokers(1, 2))[0])  # 3 is down
    req = core.delete_topics(["t"])
    assert sorted(req.stop_replica) == [1, 2]
    assert core.ineligible_for_deletion() == {"t": [3]}
    assert core.replicas_deleted(1, [("t", 0)]) == []
    assert core.replicas_deleted(2, [("t", 0), ("t", 1)]) == []  # 3's replica of t-1 is left
    # Asked again (the /admin/delete_topics watch fires again): nothing new is sent.
    assert core.delete_topics(["t"]).empty()
    # 3 returns: it gets StopReplica(delete) for its replica; its answer completes it.
    _, new, _ = core.brokers_changed(brokers(1, 2, 3))
    assert core.resume_deletions(new).stop_replica == {3: [(("t", 1), True)]}
    assert core.requests(full_to=new).leader_and_isr == {}  # the topic is not started again
    assert core.replicas_deleted(3, [("t", 1)]) == ["t"]
    core.topic_deleted("t")
    assert core.deletion_pending == {} and core.partitions() == []


def test_failover_during_deletion_starts_it_again() -> None:
    core = ControllerCore(2, 6, lambda t: False)
    core.startup(brokers(1, 2), {"t": topic({0: (1, 2)})},
                 {("t", 0): el.LeaderAndIsr(1, 0, (1, 2))}, deleting=["t"])
    req = core.delete_topics(["t"])
    assert sorted(req.stop_replica) == [1, 2]
