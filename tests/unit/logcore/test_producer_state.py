"""Idempotent producers: duplicate detection, sequence and epoch checks, snapshots.

The snapshot files are read back with an independent parser written here from
docs/formats.md (ProducerSnapshot v1), not with logcore's.
"""

from __future__ import annotations

import gc
import os
import struct

import crc32c as crc32c_ref
import pytest

import logcore
from logcore import (
    BatchBuilder,
    InvalidProducerEpochError,
    Log,
    LogConfig,
    ManualClock,
    OutOfOrderSequenceError,
)

T0 = 1_700_000_000_000
PID = 4242
I32_MAX = 2**31 - 1


def pbatch(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, ts: int = T0) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(b"v%d" % (seq + i), key=b"k", timestamp_ms=ts + i)
    return b.build()


def plain(n: int = 2) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(b"x", timestamp_ms=T0 + i)
    return b.build()


def small(**kw) -> LogConfig:
    base = dict(segment_bytes=1024, index_interval_bytes=100, segment_index_bytes=4096)
    base.update(kw)
    return LogConfig(**base)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "topic-0")


def read_snapshot(path: str) -> list[tuple[int, ...]]:
    """Independent ProducerSnapshot v1 parser."""
    with open(path, "rb") as f:
        data = f.read()
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == crc32c_ref.crc32c(data[6:])
    (count,) = struct.unpack_from(">i", data, 6)
    assert len(data) == 10 + 46 * count
    return [struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count)]


def snapshots(logdir: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(logdir) if n.endswith(".snapshot"))


# --------------------------------------------------------------------------- rules


def test_plain_batches_keep_no_state(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(plain())
        assert log.producer_state.producers == {}


def test_duplicate_returns_original_offsets_and_writes_nothing(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        log.append(plain(3))
        first = log.append(pbatch(0))
        assert (first.first_offset, first.last_offset, first.duplicate) == (3, 4, False)
        log.append(pbatch(2))
        size, leo = log.size_in_bytes, log.log_end_offset
        again = log.append(pbatch(0))
        assert again.duplicate and (again.first_offset, again.last_offset) == (3, 4)
        assert again.log_append_time_ms == -1
        assert (log.size_in_bytes, log.log_end_offset) == (size, leo)
        nxt = log.append(pbatch(4))
        assert not nxt.duplicate and nxt.first_offset == leo


def test_duplicate_window_is_the_last_five_batches(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        offsets = [log.append(pbatch(2 * i)).first_offset for i in range(6)]
        for i in range(1, 6):  # the last five are recognised
            assert log.append(pbatch(2 * i)).first_offset == offsets[i]
        with pytest.raises(OutOfOrderSequenceError):  # the sixth-last is forgotten
            log.append(pbatch(0))
        assert log.log_end_offset == 12


def test_duplicate_needs_same_epoch_and_both_sequences(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        log.append(pbatch(0, n=2))
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(0, n=3))  # same first sequence, different last
        assert log.log_end_offset == 2


def test_sequence_gap_is_out_of_order_and_nothing_written(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(pbatch(0))
        size = log.size_in_bytes
        with pytest.raises(OutOfOrderSequenceError) as ei:
            log.append(pbatch(5))
        assert ei.value.sequence == 5 and ei.value.expected == 2 and ei.value.producer_id == PID
        assert log.size_in_bytes == size and log.log_end_offset == 2
        log.append(pbatch(2))  # the right one still goes in
        assert log.log_end_offset == 4


def test_stale_epoch_is_refused(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(pbatch(0, epoch=3))
        with pytest.raises(InvalidProducerEpochError) as ei:
            log.append(pbatch(2, epoch=2))
        assert (ei.value.epoch, ei.value.current_epoch) == (2, 3)
        assert log.log_end_offset == 2


def test_new_epoch_must_start_at_zero(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(pbatch(0, epoch=0))
        with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
            log.append(pbatch(2, epoch=1))
        log.append(pbatch(0, epoch=1))
        # the old epoch's batches are no longer duplicates, and the old epoch is stale
        with pytest.raises(InvalidProducerEpochError):
            log.append(pbatch(0, epoch=0))
        assert log.log_end_offset == 4


def test_unknown_producer_accepted_at_any_sequence(logdir, clock) -> None:
    # Kafka since KIP-360: no state for the producer (new, expired, retention removed its
    # batches) means any sequence is accepted.
    with Log(logdir, small(), clock=clock) as log:
        log.append(pbatch(17))
        log.append(pbatch(19))
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(30))


def test_sequence_wraps_at_int32_max(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        log.append(pbatch(I32_MAX - 3, n=2))  # last sequence MAX-2
        log.append(pbatch(I32_MAX - 1, n=3))  # MAX-1, MAX, 0: wraps inside the batch
        assert log.producer_state.producers[PID].last_seq == 0
        log.append(pbatch(1, n=1))
        assert log.append(pbatch(I32_MAX - 1, n=3)).duplicate
        log.append(pbatch(2, n=1))
        assert log.log_end_offset == 7


def test_wrap_from_max_to_zero_between_batches(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(pbatch(I32_MAX - 1, n=2))  # ends at MAX
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(1))
        log.append(pbatch(0))


def test_producers_are_independent_and_multi_batch_appends_checked(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        log.append(bytearray(pbatch(0, pid=1) + pbatch(0, pid=2) + pbatch(2, pid=1)))
        assert log.producer_state.producers[1].last_seq == 3
        assert log.producer_state.producers[2].last_seq == 1
        with pytest.raises(OutOfOrderSequenceError):
            log.append(bytearray(pbatch(4, pid=1) + pbatch(9, pid=1)))
        assert log.log_end_offset == 6
        assert log.producer_state.producers[1].last_seq == 3  # nothing of the refused set
        assert log.append(pbatch(0, pid=2)).duplicate


def test_replica_append_updates_state_without_checks(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        b0 = BatchBuilder(base_offset=0, producer_id=PID, producer_epoch=0, base_sequence=0)
        b0.append(b"a", timestamp_ms=T0)
        b1 = BatchBuilder(base_offset=1, producer_id=PID, producer_epoch=0, base_sequence=9)
        b1.append(b"b", timestamp_ms=T0)
        log.append(bytearray(b0.build() + b1.build()), assign_offsets=False)
        assert log.producer_state.producers[PID].last_seq == 9
        assert log.append(pbatch(9, n=1)).duplicate


def test_log_append_time_duplicate_reports_original_time(logdir, clock) -> None:
    cfg = small(message_timestamp_type="LogAppendTime")
    with Log(logdir, cfg, clock=clock) as log:
        first = log.append(pbatch(0))
        clock.advance(5000)
        again = log.append(pbatch(0))
        assert again.duplicate and again.log_append_time_ms == first.log_append_time_ms == T0


# --------------------------------------------------------------------------- durability


def test_snapshot_format_at_close(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        log.append(plain(1))
        log.append(pbatch(0, n=3, pid=7, epoch=2, ts=T0 + 10))
        log.append(pbatch(5, n=1, pid=9))
    assert snapshots(logdir) == [5]
    rows = sorted(read_snapshot(os.path.join(logdir, f"{5:020d}.snapshot")))
    assert rows == [(7, 2, 2, 3, 2, T0 + 12, -1, -1), (9, 0, 5, 4, 0, T0, -1, -1)]


def test_snapshot_taken_at_roll_covers_offsets_below_it(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        seq = 0
        while log.num_segments < 3:
            log.append(pbatch(seq, n=4))
            seq += 4
        bases = log.segment_base_offsets
        for base in bases[1:]:
            rows = read_snapshot(os.path.join(logdir, f"{base:020d}.snapshot"))
            assert rows[0][0] == PID and rows[0][3] == base - 1  # last offset below the roll


@pytest.mark.parametrize("clean", [True, False])
def test_restart_keeps_duplicate_detection(logdir, clock, clean) -> None:
    log = Log(logdir, small(), clock=clock)
    seq = 0
    offsets = {}
    while log.num_segments < 3:
        offsets[seq] = log.append(pbatch(seq, n=4)).first_offset
        seq += 4
    leo, active_base = log.log_end_offset, log.segment_base_offsets[-1]
    if clean:
        log.close()
    else:
        del log  # as if the process died: no close, no snapshot at the end
        gc.collect()
    log = Log(logdir, small(), clock=clock)
    try:
        assert log.recovered is not clean
        # A snapshot keeps each producer's last batch (Kafka's format); batches after the
        # newest snapshot are replayed from the log, up to the last five.
        seqs = sorted(offsets)
        known = seqs[-1:] if clean else [s for s in seqs[-5:] if offsets[s] >= active_base]
        for s in known:
            info = log.append(pbatch(s, n=4))
            assert info.duplicate and info.first_offset == offsets[s]
        assert log.log_end_offset == leo
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(seq + 4, n=4))
        log.append(pbatch(seq, n=4))
    finally:
        log.close()


def test_corrupt_snapshot_is_ignored_and_state_replayed(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        seq = 0
        while log.num_segments < 3:
            log.append(pbatch(seq, n=4))
            seq += 4
        last = log.append(pbatch(seq, n=4)).first_offset
    newest = snapshots(logdir)[-1]
    path = os.path.join(logdir, f"{newest:020d}.snapshot")
    with open(path, "r+b") as f:
        f.seek(12)
        byte = f.read(1)
        f.seek(12)
        f.write(bytes([byte[0] ^ 0xFF]))
    with Log(logdir, small(), clock=clock) as log:
        assert newest not in snapshots(logdir)
        info = log.append(pbatch(seq, n=4))
        assert info.duplicate and info.first_offset == last
        with pytest.raises(OutOfOrderSequenceError):
            log.append(pbatch(seq, n=2))


def test_truncation_forgets_state_past_the_new_end(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        offsets = []
        seq = 0
        while log.num_segments < 3:
            offsets.append(log.append(pbatch(seq, n=4)).first_offset)
            seq += 4
        # cut back into the first segment: later snapshots must go too
        cut = offsets[2]
        log.truncate_to(cut)
        assert log.log_end_offset == cut
        assert all(s <= cut for s in snapshots(logdir))
        assert log.producer_state.producers[PID].last_seq == 7
        assert log.append(pbatch(4, n=4)).duplicate
        info = log.append(pbatch(8, n=4))  # the removed batch can be written again
        assert not info.duplicate and info.first_offset == cut
    with Log(logdir, small(), clock=clock) as log:
        assert log.append(pbatch(8, n=4)).first_offset == cut


def test_truncate_fully_drops_all_state(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        while log.num_segments < 2:
            log.append(pbatch(log.log_end_offset, n=4))
        log.truncate_fully_and_start_at(100)
        assert log.producer_state.producers == {}
        assert snapshots(logdir) == []
        assert not log.append(pbatch(0, n=4)).duplicate


def test_retention_deletes_old_snapshots_and_expires_producers(logdir, clock) -> None:
    cfg = small(file_delete_delay_ms=0, producer_id_expiration_ms=60_000)
    with Log(logdir, cfg, clock=clock) as log:
        while log.num_segments < 4:
            log.append(pbatch(log.log_end_offset, n=4))
        log.append(pbatch(log.log_end_offset, n=4, pid=99, ts=T0 + 50_000))
        assert len(snapshots(logdir)) == 3
        log.delete_records_before(log.segment_base_offsets[2])
        log.apply_retention()
        assert snapshots(logdir) and min(snapshots(logdir)) >= log.log_start_offset
        assert set(log.producer_state.producers) == {PID, 99}
        clock.advance(60_010)  # PID's last batch is 60 s old, producer 99's only 10 s
        log.apply_retention()
        assert set(log.producer_state.producers) == {99}
        # an expired producer is unknown again: any sequence goes
        assert not log.append(pbatch(1000, n=1, ts=clock.time_ms())).duplicate
    with Log(logdir, cfg, clock=clock) as log:
        assert set(log.producer_state.producers) == {PID, 99}
        clock.advance(60_000)
    with Log(logdir, cfg, clock=clock) as log:  # expired at open too
        assert log.producer_state.producers == {}


def test_snapshot_parse_errors_are_precise(tmp_path) -> None:
    from logcore.producer_state import decode_snapshot

    for data, msg in [(b"\x00", "too short"), (b"\x00\x02" + bytes(8), "version"),
                      (b"\x00\x01" + bytes(8), "CRC")]:
        with pytest.raises(logcore.CorruptRecordError, match=msg):
            decode_snapshot(data, "x.snapshot")


def test_torn_snapshot_and_leftover_tmp_are_ignored(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        for seq in range(0, 10, 2):
            log.append(pbatch(seq))
    leo = 10
    path = os.path.join(logdir, f"{leo:020d}.snapshot")
    open(path, "wb").close()  # a crash right after the rename, before the data hit the disk
    with open(path + ".tmp", "wb") as f:
        f.write(b"half a snapshot")
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        assert not os.path.exists(path + ".tmp")
        # no usable snapshot: the segment is replayed, all five batches are known again
        for seq in range(0, 10, 2):
            info = log.append(pbatch(seq))
            assert info.duplicate and info.first_offset == seq
        assert log.log_end_offset == 10


def test_recovery_cut_below_a_snapshot_drops_it(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        for seq in range(0, 10, 2):
            log.append(pbatch(seq))
        size_before_last = log.size_in_bytes - len(pbatch(8))
    # unclean: no marker, and the last batch is torn
    os.unlink(os.path.join(logdir, ".kafka_cleanshutdown"))
    seg = os.path.join(logdir, f"{0:020d}.log")
    os.truncate(seg, size_before_last + 20)
    with Log(logdir, small(segment_bytes=1 << 20), clock=clock) as log:
        assert log.recovered and log.log_end_offset == 8
        assert 10 not in snapshots(logdir)
        assert log.producer_state.producers[PID].last_seq == 7
        info = log.append(pbatch(8))  # the lost batch is written again, not a duplicate
        assert not info.duplicate and info.first_offset == 8
