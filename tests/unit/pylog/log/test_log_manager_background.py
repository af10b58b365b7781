"""LogManager background work: flush on roll, flush.ms on idle partitions, checkpoints,
idle index mappings, parallel open of many segments, file limits."""

from __future__ import annotations

import os
import resource
import time

import pytest

import logcore
from pylog._clock import ManualClock
from pylog.config import BrokerConfig
from pylog.log import LogManager


def _batch(n: int = 3, ts: int | None = None) -> bytes:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=ts)
    return b.build()


def _config(tmp_path, **extra: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1", **extra})


def _checkpoint(directory: str, name: str) -> int | None:
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = f.read().split("\n")
    return int(lines[2].split()[2])


def _wait(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def _index_mappings(root: str) -> int:
    """Mappings of this process on files under ``root`` (Linux)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if root in line)


def test_rolled_segments_are_flushed_in_the_background_and_checkpointed(tmp_path) -> None:
    clock = ManualClock()
    m = LogManager(_config(tmp_path), clock)
    m.startup()
    try:
        p = m.create_topic("rolls", 1, configs={"segment.bytes": "400"}).partitions[0]
        for _ in range(40):
            p.log.append(_batch(ts=clock.time_ms()))
        assert p.log.num_segments > 5
        active = p.log.active_segment.base_offset
        # Kafka's model: the roll schedules a flush up to the new segment's base offset;
        # nothing flushes the active segment.
        assert _wait(lambda: p.log.recovery_point == active), p.log.recovery_point
        assert p.log.recovery_point < p.log.log_end_offset
        # The recovery point reaches its file with the periodic checkpoint, not before.
        assert _checkpoint(p.directory, "recovery-point-offset-checkpoint") != active
        assert m.checkpoint_recovery_points() == 1
        assert _checkpoint(p.directory, "recovery-point-offset-checkpoint") == active
        assert m.checkpoint_recovery_points() == 0  # unchanged: not written again
    finally:
        m.shutdown()


def test_flush_ms_is_honoured_on_an_idle_partition(tmp_path) -> None:
    clock = ManualClock()
    m = LogManager(_config(tmp_path), clock)
    m.startup()
    try:
        timed = m.create_topic("timed", 1, configs={"flush.ms": "1000"}).partitions[0]
        never = m.create_topic("never", 1).partitions[0]
        for p in (timed, never):
            p.log.append(_batch(ts=clock.time_ms()))
            assert p.log.recovery_point == 0
        assert m.flush_dirty_logs() == 0  # not due yet
        clock.advance(1000)
        # No append since: the flusher alone flushes the partition whose flush.ms passed.
        assert m.flush_dirty_logs() == 1
        assert timed.log.recovery_point == timed.log.log_end_offset == 3
        assert never.log.recovery_point == 0
    finally:
        m.shutdown()


def test_log_start_offset_checkpoint_is_periodic(tmp_path) -> None:
    clock = ManualClock()
    m = LogManager(_config(tmp_path), clock)
    m.startup()
    try:
        p = m.create_topic("lso", 1, configs={"segment.bytes": "400"}).partitions[0]
        for _ in range(20):
            p.log.append(_batch(ts=clock.time_ms()))
        p.log.update_config(logcore.LogConfig(segment_bytes=400, retention_bytes=400,
                                              file_delete_delay_ms=0))
        assert p.log.apply_retention() > 0
        lso = p.log.log_start_offset
        assert lso > 0
        assert _checkpoint(p.directory, "log-start-offset-checkpoint") != lso
        assert m.checkpoint_log_start_offsets() == 1
        assert _checkpoint(p.directory, "log-start-offset-checkpoint") == lso
    finally:
        m.shutdown()


def test_idle_index_mappings_are_released(tmp_path) -> None:
    clock = ManualClock()
    cfg = _config(tmp_path)
    m = LogManager(cfg, clock)
    m.startup()
    p = m.create_topic("idle", 1, configs={"segment.bytes": "400"}).partitions[0]
    for _ in range(30):
        p.log.append(_batch(ts=clock.time_ms()))
    m.shutdown()
    m = LogManager(cfg, clock)
    m.startup()
    try:
        plog = m.get_partition("idle", 0).log
        assert plog.mapped_indexes == 2  # the active segment only
        for offset in (0, 9, 30):
            plog.read(offset, 1000)
        opened = plog.mapped_indexes
        assert opened > 2
        assert m.release_idle_indexes() == 0  # just used: kept for one more period
        assert m.release_idle_indexes() == opened - 2
        assert plog.mapped_indexes == 2
        assert len(plog.read(9, 1000).read()) > 0  # mapped again on demand
    finally:
        m.shutdown()


def test_two_thousand_segments_open_with_o_partitions_mappings(tmp_path, monkeypatch) -> None:
    """4 partitions x 500 segments: opening maps the active segments' indexes only."""
    partitions, per_partition = 4, 500
    data = tmp_path / "data"
    cfg = _config(tmp_path, **{"num.recovery.threads.per.data.dir": "3"})
    m = LogManager(cfg, ManualClock())
    m.startup()
    m.create_topic("many", partitions)
    m.shutdown()
    small = logcore.LogConfig(segment_bytes=100, segment_index_bytes=1024)  # a batch a segment
    with monkeypatch.context() as patch:
        # Building the data only: 2,000 fsyncs at close would take most of the test.
        patch.setattr(os, "fsync", lambda fd: None)
        for i in range(partitions):
            with logcore.Log(str(data / f"many-{i}"), small) as plog:
                for _ in range(per_partition):
                    plog.append(_batch(1))
                assert plog.num_segments == per_partition
    m = LogManager(cfg, ManualClock())
    started = time.monotonic()
    m.startup()
    elapsed = time.monotonic() - started
    try:
        logs = [p.log for p in m.all_partitions()]
        assert sum(plog.num_segments for plog in logs) == partitions * per_partition
        assert all(plog.recovery_stats.clean and plog.recovery_stats.segments_scanned == 0
                   for plog in logs)
        assert sum(plog.mapped_indexes for plog in logs) == 2 * partitions
        assert _index_mappings(str(data)) <= 2 * partitions
        # every segment stays readable (mapping its index on the way)
        assert logs[0].read(250, 100).first_offset == 250
        print(f"opened {partitions * per_partition} segments in {elapsed:.3f} s")
    finally:
        m.shutdown()


def test_limits_are_raised_and_reported(tmp_path, caplog) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    m = LogManager(_config(tmp_path), ManualClock())
    with caplog.at_level("INFO", logger="pylog.log"):
        m.startup()
    try:
        figures = m.check_limits([str(tmp_path / "data" / "x-0")])
        now_soft, now_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert now_hard == hard
        if hard != resource.RLIM_INFINITY:
            assert now_soft == hard
        assert figures["open_files_limit"] == now_soft
        assert figures["files_needed"] >= 1 and figures["maps_needed"] >= 2
        assert any("open files limit" in r.getMessage() for r in caplog.records)
    finally:
        m.shutdown()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_short_limits_are_warned_about(tmp_path, caplog, monkeypatch) -> None:
    import pylog.log.limits as limits_module

    monkeypatch.setattr(limits_module, "_read_int", lambda path: 10)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    m = LogManager(_config(tmp_path), ManualClock())
    try:
        with caplog.at_level("WARNING", logger="pylog.log"):
            m.check_limits([str(tmp_path / "data" / f"t-{i}") for i in range(10)])
        assert any("vm.max_map_count (10)" in r.getMessage() for r in caplog.records)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("threads", [1, 4])
def test_partitions_open_in_parallel_and_failures_close_the_rest(tmp_path, threads) -> None:
    cfg = _config(tmp_path, **{"num.recovery.threads.per.data.dir": str(threads)})
    m = LogManager(cfg, ManualClock())
    m.startup()
    m.create_topic("par", 6)
    m.shutdown()
    m = LogManager(cfg, ManualClock())
    m.startup()
    assert len(m.all_partitions()) == 6
    m.shutdown()
    # A partition that cannot be opened fails the start; the others are closed again
    # (their directory locks released), so a second try can take them.
    bad = tmp_path / "data" / "par-3" / "recovery-point-offset-checkpoint"
    good = bad.read_bytes()
    bad.write_bytes(b"0\n1\npar 3 not-a-number\n")
    with pytest.raises(logcore.CorruptRecordError):
        LogManager(cfg, ManualClock()).startup()
    bad.write_bytes(good)
    m = LogManager(cfg, ManualClock())
    m.startup()
    assert len(m.all_partitions()) == 6
    m.shutdown()
