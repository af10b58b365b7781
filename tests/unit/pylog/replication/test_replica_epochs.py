"""pylog.replication.epochs: the leader's diverging-epoch check and the follower's
truncation point (Kafka's LeaderEpochFileCacheTest / AbstractFetcherThreadTest cases), then
the whole exchange between two real logcore logs until they are byte-identical."""

from __future__ import annotations

from typing import Any

import logcore
from pylog.replication.epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    diverging_epoch,
    epoch_end_offset,
    truncation_offset,
)

T0 = 1_700_000_000_000
CACHE = [(0, 0), (2, 10), (5, 20)]


def test_epoch_end_offset_follows_kafkas_end_offset_for() -> None:
    assert epoch_end_offset(CACHE, 5, 30) == (5, 30)  # the latest epoch ends at the log end
    assert epoch_end_offset(CACHE, 0, 30) == (0, 10)
    assert epoch_end_offset(CACHE, 1, 30) == (0, 10)  # unknown epoch: the one before it
    assert epoch_end_offset(CACHE, 3, 30) == (2, 20)
    assert epoch_end_offset(CACHE, 6, 30) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    assert epoch_end_offset([(3, 7)], 1, 9) == (1, 7)  # older than all: ends at the first start
    assert epoch_end_offset([], 1, 9) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    assert epoch_end_offset(CACHE, UNDEFINED_EPOCH, 30) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_leader_reports_divergence_only_when_the_follower_is_past_its_epoch_end() -> None:
    assert diverging_epoch(CACHE, -1, 25, 30) is None  # no last fetched epoch: nothing to say
    assert diverging_epoch(CACHE, 5, 25, 30) is None  # same epoch, within it
    assert diverging_epoch(CACHE, 2, 20, 30) is None  # exactly at the end of epoch 2
    assert diverging_epoch(CACHE, 2, 22, 30) == (2, 20)  # epoch 2 ended at 20 here
    assert diverging_epoch(CACHE, 3, 15, 30) == (2, 20)  # the leader never had epoch 3
    assert diverging_epoch(CACHE, 4, 21, 30) == (2, 20)


def test_follower_truncation_points() -> None:
    follower = [(0, 0), (2, 10), (3, 18)]
    # The leader's epoch 2 ended at 15; ours ran to 18: cut at 15, done.
    assert truncation_offset(2, 15, follower, 25, 5) == (15, True)
    # The leader's epoch 2 ends after ours: keep ours (cut at our end of epoch 2).
    assert truncation_offset(2, 20, follower, 25, 5) == (18, True)
    # The leader answers with epoch 1, which we never had: cut to our end of epoch 0 and
    # ask again about epoch 0.
    assert truncation_offset(1, 12, follower, 25, 5) == (10, False)
    # Leader knows no epoch at all at or before ours: keep what is committed.
    assert truncation_offset(UNDEFINED_EPOCH, UNDEFINED_OFFSET, follower, 25, 5) == (5, True)
    # A follower with no epochs keeps at most the leader's end.
    assert truncation_offset(2, 15, [], 25, 5) == (15, True)
    assert truncation_offset(2, 30, [], 25, 5) == (25, True)


def _batch(n: int, tag: bytes) -> bytearray:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(tag + b"%d" % i, key=b"k%d" % i, timestamp_ms=T0)
    return bytearray(b.build())


def _replicate(leader: Any, follower: Any, follower_hw: int = 0) -> int:
    """Drive the fetch protocol until the follower caught up; returns the rounds used."""
    for rounds in range(1, 20):
        last = follower.leader_epoch_cache.latest_epoch
        fetch_offset = follower.log_end_offset
        div = diverging_epoch(leader.leader_epoch_cache.entries, -1 if last is None else last,
                              fetch_offset, leader.log_end_offset)
        if div is not None:
            offset, _settled = truncation_offset(div[0], div[1], follower.leader_epoch_cache.entries,
                                                 fetch_offset, follower_hw)
            follower.truncate_to(offset)
            continue
        if fetch_offset == leader.log_end_offset:
            return rounds
        region = leader.read(fetch_offset, 1 << 20)
        follower.append(bytearray(region.read()), assign_offsets=False)
    raise AssertionError("no convergence")


def _read_all(log: Any) -> bytes:
    return log.read(0, 1 << 24).read() if log.log_end_offset else b""


def test_diverged_tail_is_truncated_to_the_epoch_boundary_and_refetched(tmp_path) -> None:
    a = logcore.Log(tmp_path / "a" / "t-0")
    b = logcore.Log(tmp_path / "b" / "t-0")
    try:
        a.append(_batch(5, b"x"), leader_epoch=0)
        a.append(_batch(5, b"y"), leader_epoch=0)
        _replicate(a, b)
        assert b.log_end_offset == 10 and _read_all(a) == _read_all(b)
        a.append(_batch(4, b"lost"), leader_epoch=0)  # a's tail, never replicated
        # b becomes leader in epoch 1 at offset 10 and takes new records.
        b.assign_leader_epoch(1)
        b.append(_batch(3, b"new"), leader_epoch=1)
        assert b.leader_epoch_cache.entries == [(0, 0), (1, 10)]
        # a follows b: its fetch at 14 with last epoch 0 diverges at 10.
        assert diverging_epoch(b.leader_epoch_cache.entries, 0, 14, b.log_end_offset) == (0, 10)
        _replicate(b, a, follower_hw=10)
        assert a.log_end_offset == b.log_end_offset == 13
        assert _read_all(a) == _read_all(b)
        assert a.leader_epoch_cache.entries == b.leader_epoch_cache.entries
    finally:
        a.close()
        b.close()


def test_truncation_over_several_epochs_takes_several_rounds(tmp_path) -> None:
    """The follower has epochs the leader never saw (1 and 3): it walks back one
    exchange at a time until both agree."""
    lead = logcore.Log(tmp_path / "l" / "t-0")
    foll = logcore.Log(tmp_path / "f" / "t-0")
    try:
        lead.append(_batch(4, b"a"), leader_epoch=0)
        _replicate(lead, foll)
        foll.append(_batch(2, b"f1"), leader_epoch=1)  # as a short-lived leader in epoch 1
        foll.append(_batch(2, b"f3"), leader_epoch=3)  # and again in epoch 3
        lead.append(_batch(3, b"b"), leader_epoch=2)
        lead.assign_leader_epoch(4)
        lead.append(_batch(1, b"c"), leader_epoch=4)
        rounds = _replicate(lead, foll, follower_hw=4)
        assert rounds >= 3
        assert _read_all(lead) == _read_all(foll)
        assert foll.leader_epoch_cache.entries == lead.leader_epoch_cache.entries == [(0, 0), (2, 4), (4, 7)]
    finally:
        lead.close()
        foll.close()


def test_a_follower_that_led_an_epoch_without_appending_drops_it_and_catches_up(tmp_path) -> None:
    """The __transaction_state stall of issue 19: a broker became leader in epoch 1 at its
    log end (1) and appended nothing before it lost the leadership. Following the new
    leader it fetches at 1 with last epoch 1; the leader (epoch 0 ended at 1 there) answers
    diverging (0, 1) and the truncation point is 1, the log end: nothing to cut, but the
    empty epoch 1 must leave the cache (Kafka's truncateTo always truncates it), else
    every fetch asks about epoch 1 again and the follower never moves."""
    lead = logcore.Log(tmp_path / "l" / "t-0")
    foll = logcore.Log(tmp_path / "f" / "t-0")
    try:
        lead.append(_batch(1, b"a"), leader_epoch=0)
        _replicate(lead, foll)
        foll.assign_leader_epoch(1)  # led epoch 1, appended nothing
        lead.assign_leader_epoch(2)
        lead.append(_batch(5, b"b"), leader_epoch=2)
        leader_epochs = lead.leader_epoch_cache.entries
        assert diverging_epoch(leader_epochs, 1, 1, lead.log_end_offset) == (0, 1)
        assert not foll.truncate_to(1)  # no record to remove...
        assert foll.leader_epoch_cache.entries == [(0, 0)]  # ...but epoch 1 is gone
        _replicate(lead, foll)
        assert _read_all(lead) == _read_all(foll)
        assert lead.leader_epoch_cache.entries == [(0, 0), (2, 1)]
        assert foll.leader_epoch_cache.entries == lead.leader_epoch_cache.entries
    finally:
        lead.close()
        foll.close()
    reopened = logcore.Log(tmp_path / "f" / "t-0")  # the leader-epoch file agrees
    try:
        assert reopened.leader_epoch_cache.entries == [(0, 0), (2, 1)]
    finally:
        reopened.close()
