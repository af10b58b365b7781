"""Properties of pylog.cluster's sans-IO rules: replica assignment, leader election, and a
simulated replicated partition (leader, followers, controller, manual clock).

The simulation drives ``PartitionLeader`` (high watermark, ISR) and ``election`` (the
controller's choices) with arbitrary interleavings of appends, follower fetches, time, ISR
shrink/expand writes that win or lose the conditional update, broker deaths and restarts,
with unclean leader election off. Follower truncation is modelled by its outcome (a follower
truncates to where its log diverges from the leader's, which is what leader-epoch truncation
achieves). After every step:

- the high watermark never decreases while a leader keeps its term, and never exceeds the
  log end offset of the leader or of any ISR member;
- every offset below the high watermark is on every ISR member, identical to the leader's;
- every record ever below a high watermark (committed) is still in the current leader's log
  at the same offset: a leader elected from the ISR has it, so no committed record is lost.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pylog._clock import ManualClock
from pylog.cluster import election as e
from pylog.cluster.assignment import BrokerMetadata, assign_replicas_to_brokers
from pylog.cluster.isr import PartitionLeader
from pylog.errors import NotEnoughReplicasError

# -- replica assignment ----------------------------------------------------------------------


@st.composite
def _assignment_inputs(draw: st.DrawFn) -> tuple[list[BrokerMetadata], int, int, int]:
    n = draw(st.integers(1, 12))
    ids = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    racked = draw(st.booleans())
    racks = draw(st.lists(st.sampled_from("abcd"), min_size=n, max_size=n)) if racked else [None] * n
    brokers = [BrokerMetadata(i, r) for i, r in zip(ids, racks, strict=True)]
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 60))
    start = draw(st.integers(0, n - 1))
    return brokers, partitions, rf, start


@settings(max_examples=300, deadline=None)
@given(_assignment_inputs())
def test_assignment_is_valid_and_spreads_leaders(
        inputs: tuple[list[BrokerMetadata], int, int, int]) -> None:
    brokers, partitions, rf, start = inputs
    got = assign_replicas_to_brokers(brokers, partitions, rf, fixed_start_index=start)
    ids = {b.broker_id for b in brokers}
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf  # no broker twice
        assert set(replicas) <= ids
    # Leaders go round-robin: no broker leads more than one partition above another.
    leaders = Counter(r[0] for r in got.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    racks = {b.broker_id: b.rack for b in brokers}
    if brokers[0].rack is not None:
        n_racks = len(set(racks.values()))
        for replicas in got.values():
            # as many racks as possible: min(rf, racks)
            assert len({racks[b] for b in replicas}) == min(rf, n_racks)
    # Deterministic for a given start index.
    assert got == assign_replicas_to_brokers(list(reversed(brokers)), partitions, rf, start)


# -- leader election ---------------------------------------------------------------------------

_replica_sets = st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True)


@settings(max_examples=500, deadline=None)
@given(_replica_sets, st.data(), st.booleans())
def test_offline_election_choices(assignment: list[int], data: st.DataObject,
                                  unclean: bool) -> None:
    isr = data.draw(st.lists(st.sampled_from(assignment), unique=True, min_size=1))
    live = set(data.draw(st.lists(st.sampled_from(assignment), unique=True)))
    current = e.LeaderAndIsr(-1, data.draw(st.integers(0, 100)), tuple(isr), partition_epoch=3)
    result = e.elect_offline(current, assignment, live, unclean)
    live_isr = [r for r in assignment if r in live and r in isr]
    new = result.leader_and_isr
    if live_isr:
        assert new is not None and new.leader == live_isr[0] and not result.unclean
        assert set(new.isr) == set(isr) & live and new.leader in new.isr
    elif unclean and live:
        assert new is not None and result.unclean
        assert new.leader == next(r for r in assignment if r in live) and new.isr == (new.leader,)
    else:
        assert new is None
    if new is not None:
        assert new.leader_epoch == current.leader_epoch + 1
        assert new.partition_epoch == current.partition_epoch
        assert new.leader in live


@settings(max_examples=300, deadline=None)
@given(_replica_sets, st.data())
def test_controlled_shutdown_and_isr_removal(assignment: list[int], data: st.DataObject) -> None:
    isr = tuple(data.draw(st.lists(st.sampled_from(assignment), unique=True, min_size=1)))
    shutting = set(data.draw(st.lists(st.sampled_from(assignment), unique=True)))
    current = e.LeaderAndIsr(isr[0], 4, isr)
    result = e.elect_for_controlled_shutdown(current, assignment, set(assignment), shutting)
    if result.leader_and_isr is not None:
        assert result.leader_and_isr.leader not in shutting
        assert not set(result.leader_and_isr.isr) & shutting
    else:
        assert set(isr) <= shutting
    victim = data.draw(st.sampled_from(assignment))
    removed = e.remove_replica_from_isr(current, victim)
    if victim not in isr:
        assert removed is None
    else:
        assert removed is not None and len(removed.isr) >= 1
        assert victim not in removed.isr or removed.isr == (victim,)
        assert removed.leader == (-1 if victim == current.leader else current.leader)


# -- a replicated partition, simulated ---------------------------------------------------------

REPLICAS = (1, 2, 3)
LAG_MS = 1_000


class ReplicatedPartition(RuleBasedStateMachine):
    """Three replicas of one partition, a controller, no unclean election (``unclean`` is
    flipped only by the scripted test that shows what unclean election costs)."""

    unclean = False

    @initialize(min_isr=st.integers(1, 3))
    def setup(self, min_isr: int) -> None:
        self.clock = ManualClock()
        self.min_isr = min_isr
        self.live = set(REPLICAS)
        self.logs: dict[int, list[int]] = {r: [] for r in REPLICAS}
        self.follower_hw = dict.fromkeys(REPLICAS, 0)
        self.next_record = 0
        self.committed: dict[int, int] = {}
        first = e.initial_leader_and_isr(REPLICAS, self.live)
        assert first is not None
        self.lai = first
        self.leader: PartitionLeader | None = None
        self.term_hw = 0
        self._become_leader()

    # -- the controller ---------------------------------------------------------------------

    def _become_leader(self) -> None:
        """Act on ``self.lai``: the leader (new or same, new epoch) gets a LeaderAndIsr."""
        if self.lai.leader == -1 or self.lai.leader not in self.live:
            self.leader = None
            return
        b = self.lai.leader
        hw = self.leader.high_watermark if (self.leader and self.leader.broker_id == b) \
            else self.follower_hw[b]
        self.leader = PartitionLeader(
            broker_id=b, replicas=REPLICAS, isr=self.lai.isr, leader_epoch=self.lai.leader_epoch,
            partition_epoch=self.lai.partition_epoch, log_end_offset=len(self.logs[b]),
            high_watermark=min(hw, len(self.logs[b])), min_insync_replicas=self.min_isr,
            replica_lag_time_max_ms=LAG_MS, clock=self.clock,
            is_replica_isr_eligible=lambda r: r in self.live)
        self.term_hw = self.leader.high_watermark

    def _controller_write(self, new: e.LeaderAndIsr) -> None:
        # a controller write bumps the state znode's version (the partition epoch)
        self.lai = new.with_partition_epoch(self.lai.partition_epoch + 1)
        self._become_leader()

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: self.leader is not None)
    @rule(n=st.integers(1, 5))
    def produce_acks_all(self, n: int) -> None:
        assert self.leader is not None
        try:
            self.leader.check_before_append(-1)
        except NotEnoughReplicasError:
            assert self.leader.is_under_min_isr
            return
        log = self.logs[self.leader.broker_id]
        for _ in range(n):
            log.append(self.next_record)
            self.next_record += 1
        self.leader.on_append(len(log))

    @precondition(lambda self: self.leader is not None)
    @rule(follower=st.sampled_from(REPLICAS), max_records=st.integers(0, 6))
    def follower_fetch(self, follower: int, max_records: int) -> None:
        assert self.leader is not None
        if follower == self.leader.broker_id or follower not in self.live:
            return
        leader_log = self.logs[self.leader.broker_id]
        mine = self.logs[follower]
        # truncation to the divergence point (what leader-epoch truncation achieves)
        common = 0
        while common < min(len(mine), len(leader_log)) and mine[common] == leader_log[common]:
            common += 1
        del mine[common:]
        self.leader.on_follower_fetch(follower, len(mine))
        mine.extend(leader_log[len(mine):len(mine) + max_records])
        self.follower_hw[follower] = min(self.leader.high_watermark, len(mine))

    @rule(ms=st.sampled_from([1, 100, LAG_MS // 2, LAG_MS + 1]))
    def advance_time(self, ms: int) -> None:
        self.clock.advance(ms)

    @precondition(lambda self: self.leader is not None)
    @rule()
    def shrink_isr(self) -> None:
        assert self.leader is not None
        self.leader.maybe_shrink_isr()

    @precondition(lambda self: self.leader is not None
                  and self.leader.pending_isr_change is not None)
    @rule(wins=st.booleans())
    def persist_isr_change(self, wins: bool) -> None:
        """The leader's conditional write of its ISR: it loses if the partition epoch moved
        (modelled as a controller write first when ``wins`` is False)."""
        assert self.leader is not None
        change = self.leader.pending_isr_change
        assert change is not None
        if not wins:
            self._controller_write(self.lai.new_epoch())  # e.g. a preferred election no-op
            return
        if change.partition_epoch != self.lai.partition_epoch:
            self.leader.on_isr_change_failed()
            return
        self.lai = replace(self.lai, isr=change.new_isr,
                           partition_epoch=self.lai.partition_epoch + 1)
        self.leader.on_isr_change_persisted(change.new_isr, self.lai.partition_epoch)

    @precondition(lambda self: len(self.live) > 1)
    @rule(broker=st.sampled_from(REPLICAS))
    def kill(self, broker: int) -> None:
        if broker not in self.live:
            return
        self.live.discard(broker)
        if broker == self.lai.leader:
            result = e.elect_offline(self.lai, REPLICAS, self.live, self.unclean)
            if result.leader_and_isr is not None:
                self._controller_write(result.leader_and_isr)
        removed = e.remove_replica_from_isr(self.lai, broker)
        if removed is not None:
            self._controller_write(removed)
        elif broker == getattr(self.leader, "broker_id", None):
            self.leader = None

    @rule(broker=st.sampled_from(REPLICAS))
    def restart(self, broker: int) -> None:
        if broker in self.live:
            return
        self.live.add(broker)
        if self.lai.leader == -1:
            result = e.elect_offline(self.lai, REPLICAS, self.live, self.unclean)
            if result.leader_and_isr is not None:
                self._controller_write(result.leader_and_isr)

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def high_watermark_rules(self) -> None:
        leader = getattr(self, "leader", None)
        if leader is None:
            return
        hw = leader.high_watermark
        assert hw >= self.term_hw, "the high watermark went back within a leader's term"
        self.term_hw = hw
        leader_log = self.logs[leader.broker_id]
        assert hw <= len(leader_log)
        for member in leader.isr:
            assert len(self.logs[member]) >= hw, (
                f"HW {hw} is above ISR member {member}'s log end {len(self.logs[member])}")
            assert self.logs[member][:hw] == leader_log[:hw], f"member {member} diverges below HW"
        for offset in range(hw):
            self.committed.setdefault(offset, leader_log[offset])

    @invariant()
    def no_committed_record_is_lost(self) -> None:
        leader = getattr(self, "leader", None)
        if leader is None:
            return
        leader_log = self.logs[leader.broker_id]
        for offset, record in self.committed.items():
            assert offset < len(leader_log) and leader_log[offset] == record, (
                f"committed offset {offset} lost on leader {leader.broker_id}")

    @invariant()
    def the_isr_is_never_empty_and_names_replicas(self) -> None:
        lai = getattr(self, "lai", None)
        if lai is None:
            return
        assert lai.isr and set(lai.isr) <= set(REPLICAS)
        if lai.leader != -1:
            assert lai.leader in lai.isr


ReplicatedPartition.TestCase.settings = settings(
    max_examples=200, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestReplicatedPartition = ReplicatedPartition.TestCase


def test_the_simulation_reaches_failovers_and_commits() -> None:
    """The machine is not vacuous: a scripted run commits, fails over and keeps the records."""
    m = ReplicatedPartition()
    m.setup(min_isr=2)
    m.produce_acks_all(3)
    for f in (2, 3):
        m.follower_fetch(f, 6)
    for f in (2, 3):
        m.follower_fetch(f, 0)  # report the new LEOs
    m.high_watermark_rules()
    assert m.leader is not None and m.leader.high_watermark == 3
    m.kill(1)
    assert m.leader is not None and m.leader.broker_id == 2 and m.lai.leader_epoch == 1
    m.high_watermark_rules()
    m.no_committed_record_is_lost()
    assert m.committed == {0: 0, 1: 1, 2: 2}


def _scripted_whole_isr_loss(unclean: bool) -> ReplicatedPartition:
    """Leader 1 commits with follower 2 while follower 3 lags out of the ISR; then 1 and 2
    die and 3 comes back alone."""
    m = ReplicatedPartition()
    m.unclean = unclean
    m.setup(min_isr=1)
    m.follower_fetch(3, 0)
    m.produce_acks_all(4)
    m.follower_fetch(2, 6)
    m.advance_time(LAG_MS + 1)
    m.follower_fetch(2, 0)  # 2 caught up; 3 has not fetched for longer than the lag time
    m.shrink_isr()
    m.persist_isr_change(wins=True)
    assert m.lai.isr == (1, 2)
    m.high_watermark_rules()
    assert len(m.committed) == 4
    m.kill(3)
    m.kill(2)  # ISR is now [1]
    m.restart(3)
    m.kill(1)  # the last ISR member dies: leader -1, ISR [1]
    return m


def test_with_unclean_election_off_the_partition_waits_offline() -> None:
    m = _scripted_whole_isr_loss(unclean=False)
    assert m.leader is None and m.lai.leader == -1 and m.lai.isr == (1,)
    m.restart(1)  # the ISR member returns and leads, with every committed record
    assert m.leader is not None and m.leader.broker_id == 1
    m.no_committed_record_is_lost()


def test_unclean_election_loses_committed_records() -> None:
    """The documented trade: availability at the cost of the records only the ISR had."""
    m = _scripted_whole_isr_loss(unclean=True)
    assert m.leader is not None and m.leader.broker_id == 3
    assert m.lai.leader_recovery_state == 1  # RECOVERING
    with pytest.raises(AssertionError, match="committed offset 0 lost"):
        m.no_committed_record_is_lost()
