"""logcore's follower append (Kafka's ``UnifiedLog.appendAsFollower``): a follower stores
its leader's batches as they are, cleaned ones included (fewer records than their offset
delta says, emptied batches, tombstones with a delete horizon, transaction markers).

Runs under both twins (compiled and ``LOGCORE_PUREPYTHON=1``), as every logcore suite.
"""

from __future__ import annotations

import os
import struct

import pytest
from _harness.log_reading import all_batches

from logcore import (
    AbortedTxn,
    BatchBuilder,
    CorruptRecordError,
    Log,
    LogConfig,
    ManualClock,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
    iter_batches,
    validate_for_append,
)
from logcore.cleaner import Cleaner

T0 = 1_700_000_000_000
DAY = 86_400_000


def cfg(**kw) -> LogConfig:
    base = dict(cleanup_policy="compact", segment_bytes=1200, segment_index_bytes=4096,
                index_interval_bytes=100, file_delete_delay_ms=0, delete_retention_ms=DAY)
    base.update(kw)
    return LogConfig(**base)


def batch(pairs, ts, *, pid=-1, epoch=-1, seq=-1, transactional=False, leader_epoch=-1,
          base_offset=0) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=transactional, partition_leader_epoch=leader_epoch,
                     base_offset=base_offset)
    for i, (k, v) in enumerate(pairs):
        b.append(v, key=k, timestamp_ms=ts + i)
    return b.build()


def raw_batches(log: Log) -> list[bytes]:
    """Every batch of the log, as bytes, in offset order."""
    out = []
    for b in all_batches(log):
        region = log.read(b.base_offset, 1)
        data = region.read()
        (length,) = struct.unpack_from(">i", data, 8)
        out.append(bytes(data[: 12 + length]))
    return out


def records(log: Log):
    return [(r.offset, r.key, r.value, r.timestamp, b.is_control)
            for b in all_batches(log) for r in b]


def replicate(leader: Log, follower: Log, max_bytes: int = 700) -> int:
    """Fetch as the replica fetcher does (from the follower's log end offset, at most
    ``max_bytes`` a round, the leader's batches unchanged) until caught up; the rounds."""
    rounds = 0
    while follower.log_end_offset < leader.log_end_offset:
        region = leader.read(follower.log_end_offset, max_bytes)
        assert region, f"nothing to fetch at {follower.log_end_offset}"
        follower.append(bytearray(region.read()), assign_offsets=False)
        rounds += 1
    return rounds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def cleaned_leader(path: str, clock: ManualClock) -> Log:
    """A compacted leader log with cleaned batches holding offset gaps, an idempotent
    producer's emptied batch, tombstones kept until their horizon, in leader epochs 1 and 3."""
    leader = Log(path, cfg(), clock=clock)
    for i in range(120):
        pairs = [(b"k%d" % ((i * 3 + j) % 7), b"v%d-%d" % (i, j)) for j in range(3)]
        leader.append(batch(pairs, clock.time_ms()), leader_epoch=1)
        clock.advance(1)
    for i in range(5):  # an idempotent producer whose batches all lose their records
        leader.append(batch([(b"pid-key", b"p%d" % i)], clock.time_ms(), pid=77, epoch=2,
                            seq=i), leader_epoch=1)
    leader.append(batch([(b"pid-key", b"other")], clock.time_ms()), leader_epoch=3)
    leader.append(batch([(b"k1", None), (b"k2", None)], clock.time_ms()), leader_epoch=3)
    for i in range(20):
        leader.append(batch([(b"z%d" % (i % 4), b"late%d" % i)], clock.time_ms()),
                      leader_epoch=3)
    leader.roll()
    stats = Cleaner(1 << 20).clean(leader)
    assert stats is not None and stats.empty_batches_kept >= 1
    return leader


def test_cleaned_segments_are_copied_to_an_empty_follower(tmp_path, clock) -> None:
    leader = cleaned_leader(str(tmp_path / "leader-0"), clock)
    raws = raw_batches(leader)
    parsed = [next(iter_batches(r)) for r in raws]
    gappy = [b for b in parsed if 0 < b.records_count < b.last_offset_delta + 1]
    empty = [b for b in parsed if b.records_count == 0]
    assert gappy and empty, "the leader must hold what the produce checks refuse"
    # The produce-time validator refuses both kinds (the follower must not run it).
    for b, raw in zip(parsed, raws, strict=True):
        if b in (gappy[0], empty[0]):
            with pytest.raises(CorruptRecordError):
                validate_for_append(bytearray(raw), next_offset=b.base_offset,
                                    max_message_bytes=1 << 20)
    assert any(r[2] is None for r in records(leader)), "tombstones are kept"

    follower = Log(str(tmp_path / "follower-0"), cfg(), clock=clock)
    rounds = replicate(leader, follower)
    assert rounds > 1
    assert follower.log_end_offset == leader.log_end_offset
    assert raw_batches(follower) == raws  # byte for byte, offsets and epochs kept
    assert records(follower) == records(leader)
    # Each epoch starts at its first batch the follower received (the cleaner removed
    # every batch of the leader's first offsets).
    firsts: dict[int, int] = {}
    for b in parsed:
        firsts.setdefault(b.partition_leader_epoch, b.base_offset)
    assert follower.leader_epoch_cache.entries == sorted(firsts.items()) and len(firsts) == 2
    # The emptied batch kept producer 77's sequence: as leader, the follower recognises
    # its last batch as a duplicate and takes the next sequence.
    dup = follower.append(batch([(b"pid-key", b"p4")], clock.time_ms(), pid=77, epoch=2,
                                seq=4))
    assert dup.duplicate
    nxt = follower.append(batch([(b"pid-key", b"p5")], clock.time_ms(), pid=77, epoch=2, seq=5))
    assert not nxt.duplicate and nxt.first_offset == leader.log_end_offset
    follower.close()
    # The copied segments pass recovery unchanged (a crash: no clean-shutdown marker).
    os.remove(os.path.join(str(tmp_path / "follower-0"), "recovery-point-offset-checkpoint"))
    with Log(str(tmp_path / "follower-0"), cfg(), clock=clock) as again:
        assert raw_batches(again)[: len(raws)] == raws
        assert again.log_end_offset == leader.log_end_offset + 1
    leader.close()


def test_a_gap_at_the_start_and_between_batches(tmp_path, clock) -> None:
    follower = Log(str(tmp_path / "f-0"), cfg(segment_bytes=1 << 20), clock=clock)
    first = batch([(b"a", b"1")], T0, base_offset=10, leader_epoch=2)
    second = batch([(b"b", b"2")], T0, base_offset=25, leader_epoch=4)
    info = follower.append(bytearray(first + second), assign_offsets=False)
    assert (info.first_offset, info.last_offset, info.batch_count) == (10, 25, 2)
    assert follower.log_end_offset == 26
    assert follower.leader_epoch_cache.entries == [(2, 10), (4, 25)]
    assert [r[0] for r in records(follower)] == [10, 25]
    follower.close()


def test_a_set_larger_than_a_segment_rolls_as_it_goes(tmp_path, clock) -> None:
    leader = cleaned_leader(str(tmp_path / "leader-0"), clock)
    follower = Log(str(tmp_path / "follower-0"), cfg(segment_bytes=300), clock=clock)
    everything = b"".join(raw_batches(leader))
    assert len(everything) > 2 * 300
    info = follower.append(bytearray(everything), assign_offsets=False)
    assert info.last_offset + 1 == follower.log_end_offset == leader.log_end_offset
    assert follower.num_segments > 1
    assert raw_batches(follower) == raw_batches(leader)
    leader.close()
    follower.close()


def test_transactions_and_markers_reach_the_follower(tmp_path, clock) -> None:
    c = cfg(segment_bytes=1 << 20)
    leader = Log(str(tmp_path / "leader-0"), c, clock=clock)
    leader.append(batch([(b"a", b"1"), (b"a", b"2")], T0, pid=1, epoch=0, seq=0,
                        transactional=True))                             # 0-1 committed
    leader.append_control(1, 0, commit=True, coordinator_epoch=0)         # 2
    leader.append(batch([(b"a", b"x")], T0, pid=2, epoch=0, seq=0, transactional=True))  # 3
    leader.append(batch([(b"b", b"1")], T0, pid=3, epoch=0, seq=0, transactional=True))  # 4
    leader.append_control(2, 0, commit=False, coordinator_epoch=0)        # 5 aborts 3
    leader.append(batch([(b"c", b"1")], T0, pid=4, epoch=0, seq=0, transactional=True))  # 6 open
    leader.append_control(3, 0, commit=True, coordinator_epoch=0)         # 7
    leader.append(batch([(b"a", b"3")], T0))                              # 8
    leader.roll()
    assert Cleaner(1 << 20).clean(leader) is not None  # the aborted a at 3 is removed
    assert 3 not in [r[0] for r in records(leader)]
    follower = Log(str(tmp_path / "follower-0"), c, clock=clock)
    follower.track_high_watermark(0)
    replicate(leader, follower, max_bytes=1)  # one batch a round
    assert records(follower) == records(leader)
    assert follower.aborted_transactions(0, 100) == leader.aborted_transactions(0, 100) == [
        AbortedTxn(2, 3, 5, 4)]
    assert follower.first_unstable_offset == leader.first_unstable_offset == 6
    # Markers above the follower's high watermark keep their transactions unstable.
    assert follower.last_stable_offset(high_watermark=6) == 4
    follower.on_high_watermark(9)
    assert follower.last_stable_offset(high_watermark=9) == 6
    leader.close()
    follower.close()


def test_a_corrupt_batch_is_refused_with_its_offset_and_position(tmp_path, clock) -> None:
    follower = Log(str(tmp_path / "f-0"), cfg(segment_bytes=1 << 20), clock=clock)
    good = batch([(b"a", b"1")], T0, base_offset=0)
    bad = bytearray(batch([(b"b", b"2"), (b"c", b"3")], T0, base_offset=1))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=(
            rf"batch 1 \(base offset 1\) at position {len(good)} is corrupt: stored CRC")) as e:
        follower.append(bytearray(good) + bad, assign_offsets=False)
    assert e.value.position == len(good) and e.value.batch_index == 1
    assert follower.log_end_offset == 0 and follower.active_segment.size == 0
    # Framing: a batch longer than the bytes received, and a magic other than 2.
    short = bytearray(good)[:-3]
    with pytest.raises(CorruptRecordError, match="at position 0 declares"):
        follower.append(short, assign_offsets=False)
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        follower.append(old, assign_offsets=False)
    assert follower.leader_epoch_cache.entries == []
    follower.append(bytearray(good), assign_offsets=False)
    assert follower.log_end_offset == 1
    follower.close()


def test_offsets_below_the_log_end_are_unexpected(tmp_path, clock) -> None:
    follower = Log(str(tmp_path / "f-0"), cfg(segment_bytes=1 << 20), clock=clock)
    follower.append(bytearray(batch([(b"a", b"1")] * 3, T0)), assign_offsets=False)
    with pytest.raises(UnexpectedAppendOffsetError, match=r"offsets \[2, 3\], expected >= 3") as e:
        follower.append(bytearray(batch([(b"a", b"1")] * 2, T0, base_offset=2)),
                        assign_offsets=False)
    assert (e.value.first_offset, e.value.last_offset, e.value.log_end_offset) == (2, 3, 3)
    assert follower.log_end_offset == 3
    follower.close()


def test_a_follower_batch_larger_than_a_segment_is_refused(tmp_path, clock) -> None:
    follower = Log(str(tmp_path / "f-0"), cfg(segment_bytes=300), clock=clock)
    big = batch([(b"k", b"x" * 400)], T0)
    with pytest.raises(RecordTooLargeError):
        follower.append(bytearray(big), assign_offsets=False)
    assert follower.log_end_offset == 0
    follower.close()
