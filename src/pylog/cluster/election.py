"""The controller's leader election: who leads a partition, and its ISR and epoch afterwards.

Sans-IO: pure functions over an assignment (replica list, head = preferred leader), the
current leader/ISR and the set of live brokers. The controller reads state from ZooKeeper,
calls these, and writes the result back conditionally (``zk_store``). Safe from any thread.

Rules, from Kafka's ``PartitionLeaderElectionAlgorithms`` (``PartitionStateMachine.scala``),
``Election.scala``, ``LeaderAndIsr.scala`` and ``ReplicaStateMachine.scala``:

- **New partition**: leader = first live replica in assignment order, ISR = every live
  replica (assignment order), leader epoch 0. No live replica: the partition cannot start.
- **Offline** (leader dead or none): the first replica in assignment order that is live *and*
  in the ISR; new ISR = old ISR minus dead replicas. If there is none and
  ``unclean.leader.election.enable``: the first live replica (data committed to the old ISR
  may be lost), ISR = [leader], leader recovery state RECOVERING. Otherwise nothing: the
  partition stays offline until an ISR member returns.
- **Reassignment**: the first *target* replica that is live and in the ISR; ISR unchanged.
- **Preferred replica**: the assignment's head, only if it is live and in the ISR; ISR
  unchanged.
- **Controlled shutdown**: the first replica that is live, in the ISR and not shutting down;
  new ISR = ISR minus the shutting-down brokers.
- Every leader change bumps the leader epoch by one and keeps the partition epoch (the
  state znode's zkVersion) that the conditional write names; only an unclean election changes
  the recovery state (to RECOVERING), others keep it.
- **Replica goes offline** (``remove_replica_from_isr``): leader -1 if it led, the replica
  leaves the ISR unless it is the last member (the ISR never becomes empty, so the last
  in-sync replica is known when it returns), leader epoch bumped.

Why the ISR decides: a record is committed once every ISR member has it (``isr``), so any ISR
member elected leader holds every committed record; a live replica outside the ISR may not.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from pylog.cluster.zk_data import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER,
    PartitionState,
)

INITIAL_LEADER_EPOCH = 0  # LeaderAndIsr.InitialLeaderEpoch
INITIAL_PARTITION_EPOCH = 0  # LeaderAndIsr.InitialPartitionEpoch (zkVersion of a new znode)


class ElectionError(ValueError):
    """The inputs cannot describe a partition (empty or duplicated assignment)."""


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch, ISR, recovery state and partition epoch (zkVersion).

    Immutable; the ``new_*`` methods return the next state.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def new_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """Next leader epoch, the given leader and ISR, the same recovery state."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr),
                       leader_recovery_state=LEADER_RECOVERY_RECOVERING)

    def new_epoch(self) -> LeaderAndIsr:
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        """After a successful conditional write: the znode's new data version."""
        return replace(self, partition_epoch=partition_epoch)

    def to_partition_state(self, controller_epoch: int) -> PartitionState:
        return PartitionState(self.leader, self.leader_epoch, self.isr, controller_epoch,
                              self.leader_recovery_state)

    @classmethod
    def from_partition_state(cls, state: PartitionState, zk_version: int) -> LeaderAndIsr:
        return cls(state.leader, state.leader_epoch, state.isr, state.leader_recovery_state,
                   zk_version)


def _check_assignment(assignment: Sequence[int]) -> None:
    if not assignment:
        raise ElectionError("a partition needs at least one replica")
    if len(set(assignment)) != len(assignment):
        raise ElectionError(f"assignment {list(assignment)} names a broker twice")


# -- the four algorithms (PartitionLeaderElectionAlgorithms) --------------------------------

def offline_partition_leader(assignment: Sequence[int], isr: Collection[int],
                             live: Collection[int], unclean_enabled: bool) -> int | None:
    """First live ISR member in assignment order; else (unclean) the first live replica."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return replica
    return None


def reassign_partition_leader(target_replicas: Sequence[int], isr: Collection[int],
                              live: Collection[int]) -> int | None:
    for replica in target_replicas:
        if replica in live and replica in isr:
            return replica
    return None


def preferred_replica_leader(assignment: Sequence[int], isr: Collection[int],
                             live: Collection[int]) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Collection[int],
                               live: Collection[int],
                               shutting_down: Collection[int]) -> int | None:
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return replica
    return None


# -- elections with their new leader/ISR (Election.scala) -----------------------------------

def initial_leader_and_isr(assignment: Sequence[int], live: Collection[int]) -> LeaderAndIsr | None:
    """A new partition's first state, or None when no replica is live (Kafka refuses to start
    the partition and retries when a replica's broker registers)."""
    _check_assignment(assignment)
    live_replicas = [r for r in assignment if r in live]
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], INITIAL_LEADER_EPOCH, tuple(live_replicas))


@dataclass(frozen=True)
class ElectionResult:
    """A new leader/ISR, or None when no eligible replica exists; ``unclean`` marks an
    election outside the ISR (possible loss of committed records)."""

    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]
    unclean: bool = False


def elect_offline(current: LeaderAndIsr, assignment: Sequence[int], live: Collection[int],
                  unclean_enabled: bool, leader_recovery_supported: bool = True) -> ElectionResult:
    """Kafka's ``leaderForOffline``: a partition whose leader is gone (or never was)."""
    _check_assignment(assignment)
    live_replicas = tuple(r for r in assignment if r in live)
    leader = offline_partition_leader(assignment, current.isr, live, unclean_enabled)
    if leader is None:
        return ElectionResult(None, live_replicas)
    if leader in current.isr:
        new_isr = [r for r in current.isr if r in live]
        return ElectionResult(current.new_leader_and_isr(leader, new_isr), live_replicas)
    if leader_recovery_supported:
        return ElectionResult(current.new_recovering_leader_and_isr(leader, [leader]),
                              live_replicas, unclean=True)
    return ElectionResult(current.new_leader_and_isr(leader, [leader]), live_replicas, unclean=True)


def elect_reassigned(current: LeaderAndIsr, target_replicas: Sequence[int],
                     live: Collection[int]) -> ElectionResult:
    _check_assignment(target_replicas)
    live_replicas = tuple(r for r in target_replicas if r in live)
    leader = reassign_partition_leader(target_replicas, current.isr, live)
    if leader is None:
        return ElectionResult(None, live_replicas)
    return ElectionResult(current.new_leader_and_isr(leader, current.isr), live_replicas)


def elect_preferred(current: LeaderAndIsr, assignment: Sequence[int],
                    live: Collection[int]) -> ElectionResult:
    _check_assignment(assignment)
    live_replicas = tuple(r for r in assignment if r in live)
    leader = preferred_replica_leader(assignment, current.isr, live)
    if leader is None:
        return ElectionResult(None, live_replicas)
    return ElectionResult(current.new_leader_and_isr(leader, current.isr), live_replicas)


def elect_for_controlled_shutdown(current: LeaderAndIsr, assignment: Sequence[int],
                                  live: Collection[int],
                                  shutting_down: Collection[int]) -> ElectionResult:
    """``live`` includes the brokers shutting down (they are still registered)."""
    _check_assignment(assignment)
    live_replicas = tuple(r for r in assignment if r in live)
    leader = controlled_shutdown_leader(assignment, current.isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, live_replicas)
    new_isr = [r for r in current.isr if r not in shutting_down]
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), live_replicas)


def remove_replica_from_isr(current: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """The controller takes an offline (or shutting-down follower) replica out of the ISR.

    Returns None when ``replica`` is not in the ISR (nothing to write).
    """
    if replica not in current.isr:
        return None
    leader = NO_LEADER if replica == current.leader else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return current.new_leader_and_isr(leader, isr)


def needs_preferred_election(assignment: Sequence[int], current: LeaderAndIsr) -> bool:
    """The partition is led by someone other than its preferred replica."""
    return bool(assignment) and current.leader != assignment[0]


def imbalanced_brokers(assignments: dict[tuple[str, int], Sequence[int]],
                       leaders: dict[tuple[str, int], int],
                       imbalance_percentage: int = 10) -> dict[int, list[tuple[str, int]]]:
    """Kafka's ``checkAndTriggerAutoLeaderRebalance`` ratio test.

    For each preferred broker B: ratio = (partitions whose preferred replica is B but led by
    another) / (partitions whose preferred replica is B). Returns, for every B whose ratio is
    over ``leader.imbalance.per.broker.percentage`` / 100, the partitions to move back to B
    (the caller still runs ``elect_preferred``, which checks B is live and in the ISR).
    """
    by_preferred: dict[int, list[tuple[str, int]]] = {}
    for tp, replicas in assignments.items():
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out = {}
    for broker, tps in sorted(by_preferred.items()):
        not_led = [tp for tp in sorted(tps) if leaders.get(tp, NO_LEADER) != broker]
        if len(not_led) / len(tps) > imbalance_percentage / 100:
            out[broker] = not_led
    return out
