"""pylog.cluster.election: the cases of Kafka's PartitionLeaderElectionAlgorithmsTest and the
leader/ISR transitions of Election.scala and ReplicaStateMachine."""

from __future__ import annotations

import pytest

from pylog.cluster import election as e
from pylog.cluster.zk_data import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER,
    PartitionState,
)

# -- the algorithms (PartitionLeaderElectionAlgorithmsTest) ---------------------------------

@pytest.mark.parametrize(("assignment", "isr", "live", "unclean", "leader"), [
    ((2, 4), (2, 4), {4}, False, 4),  # leader 2 dead: next in ISR
    ((2, 4), (2,), {4}, False, None),  # last ISR member offline, unclean disabled
    ((2, 4), (2,), {4}, True, 4),  # ... unclean enabled: a live replica outside the ISR
    ((2, 4), (), {2, 4}, False, None),
    ((2, 4), (4, 2), {2, 4}, False, 2),  # assignment order decides, not ISR order
    ((3, 1, 2), (1, 2), {2, 3}, True, 2),  # an ISR member wins over an unclean candidate
    ((3, 1, 2), (1,), set(), True, None),  # nobody alive
])
def test_offline_partition_leader(assignment: tuple[int, ...], isr: tuple[int, ...],
                                  live: set[int], unclean: bool, leader: int | None) -> None:
    assert e.offline_partition_leader(assignment, isr, live, unclean) == leader


@pytest.mark.parametrize(("target", "isr", "live", "leader"), [
    ((2, 4), (2, 4), {2, 4}, 2),
    ((2, 4), (2,), set(), None),
    ((2, 4), (), {2}, None),
    ((2, 4), (4,), {2, 4}, 4),
])
def test_reassign_partition_leader(target: tuple[int, ...], isr: tuple[int, ...],
                                   live: set[int], leader: int | None) -> None:
    assert e.reassign_partition_leader(target, isr, live) == leader


@pytest.mark.parametrize(("assignment", "isr", "live", "leader"), [
    ((2, 4), (2, 4), {2, 4}, 2),
    ((2, 4), (2,), set(), None),  # preferred in ISR, not live
    ((2, 4), (4,), {2, 4}, None),  # preferred live, not in ISR
    ((2, 4), (), set(), None),
])
def test_preferred_replica_leader(assignment: tuple[int, ...], isr: tuple[int, ...],
                                  live: set[int], leader: int | None) -> None:
    assert e.preferred_replica_leader(assignment, isr, live) == leader


@pytest.mark.parametrize(("assignment", "isr", "live", "shutting", "leader"), [
    ((2, 4), (2, 4), {2, 4}, {2}, 4),
    ((2, 4), (2,), {2, 4}, {2}, None),  # last ISR member shutting down
    ((2, 4), (2, 4), {2, 4}, {2, 4}, None),  # whole ISR shutting down at once
])
def test_controlled_shutdown_leader(assignment: tuple[int, ...], isr: tuple[int, ...],
                                    live: set[int], shutting: set[int], leader: int | None) -> None:
    assert e.controlled_shutdown_leader(assignment, isr, live, shutting) == leader


# -- elections with their resulting state ---------------------------------------------------

def test_initial_leader_and_isr() -> None:
    assert e.initial_leader_and_isr((3, 1, 2), {1, 2, 3}) == e.LeaderAndIsr(3, 0, (3, 1, 2))
    assert e.initial_leader_and_isr((3, 1, 2), {1, 2}) == e.LeaderAndIsr(1, 0, (1, 2))
    assert e.initial_leader_and_isr((3, 1, 2), set()) is None
    with pytest.raises(e.ElectionError, match="twice"):
        e.initial_leader_and_isr((1, 1), {1})
    with pytest.raises(e.ElectionError, match="at least one"):
        e.initial_leader_and_isr((), {1})


def test_offline_election_drops_dead_replicas_and_bumps_the_epoch() -> None:
    current = e.LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=9)
    result = e.elect_offline(current, (1, 2, 3), live={2, 3}, unclean_enabled=False)
    assert result.leader_and_isr == e.LeaderAndIsr(2, 5, (2, 3), LEADER_RECOVERY_RECOVERED, 9)
    assert result.live_replicas == (2, 3) and not result.unclean


def test_offline_election_with_the_whole_isr_dead() -> None:
    current = e.LeaderAndIsr(NO_LEADER, 5, (1,))
    clean = e.elect_offline(current, (1, 2, 3), live={2, 3}, unclean_enabled=False)
    assert clean.leader_and_isr is None
    unclean = e.elect_offline(current, (1, 2, 3), live={3, 2}, unclean_enabled=True)
    assert unclean.unclean
    assert unclean.leader_and_isr == e.LeaderAndIsr(2, 6, (2,), LEADER_RECOVERY_RECOVERING)
    old_ibp = e.elect_offline(current, (1, 2, 3), live={3}, unclean_enabled=True,
                              leader_recovery_supported=False)
    assert old_ibp.leader_and_isr == e.LeaderAndIsr(3, 6, (3,), LEADER_RECOVERY_RECOVERED)


def test_a_clean_election_keeps_the_recovery_state() -> None:
    current = e.LeaderAndIsr(2, 6, (2, 3), LEADER_RECOVERY_RECOVERING)
    result = e.elect_offline(current, (1, 2, 3), live={3}, unclean_enabled=False)
    assert result.leader_and_isr == e.LeaderAndIsr(3, 7, (3,), LEADER_RECOVERY_RECOVERING)


def test_reassignment_preferred_and_controlled_shutdown_elections() -> None:
    current = e.LeaderAndIsr(1, 2, (1, 2, 3, 4))
    moved = e.elect_reassigned(current, (4, 3), live={1, 2, 3, 4}).leader_and_isr
    assert moved == e.LeaderAndIsr(4, 3, (1, 2, 3, 4))
    assert e.elect_reassigned(current, (5,), live={1, 5}).leader_and_isr is None

    led_by_2 = e.LeaderAndIsr(2, 3, (2, 1))
    preferred = e.elect_preferred(led_by_2, (1, 2), live={1, 2}).leader_and_isr
    assert preferred == e.LeaderAndIsr(1, 4, (2, 1))
    assert e.elect_preferred(led_by_2, (1, 2), live={2}).leader_and_isr is None

    shutdown = e.elect_for_controlled_shutdown(current, (1, 2, 3, 4), live={1, 2, 3, 4},
                                               shutting_down={1, 3}).leader_and_isr
    assert shutdown == e.LeaderAndIsr(2, 3, (2, 4))


def test_remove_replica_from_isr() -> None:
    current = e.LeaderAndIsr(1, 2, (1, 2, 3), partition_epoch=5)
    assert e.remove_replica_from_isr(current, 3) == e.LeaderAndIsr(1, 3, (1, 2), partition_epoch=5)
    assert e.remove_replica_from_isr(current, 1) == e.LeaderAndIsr(NO_LEADER, 3, (2, 3),
                                                                   partition_epoch=5)
    assert e.remove_replica_from_isr(current, 9) is None
    # The last ISR member stays (leader -1) so it is known when it comes back.
    last = e.LeaderAndIsr(2, 7, (2,))
    assert e.remove_replica_from_isr(last, 2) == e.LeaderAndIsr(NO_LEADER, 8, (2,))
    comeback = e.elect_offline(e.LeaderAndIsr(NO_LEADER, 8, (2,)), (1, 2), {2}, False)
    assert comeback.leader_and_isr == e.LeaderAndIsr(2, 9, (2,))


def test_partition_state_round_trip() -> None:
    lai = e.LeaderAndIsr(3, 4, (3, 1), LEADER_RECOVERY_RECOVERING, partition_epoch=11)
    state = lai.to_partition_state(controller_epoch=6)
    assert state == PartitionState(3, 4, (3, 1), 6, LEADER_RECOVERY_RECOVERING)
    assert e.LeaderAndIsr.from_partition_state(state, 11) == lai
    assert lai.new_epoch() == e.LeaderAndIsr(3, 5, (3, 1), LEADER_RECOVERY_RECOVERING, 11)
    assert lai.with_partition_epoch(12).partition_epoch == 12


def test_auto_rebalance_ratio() -> None:
    assignments = {("t", p): ((1, 2) if p < 10 else (2, 1)) for p in range(20)}
    leaders = {("t", p): 2 for p in range(20)}  # broker 1 lost every leadership
    leaders[("t", 0)] = 1
    out = e.imbalanced_brokers(assignments, leaders, imbalance_percentage=10)
    assert list(out) == [1] and len(out[1]) == 9
    leaders.update({("t", p): 1 for p in range(10)})
    assert e.imbalanced_brokers(assignments, leaders) == {}
    leaders[("t", 3)] = 2  # 1 of 10 = 10%: not over the threshold
    assert e.imbalanced_brokers(assignments, leaders) == {}
    leaders[("t", 4)] = 2
    assert e.imbalanced_brokers(assignments, leaders) == {1: [("t", 3), ("t", 4)]}
    assert e.needs_preferred_election((1, 2), e.LeaderAndIsr(2, 0, (1, 2)))
    assert not e.needs_preferred_election((1, 2), e.LeaderAndIsr(1, 0, (1, 2)))
