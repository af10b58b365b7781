"""pylog.cluster.isr: the leader's high watermark, ISR shrink/expand and acks=all rules (cases
after Kafka's PartitionTest, IsrExpirationTest and MinIsrConfigTest), with a manual clock."""

from __future__ import annotations

import pytest

from pylog._clock import ManualClock
from pylog.cluster.isr import PartitionLeader, follower_high_watermark, live_eligible
from pylog.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)

LAG = 10_000


def _leader(clock: ManualClock, *, isr: tuple[int, ...] = (1, 2, 3), leo: int = 0, hw: int = 0,
            min_isr: int = 1, replicas: tuple[int, ...] = (1, 2, 3), **kw: object) -> PartitionLeader:
    return PartitionLeader(broker_id=1, replicas=replicas, isr=isr, leader_epoch=5,
                           partition_epoch=2, log_end_offset=leo, high_watermark=hw,
                           min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG, clock=clock,
                           **kw)  # type: ignore[arg-type]


def test_a_new_leader_holds_the_high_watermark_until_the_isr_fetched() -> None:
    clock = ManualClock()
    p = _leader(clock, leo=10, hw=4)
    assert p.high_watermark == 4
    assert p.on_append(15) is False  # followers' LEOs are unknown yet
    assert p.on_follower_fetch(2, 12) == (False, None)
    assert p.high_watermark == 4
    moved, _ = p.on_follower_fetch(3, 11)
    assert moved and p.high_watermark == 11  # min(15, 12, 11)
    p.on_follower_fetch(3, 15)
    assert p.high_watermark == 12
    p.on_follower_fetch(2, 15)
    assert p.high_watermark == 15


def test_the_high_watermark_never_goes_back() -> None:
    clock = ManualClock()
    p = _leader(clock, leo=10, hw=0)
    p.on_follower_fetch(2, 10)
    p.on_follower_fetch(3, 10)
    assert p.high_watermark == 10
    p.on_follower_fetch(2, 3)  # a follower that truncated: its LEO drops, the HW does not
    assert p.high_watermark == 10


def test_stuck_and_slow_followers_leave_the_isr() -> None:
    # IsrExpirationTest: a follower that never fetches (stuck) and one that fetches but never
    # reaches the leader's end (slow) are out of sync after replica.lag.time.max.ms.
    clock = ManualClock()
    p = _leader(clock, leo=100, hw=100)
    assert p.out_of_sync_replicas() == frozenset()
    for i in range(1, 11):
        clock.advance(LAG // 5)
        p.on_append(p.log_end_offset + 10)
        # 3 gains 1 offset per fetch while the leader gains 10: it never reaches the leader's
        # end offset as of its previous fetch
        p.on_follower_fetch(3, 100 + i)
    assert p.out_of_sync_replicas() == {2, 3}
    change = p.maybe_shrink_isr()
    assert change is not None and change.new_isr == (1,) and not change.expand
    assert (change.leader_epoch, change.partition_epoch) == (5, 2)
    # While the shrink is in flight the old ISR still counts and no second change starts.
    assert p.maximal_isr == {1, 2, 3}
    assert p.maybe_shrink_isr() is None
    assert p.out_of_sync_replicas() == frozenset()
    assert p.on_isr_change_persisted(change.new_isr, partition_epoch=3) is True
    assert p.isr == {1} and p.partition_epoch == 3
    assert p.high_watermark == p.log_end_offset


def test_a_follower_that_caught_up_recently_stays_in_sync() -> None:
    clock = ManualClock()
    p = _leader(clock, leo=50, hw=50)
    p.on_follower_fetch(2, 50)
    p.on_follower_fetch(3, 50)
    clock.advance(LAG - 1)
    p.on_append(60)  # behind now, but caught up within the lag time
    assert p.out_of_sync_replicas() == frozenset()
    clock.advance(2)
    assert p.out_of_sync_replicas() == {2, 3}
    # Fetching at the leader's end offset as of its previous fetch counts as caught up then.
    p.on_follower_fetch(2, 50)
    p.on_append(70)
    clock.advance(LAG // 2)
    p.on_follower_fetch(2, 60)  # reached the LEO of its previous fetch: caught up at that time
    assert 2 not in p.out_of_sync_replicas()


def test_expansion_needs_the_high_watermark_and_the_epoch_start() -> None:
    clock = ManualClock()
    p = _leader(clock, isr=(1, 2), leo=20, hw=10)
    p.on_follower_fetch(2, 20)
    assert p.high_watermark == 20
    # Follower 3 is behind the HW: it is not caught up, so the HW does not wait for it.
    assert p.on_follower_fetch(3, 15) == (False, None)
    moved, change = p.on_follower_fetch(3, 20)
    assert change is not None and change.expand and change.new_isr == (1, 2, 3)
    assert p.maximal_isr == {1, 2, 3} and p.isr == {1, 2}
    p.on_append(30)
    p.on_follower_fetch(2, 30)
    assert p.high_watermark == 20  # waits for 3, which acks=all counts already
    p.on_isr_change_persisted(change.new_isr, 4)
    p.on_follower_fetch(3, 30)
    assert p.high_watermark == 30


def test_expansion_waits_for_the_leader_epoch_start_offset() -> None:
    clock = ManualClock()
    p = _leader(clock, isr=(1,), leo=40, hw=10)
    p.on_follower_fetch(2, 30)  # above the HW, below where this epoch began
    assert p.pending_isr_change is None
    assert p.on_follower_fetch(2, 40)[1] is not None


def test_failed_isr_change_and_ineligible_replicas() -> None:
    clock = ManualClock()
    p = _leader(clock, isr=(1,), leo=5, hw=5, is_replica_isr_eligible=live_eligible({1, 2}))
    assert p.on_follower_fetch(3, 5)[1] is None  # broker 3 is not alive: no expansion
    change = p.on_follower_fetch(2, 5)[1]
    assert change is not None
    p.on_isr_change_failed()
    assert p.pending_isr_change is None and p.isr == {1}


def test_min_isr_holds_the_high_watermark_and_refuses_acks_all() -> None:
    clock = ManualClock()
    p = _leader(clock, isr=(1,), leo=10, hw=10, min_isr=2)
    assert p.is_under_min_isr
    with pytest.raises(NotEnoughReplicasError, match="min.isr requirement of 2"):
        p.check_before_append(-1)
    p.check_before_append(1)  # acks=1 and acks=0 are not checked
    p.check_before_append(0)
    assert p.on_append(20) is False and p.high_watermark == 10
    # effective min ISR = min(min.insync.replicas, replicas): 5 on a 3-replica topic means 3
    q = _leader(clock, leo=0, hw=0, min_isr=5)
    assert q.effective_min_isr == 3 and not q.is_under_min_isr


def test_acks_all_outcomes() -> None:
    clock = ManualClock()
    p = _leader(clock, leo=0, hw=0, min_isr=2)
    p.check_before_append(-1)
    p.on_append(10)
    assert p.acks_all_outcome(10) == (False, None)
    p.on_follower_fetch(2, 10)
    assert p.acks_all_outcome(10) == (False, None)  # 3 is in the ISR and has not fetched
    p.on_follower_fetch(3, 10)
    assert p.acks_all_outcome(10) == (True, None)
    # The ISR shrinks to the leader alone after the records are in: written, under-replicated.
    p.on_append(20)
    clock.advance(LAG + 1)
    change = p.maybe_shrink_isr()
    assert change is not None and change.new_isr == (1,)
    p.on_isr_change_persisted((1,), 3)
    assert p.acks_all_outcome(10) == (True, NotEnoughReplicasAfterAppendError)
    assert p.acks_all_outcome(20) == (False, None)  # the HW is frozen under min ISR
    with pytest.raises(NotEnoughReplicasError):
        p.check_before_append(-1)


def test_bad_fetches_and_construction() -> None:
    clock = ManualClock()
    p = _leader(clock, leo=5, hw=0)
    with pytest.raises(NotLeaderOrFollowerError, match="broker 9"):
        p.on_follower_fetch(9, 0)
    with pytest.raises(OffsetOutOfRangeError):
        p.on_follower_fetch(2, 6)
    with pytest.raises(ValueError, match="cannot go back"):
        p.on_append(4)
    with pytest.raises(ValueError, match="leads a partition"):
        PartitionLeader(broker_id=7, replicas=(1, 2), isr=(1, 2), leader_epoch=0,
                        partition_epoch=0, log_end_offset=0, high_watermark=0)
    with pytest.raises(ValueError, match="high watermark"):
        _leader(clock, leo=5, hw=6)
    assert follower_high_watermark(10, 7) == 7 and follower_high_watermark(3, 7) == 3
