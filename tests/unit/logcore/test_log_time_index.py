"""Time index entries as Kafka writes them, and exact timestamp lookups over them.

Kafka's time index entry is (largest timestamp so far, last offset of the first batch
holding it) -- ``LogSegment.append``'s shallowOffsetOfMaxTimestamp, ``LogSegment.recover``'s
``batch.lastOffset()``, the cleaner's retained batch -- and Kafka's DumpLogSegments reports
any other offset ("Indexed offset not found"). These tests write batches whose largest
timestamp sits in the middle, through every path that writes a time index (append, roll,
close, crash recovery, rebuild at open, lazy rebuild, cleaning, the replica path), and
check each entry against the log with the independent reader of tests/_harness. Lookups
by timestamp and ListOffsets MAX_TIMESTAMP (-3) must still name the exact record, checked
against a brute-force walk of every record. Run compiled and with LOGCORE_PUREPYTHON=1.
"""

from __future__ import annotations

import os
import struct

import pytest
from _harness.kafka_format import (
    check_partition,
    read_batches,
    read_time_index,
    segment_base_offsets,
    segment_path,
    write_kafka_partition,
)

from logcore import BatchBuilder, Log, LogConfig, ManualClock, iter_batches
from logcore.cleaner import Cleaner

T0 = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def stamped(stamps: list[int], *, base_offset: int = 0, compression: str = "none",
            keys: list[bytes] | None = None) -> bytes:
    b = BatchBuilder(base_offset=base_offset, compression=compression)
    for i, ts in enumerate(stamps):
        b.append(b"v%d" % i * 8, key=keys[i] if keys else b"k%d" % i, timestamp_ms=ts)
    return b.build()


def middle_max_batches(n: int) -> list[bytes]:
    """Batches of 3-5 records whose largest timestamp is never the last record; every
    fourth batch is older than the log's newest so far, every seventh repeats it."""
    out = []
    newest = T0
    for i in range(n):
        base = T0 + 100 * i
        if i % 4 == 3:
            base = T0 + 100 * i - 350  # its max stays below the segment's max so far
        stamps = [base, base + 60, base + 20, base + 60, base + 10][: 3 + i % 3]
        if i % 7 == 6:
            stamps[1] = stamps[3 if len(stamps) > 3 else 1] = newest  # ties the newest
        newest = max(newest, *stamps)
        out.append(stamped(stamps, compression=CODECS[i % 5]))
    return out


def small(**kw) -> LogConfig:
    base = dict(segment_bytes=1500, index_interval_bytes=150, segment_index_bytes=4096)
    base.update(kw)
    return LogConfig(**base)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "topic-0")


def all_records(log: Log) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record from the log start, in offset order."""
    out: list[tuple[int, int]] = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        region = log.read(off, 1 << 30)
        if not region:
            break
        out += [(r.offset, r.timestamp) for b in iter_batches(region.read()) for r in b
                if r.offset >= off]
        off = region.last_offset + 1
    return out


def time_index_entries(logdir: str) -> list[tuple[str, int, int, int, int]]:
    """Every time index entry up to its zero-filled tail: (file, index, timestamp,
    offset, last offset of the batch that holds the offset or -1)."""
    out = []
    for base in segment_base_offsets(logdir):
        batches, _end = read_batches(segment_path(logdir, base, ".log"))
        path = segment_path(logdir, base, ".timeindex")
        if not os.path.exists(path):
            continue
        for i, (ts, rel) in enumerate(read_time_index(path)):
            if ts == 0 and rel == 0:
                break  # the preallocated tail of the active segment's index
            holder = next((b for b in batches if b.base_offset <= base + rel <= b.last_offset),
                          None)
            out.append((path, i, ts, base + rel, holder.last_offset if holder else -1))
    return out


def assert_kafka_time_index(logdir: str) -> int:
    """Kafka's DumpLogSegments check: every entry names the last offset of a batch whose
    largest timestamp is the entry's. Returns how many entries there are."""
    entries = time_index_entries(logdir)
    for path, i, ts, off, last in entries:
        assert off == last, f"{path} entry {i} ({ts}, {off}): not the batch's last offset {last}"
    maxes = {}
    for base in segment_base_offsets(logdir):
        for b in read_batches(segment_path(logdir, base, ".log"))[0]:
            maxes[b.last_offset] = b.max_timestamp
    for path, i, ts, off, _last in entries:
        assert maxes[off] == ts, f"{path} entry {i}: timestamp {ts}, batch max {maxes[off]}"
    return len(entries)


def assert_exact_lookups(log: Log) -> None:
    """offset_for_timestamp against a walk of every record: the first record at or after
    each time, and -3 the first record holding the largest timestamp."""
    recs = all_records(log)
    assert recs, "the log has records"
    stamps = sorted({ts for _o, ts in recs})
    for target in {t + d for t in stamps for d in (-1, 0, 1)}:
        want = next(((o, ts) for o, ts in recs if ts >= target), None)
        got = log.offset_for_timestamp(target)
        assert (None if got is None else tuple(got)) == want, target
    top = max(ts for _o, ts in recs)
    want_max = next((o, ts) for o, ts in recs if ts == top)
    assert tuple(log.offset_for_timestamp(-3)) == want_max


def fill(log: Log, batches: list[bytes]) -> None:
    for raw in batches:
        log.append(bytearray(raw))


# ------------------------------------------------------------------------------ tests


def test_append_roll_and_close_write_kafkas_entries(logdir, clock) -> None:
    batches = middle_max_batches(60)
    with Log(logdir, small(), clock=clock) as log:
        fill(log, batches[:30])
        assert log.num_segments > 2
        assert assert_kafka_time_index(logdir) > 5  # sealed segments and the active one
        assert_exact_lookups(log)
        fill(log, batches[30:])
        assert_exact_lookups(log)
    assert assert_kafka_time_index(logdir) > 10
    check_partition(logdir)
    with Log(logdir, small(), clock=clock) as log:
        assert_exact_lookups(log)  # the largest timestamps come from the time index now


def test_index_files_are_byte_for_byte_what_kafka_lays_out(tmp_path, clock) -> None:
    """The independent writer of tests/_harness lays the same batches out at Kafka's
    cadence: logcore's .index and .timeindex must be the same bytes."""
    batches = middle_max_batches(80)
    mine, kafka = str(tmp_path / "mine-0"), str(tmp_path / "kafka-0")
    with Log(mine, small(), clock=clock) as log:
        fill(log, batches)
    write_kafka_partition(kafka, batches, segment_bytes=1500, index_interval_bytes=150)
    bases = segment_base_offsets(mine)
    assert bases == segment_base_offsets(kafka) and len(bases) > 4
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            with open(segment_path(mine, base, suffix), "rb") as a, \
                    open(segment_path(kafka, base, suffix), "rb") as b:
                assert a.read() == b.read(), (base, suffix)


def test_several_batches_in_one_append(logdir, clock) -> None:
    """A produce of several batches: the entry names the last offset of the first batch
    holding the largest timestamp, not the append's last offset."""
    with Log(logdir, small(index_interval_bytes=1, segment_bytes=1 << 20), clock=clock) as log:
        for i in range(12):
            t = T0 + 1000 * i
            log.append(bytearray(stamped([t, t + 9, t + 1]) + stamped([t + 9, t + 2])
                                 + stamped([t + 3, t + 4, t + 5])))
        entries = time_index_entries(logdir)
        assert len(entries) >= 11
        # each append's largest timestamp is record 1 of its first batch: offset 8i + 2
        assert {off for *_, off, _last in entries} <= {8 * i + 2 for i in range(12)}
        assert assert_kafka_time_index(logdir) == len(entries)
        assert_exact_lookups(log)
        assert tuple(log.offset_for_timestamp(-3)) == (8 * 11 + 1, T0 + 11_009)
    check_partition(logdir)


def test_log_append_time(logdir, clock) -> None:
    cfg = small(message_timestamp_type="LogAppendTime")
    with Log(logdir, cfg, clock=clock) as log:
        for i in range(40):
            clock.advance(1 if i % 5 else 0)  # some appends share a millisecond
            log.append(bytearray(stamped([T0 - 5, T0 - 1, T0 - 3])
                                 + stamped([T0 - 2, T0 - 4])))
        assert assert_kafka_time_index(logdir) > 5
        assert_exact_lookups(log)
        # the newest stamp's first append, first record
        assert tuple(log.offset_for_timestamp(-3)) == (5 * 39, clock.time_ms())
    check_partition(logdir)
    with Log(logdir, cfg, clock=clock) as log:
        assert_exact_lookups(log)


def test_crash_recovery_rebuilds_kafkas_entries(logdir, clock) -> None:
    batches = middle_max_batches(50)
    log = Log(logdir, small(), clock=clock)
    fill(log, batches[:20])
    log.flush()
    fill(log, batches[20:])
    del log  # no close: as if the process died
    with Log(logdir, small(), clock=clock) as log:
        assert log.recovered
        assert assert_kafka_time_index(logdir) > 5
        assert_exact_lookups(log)
    check_partition(logdir)


def test_missing_and_lazily_rebuilt_time_indexes(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        fill(log, middle_max_batches(50))
        bases = log.segment_base_offsets
        before = all_records(log)
    os.unlink(segment_path(logdir, bases[0], ".timeindex"))  # rebuilt at open
    with open(segment_path(logdir, bases[2], ".timeindex"), "ab") as f:
        f.write(b"\x01\x02\x03")  # torn: fails the sanity check when first mapped
    with Log(logdir, small(), clock=clock) as log:
        assert all_records(log) == before
        assert_exact_lookups(log)  # maps (and so rebuilds) every segment's time index
        assert assert_kafka_time_index(logdir) > 5
    check_partition(logdir)


def test_replica_append_keeps_batch_last_offsets(logdir, clock) -> None:
    with Log(logdir, small(index_interval_bytes=1, segment_bytes=1 << 20), clock=clock) as log:
        off = 0
        for i in range(15):
            t = T0 + 1000 * i
            first = stamped([t, t + 7, t + 1], base_offset=off)
            second = stamped([t + 7, t + 3], base_offset=off + 3)
            log.append(bytearray(first + second), assign_offsets=False)
            off += 5
        assert assert_kafka_time_index(logdir) >= 14
        assert_exact_lookups(log)
    check_partition(logdir)


def test_cleaning_writes_kafkas_entries(logdir, clock) -> None:
    cfg = small(cleanup_policy="compact", segment_bytes=1200, index_interval_bytes=100,
                file_delete_delay_ms=0)
    with Log(logdir, cfg, clock=clock) as log:
        for i in range(120):
            t = T0 + 100 * i
            keys = [b"k%d" % ((i * 3 + j) % 17) for j in range(3)]
            log.append(bytearray(stamped([t, t + 50, t + 5], keys=keys,
                                         compression=CODECS[i % 5])))
        stats = Cleaner(1 << 20).clean(log)
        assert stats is not None and stats.records_retained < stats.records_read
        assert assert_kafka_time_index(logdir) > 5
        assert_exact_lookups(log)
    check_partition(logdir)
    with Log(logdir, cfg, clock=clock) as log:
        assert_exact_lookups(log)


def test_time_index_of_an_older_pylog_still_looks_up_exactly(logdir, clock) -> None:
    """pylog once wrote the offset of the record holding the timestamp, inside its batch.
    Such a data dir still opens, answers exactly, and takes new appends."""
    batches = middle_max_batches(60)
    with Log(logdir, small(), clock=clock) as log:
        fill(log, batches[:40])
        exact = {ts: next(o for o, t in all_records(log) if t == ts)
                 for ts in {t for _o, t in all_records(log)}}
    moved = 0
    for base in segment_base_offsets(logdir):
        path = segment_path(logdir, base, ".timeindex")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        for i in range(len(data) // 12):
            ts, rel = struct.unpack_from(">qi", data, 12 * i)
            moved += exact[ts] != base + rel
            struct.pack_into(">qi", data, 12 * i, ts, exact[ts] - base)
        with open(path, "wb") as f:
            f.write(data)
    assert moved > 5  # the old form differs from Kafka's
    with Log(logdir, small(), clock=clock) as log:
        assert not log.recovered
        assert_exact_lookups(log)
        fill(log, batches[40:])
        assert_exact_lookups(log)
    with Log(logdir, small(), clock=clock) as log:
        assert_exact_lookups(log)


def test_delete_records_lookups_start_at_the_log_start(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        fill(log, middle_max_batches(40))
        recs = all_records(log)
        cut = recs[len(recs) // 2][0] + 1  # inside a batch
        log.delete_records_before(cut)
        for _o, ts in recs:
            want = next(((o, t) for o, t in recs if o >= cut and t >= ts), None)
            got = log.offset_for_timestamp(ts)
            assert (None if got is None else tuple(got)) == want, ts
