"""logcore.Log: append, read, roll, retention, truncation, reopen (issue 3).

Files on disk are checked with the independent reader in tests/_harness/kafka_format.py.
"""

from __future__ import annotations

import os
import socket
import threading

import pytest
from _harness.kafka_format import (
    check_partition,
    read_batches,
    read_checkpoint,
    read_offset_index,
    read_time_index,
    segment_base_offsets,
    segment_path,
)

import logcore
from logcore import (
    BatchBuilder,
    CorruptRecordError,
    FileRegion,
    Log,
    LogConfig,
    LogcoreError,
    ManualClock,
    OffsetOutOfRangeError,
    RecordBatch,
    RecordTooLargeError,
    iter_batches,
)

T0 = 1_700_000_000_000


def batch(n: int = 3, ts: int = T0, size: int = 10, base_offset: int = 0, **kw) -> bytes:
    b = BatchBuilder(base_offset=base_offset, **kw)
    for i in range(n):
        b.append(bytes([65 + i % 26]) * size, key=b"k%d" % i, timestamp_ms=ts + i)
    return b.build()


def small(**kw) -> LogConfig:
    base = dict(segment_bytes=2048, index_interval_bytes=200, segment_index_bytes=4096)
    base.update(kw)
    return LogConfig(**base)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "topic-0")


def offsets_in(region: FileRegion) -> list[int]:
    return [r.offset for b in iter_batches(region.read()) for r in b]


def fill(log: Log, batches: int, n: int = 3, clock: ManualClock | None = None) -> None:
    for _ in range(batches):
        log.append(batch(n, ts=clock.time_ms() if clock else T0))


# --------------------------------------------------------------------------- layout


def test_new_log_layout_and_kafka_names(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        assert log.log_start_offset == 0 and log.log_end_offset == 0
        assert log.num_segments == 1
        names = sorted(os.listdir(logdir))
        assert "00000000000000000000.log" in names
        # indexes preallocated to segment_index_bytes (rounded to whole entries)
        assert os.path.getsize(segment_path(logdir, 0, ".index")) == 4096
        assert os.path.getsize(segment_path(logdir, 0, ".timeindex")) == 4092
        fill(log, 40)
        assert log.log_end_offset == 120 and log.num_segments > 2
        bases = segment_base_offsets(logdir)
        assert bases == log.segment_base_offsets
        # rolled segments have trimmed indexes; the active one is still preallocated
        for b in bases[:-1]:
            n = len(read_offset_index(segment_path(logdir, b, ".index")))
            assert os.path.getsize(segment_path(logdir, b, ".index")) == 8 * n
            assert n >= 1
            ts = read_time_index(segment_path(logdir, b, ".timeindex"))
            assert ts and ts[-1][0] == max(x.max_timestamp for x in read_batches(
                segment_path(logdir, b, ".log"))[0])
        assert os.path.getsize(segment_path(logdir, bases[-1], ".index")) == 4096
    # after close every index is trimmed and the marker is there
    assert os.path.exists(os.path.join(logdir, ".kafka_cleanshutdown"))
    for b in bases:
        assert os.path.getsize(segment_path(logdir, b, ".index")) % 8 == 0
        assert os.path.getsize(segment_path(logdir, b, ".index")) < 4096
    allb = check_partition(logdir)
    assert [b.base_offset for b in allb] == list(range(0, 120, 3))
    assert read_checkpoint(os.path.join(logdir, "recovery-point-offset-checkpoint")) == (
        0, [["topic", "0", "120"]])
    assert read_checkpoint(os.path.join(logdir, "log-start-offset-checkpoint")) == (
        0, [["topic", "0", "0"]])


def test_append_assigns_offsets_in_place_and_copies_bytes(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        raw = batch(3)
        info = log.append(raw)
        assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
        assert info.log_append_time_ms == -1 and info.log_start_offset == 0
        assert info.max_timestamp == T0 + 2 and info.batch_count == 1
        assert not info.rolled and "first_offset=0" in repr(info)
        buf = bytearray(batch(2))
        info = log.append(buf)
        assert info.first_offset == 3
        assert RecordBatch(buf).base_offset == 3  # rewritten in place
        assert RecordBatch(raw).base_offset == 0  # bytes were copied first
        info = log.append(memoryview(batch(1)))
        assert info.first_offset == 5 and log.log_end_offset == 6
        two = batch(2) + batch(2)
        info = log.append(two)
        assert (info.first_offset, info.last_offset, info.batch_count) == (6, 9, 2)
        assert offsets_in(log.read(0, 10**6)) == list(range(10))


def test_append_rejects_without_writing(logdir, clock) -> None:
    with Log(logdir, small(max_message_bytes=500), clock=clock) as log:
        log.append(batch())
        size = log.size_in_bytes
        bad = bytearray(batch())
        bad[-1] ^= 0xFF
        with pytest.raises(CorruptRecordError):
            log.append(bad)
        with pytest.raises(RecordTooLargeError):
            log.append(batch(3, size=400))
        with pytest.raises(CorruptRecordError):
            log.append(b"")
        assert log.size_in_bytes == size and log.log_end_offset == 3
    with Log(logdir, small(segment_bytes=100, max_message_bytes=10**6), clock=clock) as log:
        with pytest.raises(RecordTooLargeError, match="segment_bytes"):
            log.append(batch(3, size=100))
    log.close()
    with pytest.raises(LogcoreError, match="closed"):
        log.append(batch())
    with pytest.raises(LogcoreError, match="closed"):
        log.read(0, 100)


def test_log_append_time(logdir, clock) -> None:
    with Log(logdir, small(message_timestamp_type="LogAppendTime"), clock=clock) as log:
        clock.advance(5000)
        info = log.append(batch(3, ts=1))
        assert info.log_append_time_ms == T0 + 5000 and info.max_timestamp == T0 + 5000
        (b,) = list(iter_batches(log.read(0, 1000).read()))
        assert b.timestamp_type == "log_append" and b.max_timestamp == T0 + 5000
        assert log.offset_for_timestamp(T0 + 5000) == (0, T0 + 5000)


# --------------------------------------------------------------------------- reads


def test_read_every_offset_finds_its_batch(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        sizes = [1, 4, 2, 7, 3, 1, 5] * 6
        for n in sizes:
            log.append(batch(n))
        leo = log.log_end_offset
        for o in range(leo):
            r = log.read(o, 1)  # min_one_batch: exactly the batch holding o
            (b,) = list(iter_batches(r.read()))
            assert b.base_offset <= o <= b.last_offset
            assert (r.first_offset, r.last_offset) == (b.base_offset, b.last_offset)
            assert r.size == b.size_in_bytes
        empty = log.read(leo, 1000)
        assert empty.size == 0 and empty.first_offset == leo and empty.last_offset == leo - 1
        assert empty.read() == b"" and not empty and empty.fileno == -1
        with pytest.raises(OffsetOutOfRangeError) as ei:
            log.read(leo + 1, 100)
        assert ei.value.log_end_offset == leo and ei.value.offset == leo + 1
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1, 100)


def test_read_limits_batch_boundaries_and_high_watermark(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        fill(log, 50)  # 150 offsets, one segment
        bsize = len(batch())
        r = log.read(0, 5 * bsize + 10)
        assert r.size == 5 * bsize and (r.first_offset, r.last_offset) == (0, 14)
        r = log.read(31, 10 * bsize)
        assert r.first_offset == 30 and r.last_offset == 59 and r.size == 10 * bsize
        # a batch that does not fit is still returned alone with min_one_batch
        r = log.read(7, 1)
        assert r.size == bsize and r.first_offset == 6
        r = log.read(7, 1, min_one_batch=False)
        assert r.size == 0 and r.last_offset == 6
        # max_offset is exclusive (a high watermark): batches reaching it are left out
        r = log.read(0, 10**6, max_offset=30)
        assert r.last_offset == 29 and r.size == 10 * bsize
        r = log.read(0, 10**6, max_offset=31)
        assert r.last_offset == 29
        r = log.read(30, 10**6, max_offset=31)
        assert r.size == 0 and r.first_offset == 30
        r = log.read(0, 10**6, max_offset=10**9)
        assert r.last_offset == 149 and r.size == 50 * bsize
        # walk_start skipping: large reads from any start end on the right boundary
        for start in (0, 1, 40, 77, 120):
            for limit in (bsize, 3 * bsize - 1, 17 * bsize, 17 * bsize + 5):
                for hw in (60, 149, 150):
                    if start >= hw:
                        continue
                    r = log.read(start, limit, max_offset=hw)
                    offs = offsets_in(r)
                    assert offs[0] <= start <= offs[-1] or r.size == 0
                    assert offs[-1] == r.last_offset < hw
                    assert r.size <= max(limit, bsize)
                    if r.last_offset + 3 < hw:
                        assert r.size + bsize > limit  # one more batch would not fit


def test_read_across_segments_and_after_reopen(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        fill(log, 60)
        assert log.num_segments >= 3
        for seg_base in log.segment_base_offsets:
            r = log.read(seg_base, 10**6)
            assert r.first_offset == seg_base
            assert r.path.endswith(f"{seg_base:020d}.log")
        before = [offsets_in(log.read(o, 300)) for o in range(0, 180, 7)]
    with Log(logdir, small(), clock=clock) as log:
        assert not log.recovered and log.log_end_offset == 180
        assert [offsets_in(log.read(o, 300)) for o in range(0, 180, 7)] == before
        log.append(batch())
        assert log.log_end_offset == 183


def test_file_region_transfer_to_socket_and_pipe(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        fill(log, 30, n=5)
        r = log.read(0, 10**6)
        data = r.read()
        assert len(data) == r.size == len(r)
        a, b = socket.socketpair()
        with a, b:
            assert r.transfer_to(a.fileno()) == r.size
            got = b""
            while len(got) < r.size:
                got += b.recv(65536)
            assert got == data
            assert r.transfer_to(a, r.size) == 0
            with pytest.raises(ValueError):
                r.transfer_to(a, r.size + 1)
        rfd, wfd = os.pipe()
        try:
            assert r.transfer_to(wfd, 10) == r.size - 10
            assert os.read(rfd, r.size) == data[10:]
        finally:
            os.close(rfd)
            os.close(wfd)


def test_transfer_to_nonblocking_socket_returns_progress(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=10**7, max_message_bytes=10**7), clock=clock) as log:
        for _ in range(8):
            log.append(batch(50, size=2000))
        r = log.read(0, 10**7)
        assert r.size > 600_000
        a, b = socket.socketpair()
        with a, b:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            a.setblocking(False)
            sent = r.transfer_to(a.fileno())
            assert 0 < sent < r.size  # the socket buffer filled: EAGAIN ends the call
            assert r.transfer_to(a.fileno(), sent) == 0  # still full: no progress, no error
            got = bytearray()
            total = sent
            while len(got) < r.size:
                got += b.recv(1 << 20)
                if total < r.size:
                    total += r.transfer_to(a.fileno(), total)
            assert bytes(got) == r.read()


def test_file_region_head_cuts_on_a_batch_boundary(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        fill(log, 6, n=5)  # batches 0-4, 5-9, ...
        r = log.read(0, 10**6)
        nxt = log.read(10, 1)  # the batch after 0-9
        head = r.head(nxt.position - r.position, nxt.first_offset - 1)
        assert offsets_in(head) == list(range(10)) and head.last_offset == 9
        assert head.fileno == r.fileno and head.first_offset == 0
        assert not r.head(0, 0) and r.head(0, 0).last_offset == -1
        with pytest.raises(ValueError):
            r.head(r.size + 1, 99)


def test_region_survives_retention_and_close(logdir, clock) -> None:
    cfg = small(retention_ms=1000, file_delete_delay_ms=0)
    log = Log(logdir, cfg, clock=clock)
    fill(log, 30, clock=clock)
    r = log.read(0, 10**6)
    data = r.read()
    clock.advance(10_000)
    log.append(batch(ts=clock.time_ms()))
    assert log.apply_retention() >= 1
    assert not os.path.exists(segment_path(logdir, 0, ".log"))
    assert log.log_start_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert r.read() == data  # the unlinked file is still readable through the region
    log.close()
    assert r.read() == data
    rfd, wfd = os.pipe()
    try:
        assert r.transfer_to(wfd) == len(data)
        assert os.read(rfd, len(data) + 1) == data
    finally:
        os.close(rfd)
        os.close(wfd)


def test_no_descriptor_leak(logdir, clock) -> None:
    def nfds() -> int:
        return len(os.listdir("/proc/self/fd"))

    import gc

    gc.collect()  # descriptors of earlier tests' objects must not close mid-test
    start = nfds()
    log = Log(logdir, small(), clock=clock)
    fill(log, 40)
    regions = [log.read(o, 100) for o in range(0, 120, 10)]
    log.close()
    assert all(r.read() for r in regions)
    assert nfds() > start
    del regions  # the closed log itself holds no descriptor any more
    assert nfds() <= start
    assert log.log_end_offset == 120 and log.num_segments > 1
    with pytest.raises(LogcoreError, match="closed"):
        log.offset_for_timestamp(T0)


# --------------------------------------------------------------------------- rolling


def test_roll_by_size(logdir, clock) -> None:
    bsize = len(batch())
    with Log(logdir, small(segment_bytes=10 * bsize), clock=clock) as log:
        infos = [log.append(batch()) for _ in range(25)]
        assert [i.rolled for i in infos].count(True) == 2
        assert log.segment_base_offsets == [0, 30, 60]
        for b in log.segment_base_offsets[:-1]:
            assert os.path.getsize(segment_path(logdir, b, ".log")) == 10 * bsize


def test_roll_by_time_with_manual_clock(logdir, clock) -> None:
    with Log(logdir, small(segment_ms=1000, segment_bytes=10**6), clock=clock) as log:
        log.append(batch(ts=clock.time_ms()))
        clock.advance(900)
        assert not log.append(batch(ts=clock.time_ms())).rolled
        clock.advance(200)
        # the first batch's timestamp vs the incoming one: 1100 ms > segment_ms
        assert log.append(batch(ts=clock.time_ms())).rolled
        assert log.segment_base_offsets == [0, 6]
        # batches without usable timestamps fall back to the segment's creation time
        clock.advance(10)
        assert not log.append(batch(ts=clock.time_ms())).rolled


def test_roll_by_time_falls_back_to_wall_clock(logdir, clock) -> None:
    with Log(logdir, small(segment_ms=1000, segment_bytes=10**6), clock=clock) as log:
        log.append(batch(1, ts=-1))
        clock.advance(1500)
        assert log.append(batch(1, ts=-1)).rolled


def test_roll_jitter_is_bounded(logdir, clock) -> None:
    with Log(logdir, small(segment_ms=1000, segment_jitter_ms=500), clock=clock) as log:
        seg = log.active_segment
        assert 0 <= seg.roll_jitter_ms < 500
        log.append(batch(ts=clock.time_ms()))
        clock.advance(1001)
        assert log.append(batch(ts=clock.time_ms())).rolled


def test_roll_when_index_is_full(logdir, clock) -> None:
    cfg = small(segment_bytes=10**6, index_interval_bytes=0, segment_index_bytes=48)
    with Log(logdir, cfg, clock=clock) as log:
        rolled = [log.append(batch(1, ts=T0 + i)).rolled for i in range(20)]
        assert any(rolled)
        for b in log.segment_base_offsets[:-1]:
            assert len(read_offset_index(segment_path(logdir, b, ".index"))) <= 6
    check_partition(logdir)


def test_roll_on_relative_offset_overflow(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(batch(2))
        far = 2**31 + 5
        info = log.append(batch(2, base_offset=far), assign_offsets=False)
        assert info.rolled and info.first_offset == far
        assert log.segment_base_offsets == [0, far]
        assert offsets_in(log.read(far, 1000)) == [far, far + 1]
        assert offsets_in(log.read(1, 1000)) == [0, 1]


def test_explicit_roll(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.roll()  # empty: nothing to do
        assert log.num_segments == 1
        log.append(batch())
        log.roll()
        assert log.segment_base_offsets == [0, 3]


# --------------------------------------------------------------------------- replicas


def test_replica_append_keeps_offsets(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        info = log.append(batch(3, base_offset=0, partition_leader_epoch=1) +
                          batch(2, base_offset=10, partition_leader_epoch=3),
                          assign_offsets=False)
        assert (info.first_offset, info.last_offset, info.record_count) == (0, 11, 5)
        assert info.batch_count == 2 and log.log_end_offset == 12
        assert log.leader_epoch_cache.entries == [(1, 0), (3, 10)]
        assert offsets_in(log.read(5, 1000)) == [10, 11]
        with pytest.raises(CorruptRecordError, match="expected >= 12"):
            log.append(batch(1, base_offset=11), assign_offsets=False)
        with pytest.raises(CorruptRecordError, match="increase"):
            log.append(batch(2, base_offset=20) + batch(1, base_offset=21), assign_offsets=False)
        assert log.log_end_offset == 12


def test_leader_epoch_is_stamped_and_recorded(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        log.append(batch(), leader_epoch=4)
        log.append(batch(), leader_epoch=4)
        log.append(batch(), leader_epoch=6)
        assert log.leader_epoch_cache.entries == [(4, 0), (6, 6)]
        assert [b.partition_leader_epoch for b in iter_batches(log.read(0, 10**6).read())] == [
            4, 4, 6]
    assert read_checkpoint(os.path.join(logdir, "leader-epoch-checkpoint")) == (
        0, [["4", "0"], ["6", "6"]])


# --------------------------------------------------------------------------- truncation


def test_truncate_to(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        for i in range(40):
            log.append(batch(), leader_epoch=i // 10)
        segs = log.segment_base_offsets
        assert len(segs) >= 3
        assert log.truncate_to(1000) is False
        target = segs[1] + 4  # inside a batch of the second segment
        assert log.truncate_to(target) is True
        assert log.log_end_offset == target - 1  # the straddling batch went whole
        assert log.segment_base_offsets == segs[:2]
        assert offsets_in(log.read(segs[1], 10**6))[-1] == target - 2
        assert log.leader_epoch_cache.entries[-1][1] < log.log_end_offset
        info = log.append(batch())
        assert info.first_offset == target - 1
        log.truncate_to(5)
        assert log.log_end_offset == 3 and log.segment_base_offsets == [0]
    check_partition(logdir)
    with Log(logdir, small(), clock=clock) as log:
        assert log.log_end_offset == 3


def test_truncate_fully_and_start_at(logdir, clock) -> None:
    with Log(logdir, small(file_delete_delay_ms=0), clock=clock) as log:
        fill(log, 30)
        log.append(batch(), leader_epoch=2)
        log.truncate_fully_and_start_at(1000)
        assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
        assert log.segment_base_offsets == [1000]
        assert log.leader_epoch_cache.entries == []
        assert log.append(batch()).first_offset == 1000
        with pytest.raises(OffsetOutOfRangeError):
            log.read(999, 100)
    assert segment_base_offsets(logdir) == [1000]
    with Log(logdir, small(), clock=clock) as log:
        assert (log.log_start_offset, log.log_end_offset) == (1000, 1003)
        log.truncate_to(500)  # below the log start: start over there
        assert (log.log_start_offset, log.log_end_offset) == (500, 500)


def test_delete_records_before(logdir, clock) -> None:
    with Log(logdir, small(file_delete_delay_ms=0), clock=clock) as log:
        fill(log, 40)
        segs = log.segment_base_offsets
        assert log.delete_records_before(segs[2] + 1) == segs[2] + 1
        assert log.delete_records_before(5) == segs[2] + 1  # never moves back
        with pytest.raises(OffsetOutOfRangeError):
            log.read(segs[2], 100)
        assert log.read(segs[2] + 1, 100).first_offset == segs[2]  # whole first batch
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records_before(10**6)
        assert log.apply_retention() == 2  # the log-start-offset breach pass
        assert log.segment_base_offsets[0] == segs[2]
        assert log.log_start_offset == segs[2] + 1
    with Log(logdir, small(), clock=clock) as log:
        assert log.log_start_offset == segs[2] + 1


# --------------------------------------------------------------------------- retention


def test_retention_by_time_never_active_and_delayed_delete(logdir, clock) -> None:
    cfg = small(retention_ms=10_000, file_delete_delay_ms=60_000)
    with Log(logdir, cfg, clock=clock) as log:
        for _ in range(20):
            log.append(batch(ts=clock.time_ms()))
        old_segments = log.segment_base_offsets[:-1]
        clock.advance(5000)
        for _ in range(20):
            log.append(batch(ts=clock.time_ms()))
        assert log.apply_retention() == 0
        clock.advance(6000)  # the first segments' newest records are now 11 s old
        deleted = log.apply_retention()
        assert deleted >= 1
        assert log.log_start_offset == log.segment_base_offsets[0]
        assert set(old_segments[:deleted]).isdisjoint(log.segment_base_offsets)
        gone = old_segments[0]
        assert os.path.exists(segment_path(logdir, gone, ".log.deleted"))
        assert log.pending_deletes == deleted
        clock.advance(59_000)
        log.apply_retention()
        assert os.path.exists(segment_path(logdir, gone, ".log.deleted"))
        clock.advance(2_000)
        log.apply_retention()
        assert not os.path.exists(segment_path(logdir, gone, ".log.deleted"))
        clock.advance(60_000)
        log.apply_retention()
        assert log.pending_deletes == 0
        clock.advance(10**9)
        log.apply_retention()
        assert log.num_segments == 1  # never the active segment
        assert log.read(log.log_start_offset, 100).size > 0


def test_retention_by_size(logdir, clock) -> None:
    bsize = len(batch())
    cfg = small(segment_bytes=5 * bsize, retention_bytes=12 * bsize, file_delete_delay_ms=0)
    with Log(logdir, cfg, clock=clock) as log:
        fill(log, 30)  # six full segments of five batches
        assert log.num_segments == 6
        assert log.apply_retention(now_ms=T0) == 3  # 30 -> 15 batches (>= 12 kept)
        assert log.size_in_bytes == 15 * bsize
        assert log.log_start_offset == 45
        assert segment_base_offsets(logdir) == log.segment_base_offsets


def test_retention_minus_one_keeps_forever(logdir, clock) -> None:
    with Log(logdir, small(retention_ms=-1), clock=clock) as log:
        fill(log, 30)
        assert log.apply_retention(now_ms=T0 + 10**12) == 0


def test_offset_for_timestamp(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        for i in range(40):
            log.append(batch(3, ts=T0 + 100 * i))  # records at T0+100i, +1, +2
        assert log.offset_for_timestamp(T0) == (0, T0)
        assert log.offset_for_timestamp(T0 - 5) == (0, T0)
        assert log.offset_for_timestamp(T0 + 1) == (1, T0 + 1)
        assert log.offset_for_timestamp(T0 + 3) == (3, T0 + 100)
        assert log.offset_for_timestamp(T0 + 2050) == (63, T0 + 2100)
        assert log.offset_for_timestamp(T0 + 3902) == (119, T0 + 3902)
        assert log.offset_for_timestamp(T0 + 3903) is None
        assert log.offset_for_timestamp(-2) == (0, -1)
        assert log.offset_for_timestamp(-1) == (120, -1)
        assert log.offset_for_timestamp(-3) == (119, T0 + 3902)
        for i in range(0, 40, 3):
            for d in (0, 1, 2):
                assert log.offset_for_timestamp(T0 + 100 * i + d) == (3 * i + d, T0 + 100 * i + d)
        log.delete_records_before(50)
        assert log.offset_for_timestamp(T0) == (50, T0 + 1602)


# --------------------------------------------------------------------------- reopen


def test_unclean_reopen_recovers_and_keeps_everything(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    fill(log, 30)
    log.flush()
    fill(log, 10)
    # no close: as if the process died (data is in the page cache)
    with pytest.raises(logcore.LogDirError, match="in use"):
        Log(logdir, small(), clock=clock)  # the directory is locked while `log` lives
    del log
    log2 = Log(logdir, small(), clock=clock)
    assert log2.recovered and log2.recovery_truncated_bytes == 0
    assert log2.log_end_offset == 120 and log2.recovery_point == 90
    assert offsets_in(log2.read(0, 10**6))[0] == 0
    log2.close()
    check_partition(logdir)


def test_missing_and_corrupt_indexes_are_rebuilt(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        fill(log, 40)
        bases = log.segment_base_offsets
        expected = {o: offsets_in(log.read(o, 500)) for o in range(0, 120, 5)}
    os.unlink(segment_path(logdir, bases[0], ".index"))
    os.unlink(segment_path(logdir, bases[1], ".timeindex"))
    with open(segment_path(logdir, bases[2], ".index"), "r+b") as f:
        f.write(b"\xff" * 8)  # relative offset -1: before the base
    with Log(logdir, small(), clock=clock) as log:
        assert not log.recovered
        assert {o: offsets_in(log.read(o, 500)) for o in range(0, 120, 5)} == expected
    check_partition(logdir)
    assert len(read_offset_index(segment_path(logdir, bases[0], ".index"))) >= 1


def test_leftover_files_are_handled_as_kafka_does(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        fill(log, 30)
        bases = log.segment_base_offsets
    d = logdir
    open(os.path.join(d, "00000000000000000999.log.deleted"), "wb").close()
    open(os.path.join(d, "leader-epoch-checkpoint.tmp"), "wb").close()
    open(os.path.join(d, "00000000000000000777.log.cleaned"), "wb").close()
    open(os.path.join(d, "00000000000000000888.log.swap"), "wb").close()  # >= min cleaned
    open(os.path.join(d, "00000000000000000555.index"), "wb").close()  # orphan index
    with Log(logdir, small(), clock=clock) as log:
        assert log.segment_base_offsets == bases and log.log_end_offset == 90
    left = os.listdir(d)
    assert not [n for n in left if n.endswith((".deleted", ".tmp", ".cleaned", ".swap"))]
    assert "00000000000000000555.index" not in left


def test_complete_swap_replaces_its_segments(logdir, clock) -> None:
    with Log(logdir, small(), clock=clock) as log:
        fill(log, 30)
        bases = log.segment_base_offsets
    # a "cleaned" replacement of the first two segments, as the cleaner would leave it
    first, second = read_batches(segment_path(logdir, bases[0], ".log"))[0], read_batches(
        segment_path(logdir, bases[1], ".log"))[0]
    keep = [first[0], second[-1]]
    with open(segment_path(logdir, bases[0], ".log"), "rb") as f:
        a = f.read()[keep[0].position : keep[0].position + keep[0].size]
    with open(segment_path(logdir, bases[1], ".log"), "rb") as f:
        b = f.read()[keep[1].position : keep[1].position + keep[1].size]
    with open(segment_path(logdir, bases[0], ".log.swap"), "wb") as f:
        f.write(a + b)
    with Log(logdir, small(), clock=clock) as log:
        assert log.segment_base_offsets == [bases[0]] + bases[2:]
        assert offsets_in(log.read(0, 10**6))[:4] == [0, 1, 2, second[-1].base_offset]
    check_partition(logdir)


def test_delete_removes_directory(logdir, clock) -> None:
    log = Log(logdir, small(), clock=clock)
    fill(log, 5)
    log.delete()
    assert not os.path.exists(logdir)
    assert log.closed


def test_default_config_and_system_clock(tmp_path) -> None:
    with Log(tmp_path / "x") as log:
        info = log.append(batch(1))
        assert info.first_offset == 0 and log.config == LogConfig()
        assert logcore.Log is Log
    assert "x" in repr(log)


# --------------------------------------------------------------------------- threads


def test_one_writer_many_readers(logdir, clock) -> None:
    cfg = small(segment_bytes=4096, retention_bytes=30_000, file_delete_delay_ms=0)
    log = Log(logdir, cfg, clock=clock)
    fill(log, 5)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader(seed: int) -> None:
        import random

        rnd = random.Random(seed)
        try:
            while not stop.is_set():
                lso, leo = log.log_start_offset, log.log_end_offset
                o = rnd.randrange(lso, leo + 1)
                try:
                    r = log.read(o, rnd.choice([1, 500, 5000]))
                except OffsetOutOfRangeError:
                    continue  # retention moved the start meanwhile
                if o < leo:
                    data = r.read()
                    bs = list(iter_batches(data))
                    assert bs and bs[0].base_offset <= o <= bs[0].last_offset
                    for b in bs:
                        b.validate()
                    assert bs[-1].last_offset == r.last_offset
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(150):
            log.append(batch(1 + i % 4))
            if i % 20 == 0:
                log.apply_retention()
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    log.close()
    assert not errors, errors[0]


def test_preallocate(logdir, clock) -> None:
    cfg = small(segment_bytes=3000, preallocate=True)
    log = Log(logdir, cfg, clock=clock)
    fill(log, 5)
    active = segment_path(logdir, 0, ".log")
    assert os.path.getsize(active) == 3000  # reserved up front
    assert log.active_segment.size < 3000
    fill(log, 60)
    bases = log.segment_base_offsets
    assert len(bases) >= 3
    for b in bases[:-1]:  # rolled segments are trimmed to their data
        assert os.path.getsize(segment_path(logdir, b, ".log")) == log.read(b, 10**6).size
    assert os.path.getsize(segment_path(logdir, bases[-1], ".log")) == 3000
    # a crash leaves the zero tail: recovery cuts it off and keeps every batch
    leo = log.log_end_offset
    del log
    with Log(logdir, cfg, clock=clock) as log:
        assert log.recovered and log.log_end_offset == leo
    check_partition(logdir)  # closed: the active file is trimmed too


def test_opens_a_partition_directory_laid_out_by_kafka(tmp_path, clock) -> None:
    from _harness.kafka_format import write_kafka_partition

    d = str(tmp_path / "kafka-0")
    raws = [batch(1 + i % 5, ts=T0 + 10 * i, size=30) for i in range(80)]
    headers = write_kafka_partition(d, raws, segment_bytes=2500, index_interval_bytes=300)
    bases = segment_base_offsets(d)
    assert len(bases) >= 3
    cfg = small(segment_bytes=2500, index_interval_bytes=300)
    with Log(d, cfg, clock=clock) as log:
        assert log.recovered  # no clean-shutdown marker in a partition directory
        assert log.recovery_truncated_bytes == 0
        assert log.segment_base_offsets == bases
        assert log.log_end_offset == headers[-1].last_offset + 1
        assert log.leader_epoch_cache.entries == [(0, 0)]
        for h in headers:
            r = log.read(h.last_offset, 1)
            assert (r.first_offset, r.last_offset) == (h.base_offset, h.last_offset)
        assert log.offset_for_timestamp(T0 + 10 * 40) == (headers[40].base_offset, T0 + 400)
        log.append(batch())
    left = os.listdir(d)
    assert "partition.metadata" in left and any(n.endswith(".snapshot") for n in left)
    # The sealed segments' index files are still byte-for-byte what Kafka wrote.
    ours = str(tmp_path / "again-0")
    write_kafka_partition(ours, raws, segment_bytes=2500, index_interval_bytes=300)
    for b in bases[:-1]:
        for suffix in (".log", ".index", ".timeindex"):
            with open(segment_path(d, b, suffix), "rb") as f1, open(
                    segment_path(ours, b, suffix), "rb") as f2:
                assert f1.read() == f2.read(), (b, suffix)


def test_kafka_layout_written_by_log_matches_the_reference_layout(tmp_path, clock) -> None:
    """What Log writes equals what the independent writer lays out for the same batches."""
    from _harness.kafka_format import write_kafka_partition

    raws = [batch(1 + i % 5, ts=T0 + 10 * i, size=30) for i in range(80)]
    ref = str(tmp_path / "ref-0")
    write_kafka_partition(ref, raws, segment_bytes=2500, index_interval_bytes=300)
    d = str(tmp_path / "ours-0")
    with Log(d, small(segment_bytes=2500, index_interval_bytes=300), clock=clock) as log:
        for raw in raws:
            log.append(raw)
    assert segment_base_offsets(d) == segment_base_offsets(ref)
    for b in segment_base_offsets(ref):
        for suffix in (".log", ".index", ".timeindex"):
            with open(segment_path(d, b, suffix), "rb") as f1, open(
                    segment_path(ref, b, suffix), "rb") as f2:
                assert f1.read() == f2.read(), (b, suffix)


def test_corruption_found_by_a_read_names_the_file(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        fill(log, 10)
        bsize = len(batch())
        path = segment_path(logdir, 0, ".log")
        # bit rot after the log was opened: a batch length that cannot be
        with open(path, "r+b") as f:
            f.seek(3 * bsize + 8)
            f.write((5).to_bytes(4, "big"))
        with pytest.raises(CorruptRecordError) as ei:
            log.read(12, 100)
        assert ei.value.path == path and ei.value.position == 3 * bsize
        assert path in str(ei.value)
        assert log.read(0, 100).first_offset == 0  # the batches before it still read


def test_transfer_to_falls_back_to_copying(logdir, clock, monkeypatch) -> None:
    import errno

    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        fill(log, 20)
        r = log.read(0, 10**6)
        data = r.read()

        def no_sendfile(*_a):
            raise OSError(errno.EINVAL, "sendfile not supported here")

        monkeypatch.setattr(os, "sendfile", no_sendfile)
        a, b = socket.socketpair()
        with a, b:
            assert r.transfer_to(a, 7) == len(data) - 7
            got = b""
            while len(got) < len(data) - 7:
                got += b.recv(1 << 16)
            assert got == data[7:]


def test_write_failure_is_a_log_dir_error_and_cuts_back(logdir, clock, monkeypatch) -> None:
    import errno

    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        fill(log, 3)
        size, leo = log.size_in_bytes, log.log_end_offset
        real = os.pwrite

        def half_then_enospc(fd, data, pos):
            with memoryview(data) as v:
                real(fd, v[: len(v) // 2], pos)
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "pwrite", half_then_enospc)
        with pytest.raises(logcore.LogDirError) as ei:
            log.append(batch())
        assert ei.value.errno == errno.ENOSPC and isinstance(ei.value, OSError)
        monkeypatch.setattr(os, "pwrite", real)
        assert log.size_in_bytes == size and log.log_end_offset == leo
        assert os.path.getsize(segment_path(logdir, 0, ".log")) == size
        assert log.append(batch()).first_offset == leo
    check_partition(logdir)


def test_flush_policies_advance_the_recovery_point(logdir, clock) -> None:
    with Log(logdir, small(flush_messages=6), clock=clock) as log:
        log.append(batch())
        assert log.recovery_point == 0
        log.append(batch())
        assert log.recovery_point == 6  # 6 messages since the last flush
        log.append(batch())
        assert log.recovery_point == 6
        log.flush()
        assert log.recovery_point == 9
        assert read_checkpoint(os.path.join(logdir, "recovery-point-offset-checkpoint"))[1] == [
            ["topic", "0", "9"]]
    with Log(str(logdir) + "x", small(flush_ms=1000), clock=clock) as log:
        log.append(batch())
        assert log.recovery_point == 0
        clock.advance(1000)
        log.append(batch())
        assert log.recovery_point == 6


def test_update_config_applies_live(logdir, clock) -> None:
    with Log(logdir, small(segment_bytes=10**6), clock=clock) as log:
        log.append(batch(ts=clock.time_ms()))
        clock.advance(5000)
        assert not log.append(batch(ts=clock.time_ms())).rolled
        log.update_config(log.config.replace(segment_ms=1000, message_timestamp_type="LogAppendTime"))
        info = log.append(batch(ts=1))
        assert info.rolled  # the new segment_ms applies to the active segment
        assert info.log_append_time_ms == clock.time_ms()
        log.config = log.config.replace(retention_ms=1, file_delete_delay_ms=0)
        clock.advance(10)
        log.append(batch())
        assert log.apply_retention() == 1
        with pytest.raises(TypeError):
            log.update_config({"segment.ms": "1"})  # type: ignore[arg-type]
