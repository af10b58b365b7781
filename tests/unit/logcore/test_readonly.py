"""logcore.ReadOnlyLog: reading a partition directory its owner may be appending to."""

from __future__ import annotations

import os
import struct
import threading

import pytest

import logcore
from logcore import (
    BatchBuilder,
    Log,
    LogConfig,
    LogDirError,
    ManualClock,
    OffsetOutOfRangeError,
    ReadOnlyLog,
    decode_columns,
    iter_batches,
)

T0 = 1_700_000_000_000


def batch(n: int = 3, ts: int = T0, size: int = 10) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(bytes([65 + i % 26]) * size, key=b"k%d" % i, timestamp_ms=ts + i)
    return b.build()


def small(**kw) -> LogConfig:
    base = dict(segment_bytes=2048, index_interval_bytes=200, segment_index_bytes=4096)
    base.update(kw)
    return LogConfig(**base)


def offsets(ro: ReadOnlyLog, start: int | None = None) -> list[int]:
    out: list[int] = []
    pos = ro.log_start_offset if start is None else start
    while pos < ro.log_end_offset:
        region = ro.read(pos, 1000)
        assert region.size > 0, pos
        got = [r.offset for b in iter_batches(region.read()) for r in b]
        out += [o for o in got if o >= pos]
        pos = region.last_offset + 1
    return out


def files_state(d: str) -> dict[str, tuple[int, int]]:
    return {n: (os.stat(os.path.join(d, n)).st_size, os.stat(os.path.join(d, n)).st_mtime_ns)
            for n in sorted(os.listdir(d))}


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "events-0")


def test_a_missing_directory_is_a_log_dir_error(tmp_path) -> None:
    with pytest.raises(LogDirError, match="cannot read log dir"):
        ReadOnlyLog(tmp_path / "nope-0")


def test_an_empty_directory_is_an_empty_log(tmp_path) -> None:
    (tmp_path / "t-0").mkdir()
    ro = ReadOnlyLog(tmp_path / "t-0")
    assert (ro.log_start_offset, ro.log_end_offset) == (0, 0)
    assert ro.read(0, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        ro.read(1, 100)


def test_reads_a_live_log_without_lock_or_writes(logdir) -> None:
    clock = ManualClock(T0)
    log = Log(logdir, small(), clock=clock)
    try:
        for i in range(60):
            log.append(batch(3, ts=T0 + 10 * i))
        assert log.num_segments > 3
        before = files_state(logdir)
        ro = ReadOnlyLog(logdir)
        assert ro.segment_base_offsets == log.segment_base_offsets
        assert (ro.log_start_offset, ro.log_end_offset) == (0, 180)
        assert offsets(ro) == list(range(180))
        # Same bytes as the owner serves, from any offset, across segment boundaries.
        for off in (0, 1, 2, 3, 50, 100, 179):
            mine, theirs = ro.read(off, 700), log.read(off, 700)
            assert (mine.first_offset, mine.last_offset) == (theirs.first_offset,
                                                             theirs.last_offset)
            assert mine.read() == theirs.read()
        assert ro.read(180, 100).size == 0
        with pytest.raises(OffsetOutOfRangeError, match="outside"):
            ro.read(181, 100)
        assert files_state(logdir) == before  # nothing written, locked or recovered
        log.append(batch(3))  # the owner still writes: no lock was taken
        assert ReadOnlyLog(logdir).log_end_offset == 183
        assert ro.log_end_offset == 180  # a reader is a snapshot
    finally:
        log.close()


def test_max_offset_caps_the_end(logdir) -> None:
    with Log(logdir, small()) as log:
        for _ in range(10):
            log.append(batch(3))
    ro = ReadOnlyLog(logdir, max_offset=15)
    assert ro.log_end_offset == 15
    assert offsets(ro) == list(range(15))


def test_a_batch_not_wholly_written_is_left_out(logdir) -> None:
    with Log(logdir, small()) as log:
        for _ in range(5):
            log.append(batch(3))
        last = os.path.join(logdir, f"{log.segment_base_offsets[-1]:020d}.log")
    tail = bytearray(batch(3))
    struct.pack_into(">q", tail, 0, 15)
    with open(last, "ab") as f:  # the owner's pwrite has copied half of the batch so far
        f.write(tail[: len(tail) // 2])
    ro = ReadOnlyLog(logdir)
    assert ro.log_end_offset == 15
    assert offsets(ro) == list(range(15))


def test_a_batch_being_written_into_preallocated_space_is_left_out(logdir) -> None:
    with Log(logdir, small()) as log:
        for _ in range(5):
            log.append(batch(3))
        last = os.path.join(logdir, f"{log.segment_base_offsets[-1]:020d}.log")
    end = os.path.getsize(last)
    whole = bytearray(batch(3))
    struct.pack_into(">q", whole, 0, 15)
    with open(last, "r+b") as f:
        f.truncate(end + 4096)  # preallocated: zeros past the data
        f.seek(end)
        f.write(whole[:70])  # header and a few record bytes copied, the rest still zero
    assert ReadOnlyLog(logdir).log_end_offset == 15
    with open(last, "r+b") as f:
        f.seek(end)
        f.write(whole)  # the copy completed
    ro = ReadOnlyLog(logdir)
    assert ro.log_end_offset == 18
    assert offsets(ro) == list(range(18))


def test_preallocated_segments_of_a_live_owner(logdir) -> None:
    log = Log(logdir, small(preallocate=True, segment_bytes=4096))
    try:
        for _ in range(40):
            log.append(batch(3))
        ro = ReadOnlyLog(logdir)
        assert ro.log_end_offset == 120
        assert offsets(ro) == list(range(120))
    finally:
        log.close()


def test_segments_deleted_by_retention_stay_readable(logdir) -> None:
    clock = ManualClock(T0)
    log = Log(logdir, small(retention_ms=1000, file_delete_delay_ms=0), clock=clock)
    try:
        for _ in range(30):
            log.append(batch(3, ts=clock.time_ms()))
        ro = ReadOnlyLog(logdir)
        clock.advance(10_000)
        for _ in range(3):
            log.append(batch(3, ts=clock.time_ms()))
        assert log.apply_retention() > 0
        log.roll()
        assert log.log_start_offset > 0
        assert offsets(ro) == list(range(90))  # the old view still reads the deleted files
        fresh = ReadOnlyLog(logdir)
        assert fresh.log_start_offset == log.log_start_offset
        with pytest.raises(OffsetOutOfRangeError):
            fresh.read(0, 100)
    finally:
        log.close()


def test_the_checkpointed_log_start_offset_is_honoured(logdir) -> None:
    with Log(logdir, small()) as log:
        for _ in range(10):
            log.append(batch(3))
        log.delete_records_before(7)
        log.checkpoint_log_start_offset()
    ro = ReadOnlyLog(logdir)
    assert ro.log_start_offset == 7
    assert offsets(ro)[0] == 7
    with pytest.raises(OffsetOutOfRangeError):
        ro.read(6, 100)


def test_kafka_keeps_the_log_start_offset_per_log_dir(tmp_path) -> None:
    d = tmp_path / "clicks-3"
    with Log(d, small()) as log:
        for _ in range(10):
            log.append(batch(3))
    os.unlink(d / "log-start-offset-checkpoint")
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n2\nclicks 3 12\nother 0 99\n")
    assert ReadOnlyLog(d).log_start_offset == 12


def test_a_bad_index_entry_falls_back_to_a_walk(logdir) -> None:
    log = Log(logdir, small(segment_bytes=1 << 20))
    try:
        for _ in range(40):
            log.append(batch(3))
        index = os.path.join(logdir, "00000000000000000000.index")
        with open(index, "r+b") as f:
            rel, pos = struct.unpack(">ii", f.read(8))
            assert pos > 0
            f.seek(0)
            f.write(struct.pack(">ii", rel, pos + 5))  # points into the middle of a batch
        ro = ReadOnlyLog(logdir)
        assert ro.log_end_offset == 120
        assert offsets(ro) == list(range(120))
    finally:
        log.close()


def test_offset_for_timestamp_answers_as_the_owner(logdir) -> None:
    with Log(logdir, small()) as log:
        for i in range(50):
            log.append(batch(3, ts=T0 + 100 * i))
        ro = ReadOnlyLog(logdir)
        for ts in (0, T0, T0 + 1, T0 + 150, T0 + 2500, T0 + 4902, T0 + 4903, -2, -1):
            assert ro.offset_for_timestamp(ts) == log.offset_for_timestamp(ts), ts


def test_concurrent_appends_are_seen_as_complete_prefixes(logdir) -> None:
    log = Log(logdir, small(segment_bytes=8192))
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set() and i < 2000:
            log.append(batch(1 + i % 7, size=1 + i % 50))
            i += 1

    t = threading.Thread(target=write)
    t.start()
    try:
        seen = 0
        for _ in range(30):
            ro = ReadOnlyLog(logdir)
            assert ro.log_end_offset >= seen
            seen = ro.log_end_offset
            pos, got = 0, 0
            while pos < ro.log_end_offset:
                region = ro.read(pos, 1 << 16)
                cols = decode_columns(region.read())  # every CRC checks
                got += cols.num_records
                assert int(cols.offsets[0]) == pos
                pos = region.last_offset + 1
            assert got == ro.log_end_offset
    finally:
        stop.set()
        t.join()
        log.close()


def test_exported_with_the_storage_names() -> None:
    assert "ReadOnlyLog" in logcore.__all__


def test_a_rolled_segment_not_trimmed_yet_ends_at_its_zeros(logdir) -> None:
    with Log(logdir, small(segment_bytes=1024)) as log:
        for _ in range(30):
            log.append(batch(3))
        bases = log.segment_base_offsets
    assert len(bases) > 2
    first = os.path.join(logdir, f"{bases[0]:020d}.log")
    with open(first, "ab") as f:  # still preallocated when the reader listed it
        f.write(bytes(4096))
    ro = ReadOnlyLog(logdir)
    assert offsets(ro) == list(range(90))
    assert ro.read(0, 10**6).last_offset == bases[1] - 1
