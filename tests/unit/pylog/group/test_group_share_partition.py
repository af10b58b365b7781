"""The share-partition state machine (``pylog.group.share.share_partition``), without I/O."""

from __future__ import annotations

import random

import pytest

from pylog.errors import InvalidRecordStateError, InvalidRequestError
from pylog.group.share.share_partition import (
    AcknowledgeType as A,
)
from pylog.group.share.share_partition import (
    AcquiredRange,
    SharePartition,
    StateBatch,
)
from pylog.group.share.share_partition import (
    RecordState as S,
)

LOCK = 1000


def sp(start: int = 0, limit: int = 3, window: int = 100) -> SharePartition:
    return SharePartition(start, delivery_count_limit=limit, max_in_flight=window)


def test_acquire_new_records_counts_a_delivery_and_moves_the_end() -> None:
    p = sp(10)
    assert p.next_fetch_offset() == 10
    assert p.acquire("m1", 10, 14, 100, 0, LOCK) == [AcquiredRange(10, 14, 1)]
    assert p.end_offset == 15 and p.start_offset == 10
    assert p.state_of(12) == (S.ACQUIRED, 1)
    assert p.next_fetch_offset() == 15


def test_acquire_skips_offsets_below_the_start_and_held_ones() -> None:
    p = sp(10)
    p.acquire("m1", 10, 11, 100, 0, LOCK)
    # A read from a batch starting below the wanted offset: 8, 9 are below the SPSO.
    assert p.acquire("m2", 8, 14, 100, 0, LOCK) == [AcquiredRange(12, 14, 1)]


def test_max_records_and_the_in_flight_window_bound_acquisition() -> None:
    p = sp(0, window=5)
    assert p.acquire("m", 0, 9, 3, 0, LOCK) == [AcquiredRange(0, 2, 1)]
    assert p.acquire("m", 3, 9, 100, 0, LOCK) == [AcquiredRange(3, 4, 1)]
    assert p.next_fetch_offset() is None  # window full, nothing available
    p.acknowledge("m", [(0, 1, [A.ACCEPT])])
    assert p.start_offset == 2 and p.next_fetch_offset() == 5


def test_accept_moves_the_start_past_a_done_prefix() -> None:
    p = sp()
    p.acquire("m", 0, 9, 100, 0, LOCK)
    p.acknowledge("m", [(2, 4, [A.ACCEPT])])
    assert p.start_offset == 0
    p.acknowledge("m", [(0, 1, [A.REJECT, A.ACCEPT])])
    assert p.start_offset == 5
    assert p.state_of(4) is None and p.state_of(5) == (S.ACQUIRED, 1)


def test_release_makes_available_again_and_the_limit_archives() -> None:
    p = sp(limit=2)
    p.acquire("m", 0, 0, 100, 0, LOCK)
    p.acknowledge("m", [(0, 0, [A.RELEASE])])
    assert p.state_of(0) == (S.AVAILABLE, 1)
    assert p.acquire("m2", 0, 0, 100, 0, LOCK) == [AcquiredRange(0, 0, 2)]
    p.acknowledge("m2", [(0, 0, [A.RELEASE])])
    # Delivered twice with a limit of 2: archived, and the start moves past it.
    assert p.state_of(0) is None and p.start_offset == 1


def test_lock_expiry_releases_and_counts() -> None:
    p = sp(limit=2)
    p.acquire("m", 0, 2, 100, 0, LOCK)
    assert p.next_deadline_ms() == LOCK
    assert p.expire_locks(LOCK - 1) == 0
    assert p.expire_locks(LOCK) == 3
    assert p.state_of(1) == (S.AVAILABLE, 1)
    assert p.acquire("m2", 0, 2, 100, 5000, LOCK) == [AcquiredRange(0, 2, 2)]
    p.expire_locks(5000 + LOCK)
    assert p.start_offset == 3  # all archived at the limit


def test_acknowledging_what_the_member_does_not_hold_is_invalid_record_state() -> None:
    p = sp()
    p.acquire("m1", 0, 4, 100, 0, LOCK)
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge("m2", [(0, 0, [A.ACCEPT])])
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge("m1", [(3, 7, [A.ACCEPT])])  # 5-7 never acquired
    # All or nothing: nothing of the refused batch was applied.
    assert p.state_of(3) == (S.ACQUIRED, 1)
    p.expire_locks(LOCK)
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge("m1", [(0, 0, [A.ACCEPT])])  # its lock expired


@pytest.mark.parametrize("batch", [(5, 4, [1]), (0, 3, [1, 1]), (0, 0, [9]), (0, 0, [])])
def test_malformed_batches_are_invalid_request(batch: tuple[int, int, list[int]]) -> None:
    p = sp()
    p.acquire("m", 0, 5, 100, 0, LOCK)
    with pytest.raises(InvalidRequestError):
        p.acknowledge("m", [batch])


def test_gap_archives_and_renew_extends_the_lock() -> None:
    p = sp()
    p.acquire("m", 0, 2, 100, 0, LOCK)
    p.acknowledge("m", [(0, 2, [A.GAP, A.RENEW, A.ACCEPT])], now_ms=500, lock_duration_ms=LOCK)
    assert p.start_offset == 1
    assert p.state_of(1) == (S.ACQUIRED, 1)
    assert p.expire_locks(LOCK) == 0 and p.expire_locks(1500) == 1


def test_release_member_gives_back_only_its_records() -> None:
    p = sp()
    p.acquire("a", 0, 1, 100, 0, LOCK)
    p.acquire("b", 2, 3, 100, 0, LOCK)
    assert p.release_member("a") == 2
    assert p.state_of(0) == (S.AVAILABLE, 1) and p.state_of(2) == (S.ACQUIRED, 1)
    assert p.next_fetch_offset() == 0


def test_move_start_drops_what_retention_deleted() -> None:
    p = sp()
    p.acquire("m", 0, 9, 100, 0, LOCK)
    p.move_start(4)
    assert p.start_offset == 4 and p.state_of(3) is None and p.state_of(4) == (S.ACQUIRED, 1)
    p.move_start(20)
    assert p.start_offset == 20 and p.end_offset == 20 and p.next_fetch_offset() == 20


def test_state_batches_round_trip_and_acquired_is_written_available() -> None:
    p = sp(limit=5)
    p.acquire("m", 0, 9, 100, 0, LOCK)
    p.acknowledge("m", [(1, 2, [A.ACCEPT]), (3, 3, [A.REJECT]), (4, 4, [A.RELEASE])])
    batches = p.state_batches()
    assert batches == [
        StateBatch(0, 0, S.AVAILABLE, 1), StateBatch(1, 2, S.ACKNOWLEDGED, 1),
        StateBatch(3, 3, S.ARCHIVED, 1), StateBatch(4, 9, S.AVAILABLE, 1),
    ]
    q = SharePartition(p.start_offset, delivery_count_limit=5, max_in_flight=100, batches=batches)
    assert q.state_batches() == batches and q.end_offset == 10
    assert q.acquire("n", 0, 9, 100, 0, LOCK) == [AcquiredRange(0, 0, 2), AcquiredRange(4, 9, 2)]


def test_random_operations_keep_the_invariants() -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = sp(limit=4, window=50)
    now = 0
    accepted: set[int] = set()
    for _ in range(2000):
        now += rng.randrange(0, 300)
        op = rng.random()
        member = rng.choice("abc")
        if op < 0.4:
            first = p.next_fetch_offset()
            if first is not None:
                p.acquire(member, first, first + rng.randrange(0, 10), rng.randrange(1, 20), now, LOCK)
        elif op < 0.8:
            held = [o for o in range(p.start_offset, p.end_offset)
                    if p.state_of(o) == (S.ACQUIRED, p.state_of(o)[1]) and p._records[o].member_id == member]
            if held:
                o = rng.choice(held)
                t = rng.choice([A.ACCEPT, A.RELEASE, A.REJECT])
                p.acknowledge(member, [(o, o, [t])])
                if t == A.ACCEPT:
                    accepted.add(o)
        else:
            p.expire_locks(now)
        assert p.in_flight() <= 50, seed
        assert all(p.state_of(o) is not None for o in range(p.start_offset, p.end_offset)), seed
        assert p.start_offset == p.end_offset or p.state_of(p.start_offset)[0] not in (
            S.ACKNOWLEDGED, S.ARCHIVED), seed
        for o in range(p.start_offset, p.end_offset):
            state, count = p.state_of(o)
            assert 0 <= count <= 4, seed
            if state == S.AVAILABLE:
                assert count < 4, seed  # at the limit it would be archived
        assert not any(p.state_of(o) is not None and p.state_of(o)[0] != S.ACKNOWLEDGED
                       for o in accepted), seed


def test_skip_ranges_are_archived_not_acquired_and_do_not_count() -> None:
    """Transaction markers and (read_committed) aborted data: archived when a read meets
    them, never in AcquiredRecords, not counted against MaxRecords; the start moves past
    them once what is before them is done."""
    p = sp(0)
    # 0-2 data, 3 marker, 4-6 aborted data, 7 marker, 8-9 data; MaxRecords 4
    got = p.acquire("m1", 0, 9, 4, 0, LOCK, skip=[(3, 3), (4, 7)])
    assert got == [AcquiredRange(0, 2, 1), AcquiredRange(8, 8, 1)]
    assert [p.state_of(o) for o in (3, 5, 7)] == [(S.ARCHIVED, 0)] * 3
    assert p.state_of(9) is None and p.end_offset == 9  # stopped at MaxRecords
    p.acknowledge("m1", [(0, 2, [A.ACCEPT])])
    assert p.start_offset == 8  # past the archived 3-7
    assert p.state_batches()[0].first_offset == 8  # 8 held (written as available)


def test_skip_over_released_records_archives_only_available_ones() -> None:
    p = sp(0)
    assert p.acquire("m1", 0, 3, 100, 0, LOCK) == [AcquiredRange(0, 3, 1)]
    p.acknowledge("m1", [(0, 0, [A.RELEASE]), (1, 1, [A.ACCEPT])])
    # 0 is AVAILABLE again, 2-3 still held by m1: a skip over 0-3 archives 0 only
    assert p.acquire("m2", 0, 3, 100, 0, LOCK, skip=[(0, 3)]) == []
    assert p.state_of(0) is None and p.start_offset == 2  # 0 archived, 1 acknowledged
    assert p.state_of(2) == (S.ACQUIRED, 1)
    # a read made only of skipped offsets changes the state (it must be written)
    v = p.version
    assert p.acquire("m2", 4, 6, 100, 0, LOCK, skip=[(4, 6)]) == []
    assert p.version == v + 1 and p.end_offset == 7
    assert p.next_fetch_offset() == 7


# Batches of a read for the acquisition modes: offsets 0-3, 4-9, 10-11, 12-19.
BATCHES = [(0, 3), (4, 9), (10, 11), (12, 19)]


def test_record_limit_splits_a_batch_and_leaves_the_rest_available() -> None:
    """ShareAcquireMode 1 (KIP-1206): never more than max_records, whatever the batches;
    the rest of the batch stays available for the next fetch (another member's)."""
    p = sp()
    assert p.acquire("m1", 0, 19, 6, 0, LOCK) == [AcquiredRange(0, 5, 1)]
    # 6 on was never acquired: past the end offset, the next fetch reads from it.
    assert p.state_of(5) == (S.ACQUIRED, 1) and p.state_of(6) is None
    assert p.end_offset == 6 and p.next_fetch_offset() == 6
    assert p.acquire("m2", 6, 19, 6, 0, LOCK) == [AcquiredRange(6, 11, 1)]
    assert p.acquired_count("m1") == 6 and p.acquired_count("m2") == 6


def test_batch_optimized_finishes_the_batch_of_the_last_record() -> None:
    """ShareAcquireMode 0: max_records 6 ends inside batch 4-9, so 4-9 is acquired whole
    (max_records exceeded for batch alignment, as Kafka); one ending on a batch's last
    offset takes nothing more."""
    p = sp()
    assert p.acquire("m1", 0, 19, 6, 0, LOCK, batches=BATCHES) == [AcquiredRange(0, 9, 1)]
    assert p.state_of(10) is None and p.next_fetch_offset() == 10
    assert p.acquire("m2", 10, 19, 2, 0, LOCK, batches=BATCHES) == [AcquiredRange(10, 11, 1)]
    # Released records in the middle of a batch: the acquisition still stops at its end.
    p.acknowledge("m1", [(2, 6, [A.RELEASE])])
    assert p.acquire("m3", 2, 19, 1, 0, LOCK, batches=BATCHES) == [AcquiredRange(2, 3, 2)]
    assert p.acquire("m3", 4, 19, 1, 0, LOCK, batches=BATCHES) == [AcquiredRange(4, 6, 2)]


def test_batch_optimized_respects_the_in_flight_bound() -> None:
    p = sp(window=8)
    assert p.acquire("m1", 0, 19, 6, 0, LOCK, batches=BATCHES) == [AcquiredRange(0, 7, 1)]
    assert p.in_flight() == 8


@pytest.mark.parametrize(("batch_size", "want"), [
    (0, [(0, 19)]),                          # no BatchSize: one range
    (4, [(0, 3), (4, 9), (10, 19)]),         # 12 - 10 < 4: 10-19 stays one range
    (5, [(0, 9), (10, 19)]),                 # 4 - 0 < 5: 0-9 together; 10 - 0 >= 5
    (12, [(0, 11), (12, 19)]),
    (100, [(0, 19)]),
])
def test_batch_size_cuts_batch_optimized_ranges_at_batch_boundaries(batch_size: int,
                                                                    want: list[tuple[int, int]]) -> None:
    """Kafka's createBatches: a new AcquiredRecords starts at a batch's base offset once the
    current one holds batch_size or more offsets; record-limit mode never cuts."""
    p = sp()
    got = p.acquire("m", 0, 19, 20, 0, LOCK, batches=BATCHES, batch_size=batch_size)
    assert [(a.first_offset, a.last_offset) for a in got] == want
    q = sp()
    assert q.acquire("m", 0, 19, 20, 0, LOCK, batch_size=4) == [AcquiredRange(0, 19, 1)]


def test_renew_moves_the_deadline_keeps_the_count_and_writes_nothing() -> None:
    """KIP-1222: RENEW re-locks from now for the lock duration; the delivery count and the
    durable state are unchanged (acknowledge returns False: nothing to write)."""
    p = sp()
    p.acquire("m1", 0, 3, 10, 0, LOCK)
    version = p.version
    assert p.acknowledge("m1", [(0, 1, [A.RENEW])], now_ms=900, lock_duration_ms=LOCK) is False
    assert p.version == version
    assert p.next_deadline_ms() == LOCK  # 2-3 still due at 1000
    assert p.expire_locks(LOCK) == 2     # 2-3 come back, 0-1 stay held
    assert p.state_of(0) == (S.ACQUIRED, 1) and p.state_of(2) == (S.AVAILABLE, 1)
    assert p.next_deadline_ms() == 900 + LOCK
    assert p.expire_locks(900 + LOCK - 1) == 0
    assert p.expire_locks(900 + LOCK) == 2
    # A renewal together with an ACCEPT is a durable change.
    p.acquire("m2", 0, 3, 10, 2000, LOCK)
    assert p.acknowledge("m2", [(0, 0, [A.RENEW]), (1, 1, [A.ACCEPT])], 2500, LOCK) is True


def test_renewing_what_the_member_does_not_hold_is_invalid_record_state() -> None:
    p = sp()
    p.acquire("m1", 0, 1, 10, 0, LOCK)
    for member, batch in (("m2", (0, 0, [A.RENEW])), ("m1", (2, 2, [A.RENEW]))):
        with pytest.raises(InvalidRecordStateError):
            p.acknowledge(member, [batch], 10, LOCK)
    p.expire_locks(LOCK)  # lock expired: no longer held
    with pytest.raises(InvalidRecordStateError):
        p.acknowledge("m1", [(0, 0, [A.RENEW])], LOCK + 1, LOCK)
