"""The sans-IO controller: Kafka's PartitionStateMachineTest / ControllerIntegrationTest cases
without sockets or ZooKeeper (the 'service' here applies every planned write at once)."""

from __future__ import annotations

from pylog.cluster import election as el
from pylog.cluster import zk_data as z
from pylog.controller.core import LEADER_DURING_DELETE, ControllerCore, StateWrite


def reg(b: int, epoch: int = 100) -> tuple[z.BrokerRegistration, int]:
    return z.BrokerRegistration(b, (z.EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)), epoch + b


def brokers(*ids: int, epoch: int = 100) -> dict[int, tuple[z.BrokerRegistration, int]]:
    return {b: reg(b, epoch) for b in ids}


def topic(parts: dict[int, tuple[int, ...]]) -> z.TopicAssignment:
    return z.TopicAssignment({p: z.ReplicaAssignment(r) for p, r in parts.items()})


def apply(core: ControllerCore, writes: list[StateWrite]) -> None:
    for w in writes:
        core.written(w, w.expected_version + 1 if w.expected_version >= 0 else 0)


def make(unclean: bool = False, live=(1, 2, 3)) -> ControllerCore:
    core = ControllerCore(1, 5, lambda t: unclean)
    apply(core, core.startup(brokers(*live), {}, {}))
    core.requests()
    return core


def test_new_topic_leader_is_first_live_replica_and_isr_all_live() -> None:
    core = make(live=(1, 2))
    writes = core.topics_changed({"t": topic({0: (3, 2, 1), 1: (1, 2, 3)})})
    apply(core, writes)
    assert core.states[("t", 0)] == el.LeaderAndIsr(2, 0, (2, 1), partition_epoch=0)
    assert core.states[("t", 1)] == el.LeaderAndIsr(1, 0, (1, 2), partition_epoch=0)
    assert all(w.expected_version == -1 for w in writes)
    req = core.requests()
    # LeaderAndIsr to live replicas only, is_new set; UpdateMetadata to every live broker.
    assert sorted(req.leader_and_isr) == [1, 2]
    assert all(i.is_new for i in req.leader_and_isr[1])
    assert sorted(req.update_metadata) == [1, 2]
    assert req.update_metadata[1][0].offline == (3,)


def test_new_partition_with_no_live_replica_waits_for_a_broker() -> None:
    core = make(live=(1,))
    assert core.topics_changed({"t": topic({0: (2, 3)})}) == []
    writes, new, dead = core.brokers_changed(brokers(1, 3))
    assert (new, dead) == ({3}, set())
    apply(core, writes)
    assert core.states[("t", 0)].leader == 3 and core.states[("t", 0)].isr == (3,)


def test_leader_failure_elects_next_isr_member_and_bumps_epoch() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3)})}))
    core.requests()
    writes, new, dead = core.brokers_changed(brokers(2, 3))
    assert dead == {1} and not new
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(2, 1, (2, 3)), 0)]
    apply(core, writes)
    req = core.requests(notify_all=True)
    assert sorted(req.leader_and_isr) == [2, 3]
    assert req.leader_and_isr[2][0].state.leader_epoch == 1
    assert sorted(req.update_metadata) == [2, 3]


def test_follower_failure_shrinks_isr_keeps_leader() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3)})}))
    writes, _, _ = core.brokers_changed(brokers(1, 2))
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(1, 1, (1, 2)), 0)]


def test_no_live_isr_member_unclean_off_stays_offline() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2)})}))
    # 2 leaves the ISR first, then 1 (the leader, last ISR member) dies.
    core.states[("t", 0)] = el.LeaderAndIsr(1, 3, (1,), partition_epoch=4)
    writes, _, _ = core.brokers_changed(brokers(2, 3))
    # The dead leader is recorded (leader -1) but the ISR keeps its last member.
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(-1, 4, (1,), partition_epoch=4), 4)]
    apply(core, writes)
    assert core.offline_partitions() == [("t", 0)]
    # 1 comes back: it is in the ISR, so it leads again.
    writes, new, _ = core.brokers_changed(brokers(1, 2, 3))
    assert new == {1}
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(1, 5, (1,), partition_epoch=5), 5)]


def test_no_live_isr_member_unclean_on_elects_live_replica_recovering() -> None:
    core = make(unclean=True)
    apply(core, core.topics_changed({"t": topic({0: (1, 2)})}))
    core.states[("t", 0)] = el.LeaderAndIsr(1, 3, (1,), partition_epoch=4)
    writes, _, _ = core.brokers_changed(brokers(2, 3))
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(
        2, 4, (2,), z.LEADER_RECOVERY_RECOVERING, partition_epoch=4), 4)]


def test_bounced_broker_counts_as_dead_and_new() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3)})}))
    core.requests()
    writes, new, dead = core.brokers_changed({**brokers(2, 3), 1: reg(1, 999)})
    assert new == {1} and dead == {1}
    req = core.requests(full_to=new)
    assert 1 in req.leader_and_isr and 1 in req.update_metadata


def test_controlled_shutdown_moves_leadership_and_leaves_isrs() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3), 1: (2, 1, 3), 2: (1,)})}))
    writes, remaining = core.controlled_shutdown(1)
    assert remaining == []
    by_tp = {w.tp: w.new for w in writes}
    assert by_tp[("t", 0)] == el.LeaderAndIsr(2, 1, (2, 3))  # led by 1: moves to 2
    assert by_tp[("t", 1)] == el.LeaderAndIsr(2, 1, (2, 3))  # follower 1 leaves the ISR
    assert ("t", 2) not in by_tp  # replication factor 1: stays
    apply(core, writes)
    assert core.still_led_by(1) == []
    # The shutting-down broker stops following (StopReplica without delete) instead of a
    # LeaderAndIsr that would make it fetch its way back into the ISR; it keeps leading
    # the replication-factor-1 partition; the others hear of the new leaders and ISRs.
    req = core.requests()
    assert sorted(req.stop_replica[1]) == [(("t", 0), False), (("t", 1), False)]
    assert [i.tp for i in req.leader_and_isr[1]] == [("t", 2)]
    assert sorted(i.tp for i in req.leader_and_isr[2]) == [("t", 0), ("t", 1)]


def test_controlled_shutdown_with_no_other_isr_member_reports_remaining() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2)})}))
    core.states[("t", 0)] = el.LeaderAndIsr(1, 0, (1,), partition_epoch=0)
    writes, remaining = core.controlled_shutdown(1)
    assert writes == [] and remaining == [("t", 0)]
    assert core.still_led_by(1) == [("t", 0)]


def test_lost_write_is_reread_and_replanned() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3)})}))
    writes, _, _ = core.brokers_changed(brokers(2, 3))
    # Meanwhile leader 1 had shrunk the ISR to (1, 3) (partition epoch 1).
    core.reread(("t", 0), el.LeaderAndIsr(1, 0, (1, 3), partition_epoch=1))
    again = core.replan(("t", 0))
    assert again == StateWrite(("t", 0), el.LeaderAndIsr(3, 1, (3,), partition_epoch=1), 1)


def test_failover_loads_states_and_elects_offline_partitions() -> None:
    core = ControllerCore(2, 6, lambda t: False)
    states = {("t", 0): el.LeaderAndIsr(1, 4, (1, 2), partition_epoch=7),
              ("t", 1): el.LeaderAndIsr(2, 1, (2, 1), partition_epoch=2)}
    writes = core.startup(brokers(2, 3), {"t": topic({0: (1, 2, 3), 1: (2, 1, 3)})}, states)
    assert writes == [StateWrite(("t", 0), el.LeaderAndIsr(2, 5, (2,), partition_epoch=7), 7)]
    apply(core, writes)
    req = core.requests(full_to=core.live, notify_all=True)
    assert sorted(req.update_metadata) == [2, 3]
    assert len(req.update_metadata[3]) == 2  # everything to everyone after a failover


def test_isr_change_notice_updates_metadata_only() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3)})}))
    core.requests()
    core.isr_changed({("t", 0): el.LeaderAndIsr(1, 0, (1, 2), partition_epoch=1)})
    req = core.requests()
    assert req.update_metadata[3][0].state.isr == (1, 2)
    # A stale notice (older partition epoch) is ignored.
    core.isr_changed({("t", 0): el.LeaderAndIsr(1, 0, (1, 2, 3), partition_epoch=0)})
    assert core.states[("t", 0)].isr == (1, 2)


def test_topic_deletion_stops_replicas_and_tells_brokers() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2), 1: (2, 3)})}))
    core.requests()
    req = core.delete_topics(["t", "unknown"])
    assert req.stop_replica == {1: [(("t", 0), True)], 2: [(("t", 0), True), (("t", 1), True)],
                                3: [(("t", 1), True)]}
    assert all(i.state.leader == LEADER_DURING_DELETE for i in req.update_metadata[1])
    # Deleting topics are not elected even if their brokers fail.
    writes, _, _ = core.brokers_changed(brokers(3))
    assert writes == []
    core.topic_deleted("t")
    assert core.partitions() == [] and core.states == {}


def test_preferred_election_needs_the_preferred_replica_live_and_in_isr() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3), 1: (2, 3, 1)})}))
    core.states[("t", 0)] = el.LeaderAndIsr(2, 3, (2, 3), partition_epoch=5)  # 1 not in ISR
    core.states[("t", 1)] = el.LeaderAndIsr(3, 1, (3, 2, 1), partition_epoch=2)
    writes = core.preferred_elections([("t", 0), ("t", 1)])
    assert writes == [StateWrite(("t", 1), el.LeaderAndIsr(2, 2, (3, 2, 1), partition_epoch=2), 2,
                                 "preferred")]
    core.states[("t", 0)] = el.LeaderAndIsr(2, 3, (2, 3, 1), partition_epoch=6)
    assert [w.tp for w in core.preferred_elections([("t", 0)])] == [("t", 0)]


def test_auto_rebalance_over_the_imbalance_percentage_only() -> None:
    core = make()
    apply(core, core.topics_changed({"t": topic({p: (1, 2, 3) for p in range(10)})}))
    # Broker 1 prefers 10 partitions and leads all but one: 10% is not over 10%.
    core.states[("t", 0)] = el.LeaderAndIsr(2, 1, (1, 2, 3), partition_epoch=1)
    assert core.auto_rebalance(10) == []
    assert [w.tp for w in core.auto_rebalance(5)] == [("t", 0)]
    core.states[("t", 1)] = el.LeaderAndIsr(3, 1, (1, 2, 3), partition_epoch=1)
    writes = core.auto_rebalance(10)
    assert [(w.tp, w.new.leader, w.new.leader_epoch) for w in writes] == [
        (("t", 0), 1, 2), (("t", 1), 1, 2)]
    # Not while broker 1 shuts down, nor when it is dead.
    core.shutting_down.add(1)
    assert core.auto_rebalance(10) == []


def test_controlled_shutdown_of_the_last_live_replica_has_nothing_remaining() -> None:
    # Brokers 2 and 3 are gone: no retry could move broker 1's leadership, so its
    # controlled shutdown succeeds at once (the last broker of a cluster being stopped).
    core = make()
    apply(core, core.topics_changed({"t": topic({0: (1, 2, 3)})}))
    writes, _, _ = core.brokers_changed(brokers(1))
    apply(core, writes)
    writes, remaining = core.controlled_shutdown(1)
    assert writes == [] and remaining == []
    assert core.still_led_by(1) == []
    assert core.states[("t", 0)].leader == 1


def test_controlled_shutdown_waits_for_a_live_replica_out_of_the_isr() -> None:
    # Broker 2 is live but out of the ISR: it may catch up, so the partition is remaining
    # (the broker retries), as in Kafka.
    core = make(live=(1, 2))
    apply(core, core.topics_changed({"t": topic({0: (1, 2)})}))
    core.states[("t", 0)] = el.LeaderAndIsr(1, 0, (1,), partition_epoch=0)
    _, remaining = core.controlled_shutdown(1)
    assert remaining == [("t", 0)]
    # Both shutting down at once: neither can take the other's partitions.
    core2 = make(live=(1, 2))
    apply(core2, core2.topics_changed({"t": topic({0: (1, 2)})}))
    core2.controlled_shutdown(2)
    core2.states[("t", 0)] = el.LeaderAndIsr(1, 0, (1,), partition_epoch=0)
    _, remaining2 = core2.controlled_shutdown(1)
    assert remaining2 == []
