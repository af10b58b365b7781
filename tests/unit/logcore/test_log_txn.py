"""Transactions in logcore: open/commit/abort, the last stable offset, ``.txnindex``,
snapshots, recovery, truncation, retention, fencing.

Markers and index entries are checked byte for byte with parsers written here from
docs/formats.md (Kafka's EndTransactionMarker and AbortedTxn), not with logcore's.
"""

from __future__ import annotations

import os
import struct

import pytest

import logcore
from logcore import (
    AbortedTxn,
    BatchBuilder,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    Log,
    LogConfig,
    ManualClock,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    iter_batches,
)
from logcore.checkpoint import RECOVERY_POINT_CHECKPOINT, write_offset_checkpoint

T0 = 1_700_000_000_000


def txn(pid: int, seq: int, n: int = 2, *, epoch: int = 0, transactional: bool = True,
        key: bytes = b"k") -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=transactional)
    for i in range(n):
        b.append(b"v%d" % (seq + i), key=key, timestamp_ms=T0 + i)
    return b.build()


def small(**kw) -> LogConfig:
    base = dict(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096,
                file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "topic-0")


def txnindex_entries(path: str) -> list[tuple[int, ...]]:
    """Independent AbortedTxn parser: 34-byte entries, int16 version 0 + 4 int64s."""
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) % 34 == 0
    out = []
    for pos in range(0, len(data), 34):
        version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, pos)
        assert version == 0
        out.append((pid, first, last, lso))
    return out


def all_txnindex(logdir: str) -> dict[int, list[tuple[int, ...]]]:
    return {int(n[:20]): txnindex_entries(os.path.join(logdir, n))
            for n in sorted(os.listdir(logdir)) if n.endswith(".txnindex")}


def batches(log: Log):
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        region = log.read(off, 1 << 30)
        if not region.size:
            break
        out.extend(b for b in iter_batches(region.read()) if b.last_offset >= off)
        off = region.last_offset + 1
    return out


def marker_of(batch) -> tuple[int, int]:
    """(type, coordinator epoch) of a control batch, parsed from its record bytes."""
    (rec,) = list(batch)
    version, ctype = struct.unpack(">hh", rec.key)
    vversion, coord = struct.unpack(">hi", rec.value)
    assert version == 0 and vversion == 0
    return ctype, coord


# --------------------------------------------------------------------------- basics


def test_commit_and_abort_markers_are_kafka_control_batches(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(7, 0))
    info = log.append_control(7, 0, commit=True, coordinator_epoch=3, timestamp_ms=T0 + 5)
    assert info.first_offset == info.last_offset == 2
    log.append(txn(7, 2))
    info = log.append_control(7, 0, commit=False, coordinator_epoch=3)
    assert info.first_offset == 5
    bs = batches(log)
    commit, abort = bs[1], bs[3]
    for b, ctype in ((commit, 1), (abort, 0)):
        assert b.is_control and b.is_transactional
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (7, 0, -1)
        assert marker_of(b) == (ctype, 3)
    assert commit.max_timestamp == T0 + 5
    assert abort.max_timestamp == T0  # the log's clock
    log.close()


def test_lso_follows_the_oldest_open_transaction(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    assert log.first_unstable_offset is None and log.last_stable_offset() == 0
    log.append(txn(1, 0))          # 0-1, producer 1 opens at 0
    log.append(txn(2, 0))          # 2-3, producer 2 opens at 2
    log.append(txn(1, 2))          # 4-5
    assert log.first_unstable_offset == 0
    assert log.last_stable_offset() == 0
    assert log.last_stable_offset(high_watermark=0) == 0
    log.append_control(1, 0, commit=True, coordinator_epoch=0)  # 6
    assert log.first_unstable_offset == 2 and log.last_stable_offset() == 2
    assert log.last_stable_offset(high_watermark=1) == 1  # never above the high watermark
    log.append(txn(3, 0, transactional=False))  # an idempotent producer does not hold it
    log.append_control(2, 0, commit=False, coordinator_epoch=0)  # 9
    assert log.first_unstable_offset is None
    assert log.last_stable_offset() == log.log_end_offset == 10
    log.close()


def test_abort_writes_the_txnindex_entry_kafka_writes(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0))   # 0-1
    log.append(txn(2, 0))   # 2-3
    log.append_control(1, 0, commit=False, coordinator_epoch=0)  # 4: other open txn at 2
    log.append_control(2, 0, commit=False, coordinator_epoch=0)  # 5: none open: 5 + 1
    log.append(txn(1, 2))   # 6-7
    log.append_control(1, 0, commit=True, coordinator_epoch=0)   # 8: commits add nothing
    log.append_control(9, 0, commit=False, coordinator_epoch=0)  # 9: no txn: no entry
    assert all_txnindex(logdir) == {0: [(1, 0, 4, 2), (2, 2, 5, 6)]}
    assert log.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 5, 6)]
    log.close()


def test_no_txnindex_file_without_an_aborted_transaction(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0))
    log.append_control(1, 0, commit=True, coordinator_epoch=0)
    log.close()
    assert all_txnindex(logdir) == {}


def test_aborted_transactions_ranges(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=250), clock=clock)  # markers in several segments
    ends = []
    for i in range(6):
        pid = 10 + i
        log.append(txn(pid, 0, 3))
        ends.append(log.append_control(pid, 0, commit=i % 2 == 1, coordinator_epoch=0).first_offset)
    assert log.num_segments > 2
    aborted = [(10 + i, ends[i] - 3, ends[i]) for i in range(0, 6, 2)]
    got = [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(0, 10**6)]
    assert got == aborted
    # Only those overlapping [fetch_offset, upper_bound).
    second = aborted[1]
    got = log.aborted_transactions(second[1], second[1] + 1)
    assert [(t.producer_id, t.first_offset) for t in got] == [(second[0], second[1])]
    assert log.aborted_transactions(aborted[0][2] + 1, aborted[1][1]) == []  # a gap
    got = log.aborted_transactions(aborted[0][2], aborted[2][1] + 1)
    assert [t.producer_id for t in got] == [10, 12, 14]
    log.close()


def test_interleaved_transactions_and_last_stable_offsets_in_entries(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0))   # 0-1
    log.append(txn(2, 0))   # 2-3
    log.append(txn(3, 0))   # 4-5
    log.append_control(2, 0, commit=False, coordinator_epoch=0)  # 6: oldest other: 0
    log.append_control(1, 0, commit=False, coordinator_epoch=0)  # 7: oldest other: 4
    assert log.first_unstable_offset == 4
    log.append_control(3, 0, commit=False, coordinator_epoch=0)  # 8: none: 9
    assert [tuple(t) for t in log.aborted_transactions(0, 100)] == [
        (2, 2, 6, 0), (1, 0, 7, 4), (3, 4, 8, 9)]
    log.close()


# --------------------------------------------------------------------------- rules


def test_non_transactional_batch_while_open_is_invalid_txn_state(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    log.append(txn(1, 0))
    with pytest.raises(InvalidTxnStateError) as e:
        log.append(txn(1, 2, transactional=False))
    assert e.value.producer_id == 1 and "transaction open since offset 0" in str(e.value)
    assert log.log_end_offset == 2  # nothing written
    log.append_control(1, 0, commit=True, coordinator_epoch=0)
    assert log.append(txn(1, 2, transactional=False)).first_offset == 3
    log.close()


def test_marker_fencing_by_producer_and_coordinator_epoch(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    log.append(txn(1, 0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        log.append_control(1, 1, commit=True, coordinator_epoch=0)
    log.append_control(1, 2, commit=False, coordinator_epoch=5)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        log.append_control(1, 2, commit=True, coordinator_epoch=4)
    assert (e.value.coordinator_epoch, e.value.current_coordinator_epoch) == (4, 5)
    assert log.log_end_offset == end
    # A bumped epoch on a marker (the coordinator fenced the producer) is taken: the old
    # epoch's data is refused afterwards, and the new epoch starts at sequence 0.
    log.append_control(1, 3, commit=False, coordinator_epoch=5)
    with pytest.raises(InvalidProducerEpochError):
        log.append(txn(1, 2, epoch=2))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(txn(1, 5, epoch=3))
    assert log.append(txn(1, 0, epoch=3)).first_offset == end + 1
    log.close()


def test_coordinator_batches_skip_sequence_checks(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    log.append(txn(1, -1))
    log.append(txn(1, -1))  # same "sequence": not a duplicate, not out of order
    assert log.log_end_offset == 4 and log.first_unstable_offset == 0
    (p,) = log.active_producers()
    assert (p.producer_id, p.last_sequence, p.current_txn_start_offset) == (1, -1, 0)
    log.append_control(1, 1, commit=False, coordinator_epoch=0)  # epoch 1 now
    with pytest.raises(InvalidProducerEpochError):  # the epoch is still checked
        log.append(txn(1, -1, epoch=0))
    (p,) = log.active_producers()
    assert (p.producer_epoch, p.last_sequence, p.current_txn_start_offset) == (1, -1, -1)
    log.close()


def test_active_producers_describe_the_state(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    log.append(txn(1, 0, 3))
    log.append(txn(2, 0, transactional=False))
    log.append_control(3, 4, commit=True, coordinator_epoch=9, timestamp_ms=T0 + 7)
    got = sorted(tuple(p) for p in log.active_producers())
    assert got == [(1, 0, 2, T0 + 2, -1, 0), (2, 0, 1, T0 + 1, -1, -1), (3, 4, -1, T0 + 7, 9, -1)]
    log.close()


def test_replica_appends_apply_markers(logdir, clock, tmp_path) -> None:
    leader = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    leader.append(txn(1, 0))
    leader.append(txn(2, 0))
    leader.append_control(1, 0, commit=False, coordinator_epoch=0)
    raw = bytearray(leader.read(0, 1 << 20).read())
    follower = Log(str(tmp_path / "follower-0"), small(segment_bytes=1 << 20), clock=clock)
    follower.append(raw, assign_offsets=False)
    assert follower.first_unstable_offset == 2
    assert follower.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 4, 2)]
    leader.close()
    follower.close()


def test_replicated_log_keeps_a_transaction_unstable_until_its_marker_is_replicated(
        logdir, clock) -> None:
    """Kafka's ``unreplicatedTxns``: with the high watermark below a COMMIT marker, a new
    leader from the ISR may not have the marker, so the transaction still holds the LSO."""
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.track_high_watermark(0)
    log.append(txn(1, 0))                                        # 0-1
    log.append(txn(2, 0))                                        # 2-3
    log.append_control(1, 0, commit=True, coordinator_epoch=0)   # 4
    assert log.first_unstable_offset == 2  # producer 2 is the only one open
    assert log.last_stable_offset(high_watermark=4) == 0  # marker 4 not below the HW
    assert log.last_stable_offset(high_watermark=5) == 2
    log.on_high_watermark(3)
    assert log.last_stable_offset(high_watermark=3) == 0
    log.on_high_watermark(5)  # marker 4 replicated: forgotten
    assert log.producer_state.unreplicated == ()
    assert log.last_stable_offset(high_watermark=4) == 2
    log.append_control(2, 0, commit=False, coordinator_epoch=0)  # 5
    assert log.last_stable_offset(high_watermark=5) == 2
    assert log.last_stable_offset(high_watermark=6) == 6
    # A truncation below a marker forgets its completion (the replay re-adds what stays).
    log.truncate_to(5)
    assert log.first_unstable_offset == 2 and log.last_stable_offset(high_watermark=5) == 2
    log.close()


def test_single_node_log_tracks_no_completed_transactions(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    for pid in range(1, 50):
        log.append(txn(pid, 0))
        log.append_control(pid, 0, commit=True, coordinator_epoch=0)
    assert log.producer_state.unreplicated == ()
    assert log.last_stable_offset() == log.log_end_offset
    log.close()


# --------------------------------------------------------------------------- durability


def test_snapshot_keeps_open_transactions_across_restart(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0))
    log.append(txn(2, 0))
    log.append_control(2, 0, commit=True, coordinator_epoch=6)
    log.close()
    snaps = [n for n in os.listdir(logdir) if n.endswith(".snapshot")]
    with open(os.path.join(logdir, snaps[-1]), "rb") as f:
        data = f.read()
    (count,) = struct.unpack_from(">i", data, 6)
    rows = sorted(struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count))
    # producer 1: open txn at 0, coordinator epoch unknown; producer 2: closed, epoch 6
    assert [(r[0], r[6], r[7]) for r in rows] == [(1, -1, 0), (2, 6, -1)]
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    assert log.first_unstable_offset == 0 and log.last_stable_offset() == 0
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_control(2, 0, commit=True, coordinator_epoch=5)
    log.append_control(1, 0, commit=False, coordinator_epoch=6)
    assert log.last_stable_offset() == log.log_end_offset
    log.close()


def _unclean(logdir: str, recovery_point: int) -> None:
    """Make the next open a crash recovery from ``recovery_point``."""
    os.unlink(os.path.join(logdir, ".kafka_cleanshutdown"))
    write_offset_checkpoint(os.path.join(logdir, RECOVERY_POINT_CHECKPOINT),
                            {("topic", 0): recovery_point})


def _fill(log: Log) -> None:
    for i in range(8):
        pid = 100 + i
        log.append(txn(pid, 0, 3))
        if i % 3 != 2:
            log.append_control(pid, 0, commit=i % 3 == 1, coordinator_epoch=1)


def test_recovery_rebuilds_the_txnindex_of_recovered_segments(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    _fill(log)
    bases = log.segment_base_offsets
    unstable = log.first_unstable_offset
    assert unstable is not None
    log.close()
    before = all_txnindex(logdir)
    assert len(before) >= 2
    # Crash with the recovery point in the middle: the later segments are rescanned, their
    # index files (deleted here: as if never written) are rebuilt, the earlier ones kept
    # without duplicates.
    mid = bases[len(bases) // 2]
    for base in bases:
        if base >= mid:
            path = os.path.join(logdir, f"{base:020d}.txnindex")
            if os.path.exists(path):
                os.unlink(path)
    for n in os.listdir(logdir):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(logdir, n))  # no snapshot: replay from scratch
    _unclean(logdir, mid)
    log = Log(logdir, small(), clock=clock)
    assert log.recovered
    assert all_txnindex(logdir) == before
    assert log.first_unstable_offset == unstable
    log.close()


def test_recovery_after_a_torn_marker_forgets_its_entry(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0))
    log.append(txn(2, 0))
    log.append_control(1, 0, commit=False, coordinator_epoch=0)  # offset 4
    log.close()
    seg = os.path.join(logdir, f"{0:020d}.log")
    os.truncate(seg, os.path.getsize(seg) - 3)  # the marker is torn
    _unclean(logdir, 0)
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    assert log.log_end_offset == 4
    assert all_txnindex(logdir) == {}  # the file was rebuilt, without the lost marker
    assert log.first_unstable_offset == 0  # producer 1's transaction is open again
    log.append_control(1, 0, commit=False, coordinator_epoch=0)
    assert all_txnindex(logdir) == {0: [(1, 0, 4, 2)]}
    log.close()


def test_truncate_to_drops_entries_and_reopens_transactions(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0))                                        # 0-1
    log.append_control(1, 0, commit=False, coordinator_epoch=0)  # 2
    log.append(txn(2, 0))                                        # 3-4
    log.append_control(2, 0, commit=False, coordinator_epoch=0)  # 5
    assert len(all_txnindex(logdir)[0]) == 2
    log.truncate_to(5)
    assert all_txnindex(logdir) == {0: [(1, 0, 2, 3)]}
    assert log.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 2, 3)]
    assert log.first_unstable_offset == 3
    log.truncate_to(2)
    assert all_txnindex(logdir) == {0: []}
    assert log.first_unstable_offset == 0
    log.close()


def test_retention_deletes_the_txnindex_with_its_segment(logdir, clock) -> None:
    log = Log(logdir, small(retention_ms=1000), clock=clock)
    _fill(log)
    first = log.segment_base_offsets[0]
    assert os.path.exists(os.path.join(logdir, f"{first:020d}.txnindex"))
    clock.advance(10_000)
    assert log.apply_retention() > 0
    log.apply_retention()  # the .deleted files go (file_delete_delay_ms 0)
    assert not any(n.startswith(f"{first:020d}") for n in os.listdir(logdir))
    assert set(all_txnindex(logdir)) <= set(log.segment_base_offsets)
    log.close()


# --------------------------------------------------------------------------- cleaner


def _values(log: Log) -> list[tuple[int, bytes | None, bool]]:
    """(offset, value, in a control batch) of every record left."""
    return [(r.offset, r.value, b.is_control) for b in batches(log) for r in b]


def _plain(key: bytes, value: bytes) -> bytes:
    b = BatchBuilder()
    b.append(value, key=key, timestamp_ms=T0)
    return b.build()


def test_cleaner_drops_aborted_data_then_old_markers_and_keeps_the_index(tmp_path, clock) -> None:
    from logcore.cleaner import Cleaner

    cfg = small(cleanup_policy="compact", segment_bytes=1 << 20, delete_retention_ms=1000)
    d = str(tmp_path / "c-0")
    log = Log(d, cfg, clock=clock)
    log.append(txn(1, 0, key=b"a"))                                # 0-1 committed
    log.append_control(1, 0, commit=True, coordinator_epoch=0)     # 2
    log.append(txn(2, 0, key=b"a"))                                # 3-4 aborted
    log.append(txn(3, 0, key=b"b"))                                # 5-6 committed
    log.append_control(2, 0, commit=False, coordinator_epoch=0)    # 7
    log.append_control(3, 0, commit=True, coordinator_epoch=0)     # 8
    for pid in (1, 2, 3):  # 9, 10, 11: each producer's last batch is a later one
        log.append(txn(pid, 2, 1, transactional=False, key=b"c%d" % pid))
    log.roll()
    assert log.aborted_transactions(0, 100) == [AbortedTxn(2, 3, 7, 5)]
    assert Cleaner(1 << 20).clean(log) is not None
    # The aborted a's are gone (never in the map: a's committed value at 1 survives);
    # every marker stays: the COMMITs have data, the ABORT's data was removed by this
    # clean, and its .txnindex entry went to the cleaned segment.
    assert [o for o, _v, c in _values(log) if not c] == [1, 6, 9, 10, 11]
    assert [o for o, _v, c in _values(log) if c] == [2, 7, 8]
    assert log.aborted_transactions(0, 100) == [AbortedTxn(2, 3, 7, 5)]
    assert all_txnindex(d) == {0: [(2, 3, 7, 5)]}
    # Second clean, after a and b are overwritten: the ABORT's transaction has no data
    # left: its marker gets the delete horizon (its record timestamp kept) and its entry
    # is not carried any more. The COMMITs' data is removed by this clean (as Kafka's
    # cleaner, a marker stays while the clean still met its transaction's batches).
    clock.advance(10)
    log.append(_plain(b"a", b"new"))
    log.append(_plain(b"b", b"new"))
    log.roll()
    assert Cleaner(1 << 20).clean(log) is not None

    def horizons() -> dict[int, int | None]:
        return {b.base_offset: b.base_timestamp if b.attributes & 0x40 else None
                for b in batches(log) if b.is_control}

    assert horizons() == {2: None, 7: T0 + 10 + 1000, 8: None}
    assert [o for o, _v, c in _values(log) if not c] == [9, 10, 11, 12, 13]
    assert log.aborted_transactions(0, 100) == []
    assert all_txnindex(d) == {}
    # Third clean: the COMMITs' turn.
    clock.advance(10)
    log.append(_plain(b"d", b"1"))
    log.roll()
    assert Cleaner(1 << 20).clean(log) is not None
    assert horizons() == {2: T0 + 1020, 7: T0 + 1010, 8: T0 + 1020}
    markers = [b for b in batches(log) if b.is_control]
    assert [r.timestamp for b in markers for r in b] == [T0, T0, T0]
    assert [marker_of(b) for b in markers] == [(1, 0), (0, 0), (1, 0)]
    # A clean after the horizons removes them.
    clock.advance(2000)
    log.append(_plain(b"e", b"1"))
    log.roll()
    assert Cleaner(1 << 20).clean(log) is not None
    assert horizons() == {}
    assert [o for o, _v, _c in _values(log)] == [9, 10, 11, 12, 13, 14, 15]
    log.close()
    with Log(d, cfg, clock=clock) as again:
        assert [o for o, _v, _c in _values(again)] == [9, 10, 11, 12, 13, 14, 15]


def test_cleaner_stops_at_the_first_unstable_offset(tmp_path, clock) -> None:
    from logcore.cleaner import Cleaner

    cfg = small(cleanup_policy="compact", segment_bytes=300)
    log = Log(str(tmp_path / "u-0"), cfg, clock=clock)
    for i in range(4):
        b = BatchBuilder()
        b.append(b"x%d" % i, key=b"x", timestamp_ms=T0)
        log.append(b.build())
    log.append(txn(5, 0, key=b"x"))  # open transaction
    first_unstable = log.first_unstable_offset
    for _ in range(10):
        log.append(txn(5, log.log_end_offset - first_unstable, key=b"x"))
    assert log.num_segments > 2
    assert log.first_uncleanable_offset() <= first_unstable
    Cleaner(1 << 20).clean(log)
    # everything from the open transaction on is untouched
    assert [o for o, _v, _c in _values(log) if o >= first_unstable] == list(
        range(first_unstable, log.log_end_offset))
    log.close()


def test_first_unstable_offset_never_below_the_log_start(logdir, clock) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(1, 0, 4))   # 0-3, open
    log.append(txn(2, 0, 2, transactional=False))
    log.delete_records_before(2)
    assert log.first_unstable_offset == 2 and log.last_stable_offset() == 2
    log.append_control(1, 0, commit=False, coordinator_epoch=0)
    assert log.first_unstable_offset is None
    assert log.aborted_transactions(2, 100) == [AbortedTxn(1, 0, 6, 7)]
    log.close()


def test_txn_batches_lists_transactional_and_control_batches_of_a_region(logdir, clock) -> None:
    """``Log.txn_batches`` (the compiled scan) and the pure-Python twin agree on a region
    holding plain, transactional and marker batches, and on cuts of it."""
    from logcore._ref import segment as ref_segment

    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(9, 0, 2, transactional=False))          # 0-1 plain
    log.append(txn(7, 0, 3))                               # 2-4 pid 7
    log.append_control(7, 0, commit=False, coordinator_epoch=1)  # 5 abort
    log.append(txn(8, 0, 2))                               # 6-7 pid 8
    log.append_control(8, 0, commit=True, coordinator_epoch=1)   # 8 commit
    log.append(txn(9, 2, 1, transactional=False))          # 9 plain
    region = log.read(0, 1 << 20)
    want = [(2, 4, 7, False), (5, 5, 7, True), (6, 7, 8, False), (8, 8, 8, True)]
    assert log.txn_batches(region) == want
    assert ref_segment.txn_batches(region.fileno, region.position,
                                   region.position + region.size) == want
    tail = log.read(6, 1 << 20)
    assert log.txn_batches(tail) == want[2:]
    assert log.txn_batches(log.read(10, 1 << 20)) == []   # empty region
    # a region cut inside a batch (the commit marker) lists the whole batches before it
    cut = region.position + region.size - log.read(9, 1 << 20).size - 1
    assert ref_segment.txn_batches(region.fileno, region.position, cut) == want[:3]
    if logcore.IMPLEMENTATION == "c":
        from logcore import _segment
        assert _segment.txn_batches(region.fileno, region.position, cut) == want[:3]
    assert log.txn_batches(log.read(0, 1 << 20, max_offset=2)) == []
    log.close()


def test_batch_bounds_lists_every_batch_of_a_region(logdir, clock) -> None:
    """``Log.batch_bounds`` (a share fetch's batch boundaries, KIP-1206): every whole batch,
    plain, transactional and control alike; the compiled scan and the twin agree, and a
    region cut inside a batch lists the whole batches before the cut."""
    from logcore._ref import segment as ref_segment

    log = Log(logdir, small(segment_bytes=1 << 20), clock=clock)
    log.append(txn(9, 0, 2, transactional=False))                # 0-1
    log.append(txn(7, 0, 3))                                     # 2-4
    log.append_control(7, 0, commit=True, coordinator_epoch=1)   # 5
    log.append(txn(9, 2, 4, transactional=False))                # 6-9
    region = log.read(0, 1 << 20)
    want = [(0, 1), (2, 4), (5, 5), (6, 9)]
    assert log.batch_bounds(region) == want
    assert ref_segment.batch_bounds(region.fileno, region.position,
                                    region.position + region.size) == want
    assert log.batch_bounds(log.read(2, 1 << 20)) == want[1:]
    assert log.batch_bounds(log.read(10, 1 << 20)) == []
    cut = region.position + region.size - 1
    assert ref_segment.batch_bounds(region.fileno, region.position, cut) == want[:3]
    if logcore.IMPLEMENTATION == "c":
        from logcore import _segment
        assert _segment.batch_bounds(region.fileno, region.position, cut) == want[:3]
    log.close()
