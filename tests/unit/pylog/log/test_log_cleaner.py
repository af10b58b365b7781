"""pylog.log.cleaner: cleaner threads pick the filthiest compacted log and clean it."""

from __future__ import annotations

import time

import pytest

from logcore import BatchBuilder, Log, LogConfig, ManualClock, iter_batches
from logcore.cleaner import Throttler
from pylog.log.cleaner import LogCleaner

T0 = 1_700_000_000_000


def make_log(path, clock, policy="compact", **kw) -> Log:
    cfg = LogConfig(cleanup_policy=policy, segment_bytes=1000, file_delete_delay_ms=0, **kw)
    return Log(path, cfg, clock=clock)


def fill(log: Log, n: int, keys: int) -> None:
    for i in range(n):
        b = BatchBuilder()
        b.append(b"v%d" % i, key=b"k%d" % (i % keys), timestamp_ms=T0 + i)
        log.append(b.build())
    log.roll()


def count(log: Log) -> int:
    n, off = 0, log.log_start_offset
    while off < log.log_end_offset:
        region = log.read(off, 1 << 30)
        if not region:
            break
        n += sum(b.records_count for b in iter_batches(region.read()))
        off = region.last_offset + 1
    return n


@pytest.fixture
def logs(tmp_path):
    clock = ManualClock(T0)
    a = make_log(tmp_path / "a-0", clock)
    b = make_log(tmp_path / "b-0", clock)
    d = make_log(tmp_path / "d-0", clock, policy="delete")
    yield a, b, d
    for lg in (a, b, d):
        lg.close()


def test_clean_once_takes_the_filthiest_then_the_next(logs) -> None:
    a, b, d = logs
    fill(a, 100, 5)
    fill(b, 300, 5)
    fill(d, 100, 5)
    lc = LogCleaner(lambda: [a, b, d], threads=0, dedupe_buffer_size=1 << 20)
    first = lc.clean_once()
    assert first is not None and lc.last_stats is first
    # both are wholly dirty (ratio 1.0); whichever went first, the other goes next
    second = lc.clean_once()
    assert second is not None
    assert lc.clean_once() is None  # nothing over the ratio now
    assert count(a) == 5 and count(b) == 5 and count(d) == 100
    assert lc.rounds == 2


def test_upper_bound_holds_the_clean_below_the_high_watermark(logs) -> None:
    a, _b, _d = logs
    fill(a, 100, 5)
    lc = LogCleaner(lambda: [a], threads=0, dedupe_buffer_size=1 << 20,
                    upper_bound=lambda lg: 40)
    stats = lc.clean_once()
    assert stats is not None and stats.end_offset <= 40


def test_paused_logs_are_skipped_and_failures_mark_uncleanable(logs, monkeypatch) -> None:
    a, b, _d = logs
    fill(a, 100, 5)
    fill(b, 100, 5)
    lc = LogCleaner(lambda: [a, b], threads=0, dedupe_buffer_size=1 << 20)
    with lc.paused(a):
        assert lc.clean_once() is not None
        assert lc.clean_once() is None  # b is done, a is paused
    import logcore.cleaner as lcm

    def boom(self, *args, **kw):
        raise OSError(5, "EIO")

    monkeypatch.setattr(lcm.Cleaner, "clean", boom)
    assert lc.clean_once() is None
    assert a in lc.uncleanable
    monkeypatch.undo()
    assert lc.clean_once() is None  # a is skipped from now on


def test_threads_clean_in_the_background_and_stop(logs) -> None:
    a, b, _d = logs
    # any dirty byte is worth a clean: a round that started while the appends below were
    # still going must be followed by another for what came after it
    for lg in (a, b):
        lg.config = lg.config.replace(min_cleanable_dirty_ratio=0.0)
    fill(a, 200, 5)
    fill(b, 200, 7)
    lc = LogCleaner(lambda: [a, b], threads=2, dedupe_buffer_size=1 << 20, backoff_ms=50)
    lc.startup()
    threads = list(lc._threads)
    try:
        deadline = time.monotonic() + 30
        while (count(a), count(b)) != (5, 7) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (count(a), count(b)) == (5, 7)
        # appends go on while the threads look for work; a new dirty section is picked up
        fill(a, 200, 5)
        lc.wake()
        deadline = time.monotonic() + 30
        while count(a) != 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert count(a) == 5
        assert not lc.uncleanable
    finally:
        lc.shutdown()
    assert len(threads) == 2 and not [t for t in threads if t.is_alive()]


def test_a_log_deleted_during_its_clean_is_not_an_error(logs, monkeypatch) -> None:
    a, _b, _d = logs
    fill(a, 100, 5)
    lc = LogCleaner(lambda: [a], threads=0, dedupe_buffer_size=1 << 20)
    from logcore import compaction

    monkeypatch.setattr(compaction, "phase_hook",
                        lambda phase: a.delete() if phase == "cleaned" else None)
    assert lc.clean_once() is None
    assert not lc.uncleanable and a.closed


def test_pause_aborts_a_clean_in_progress_and_cleaning_resumes_after(logs) -> None:
    """Kafka's abortAndPauseCleaning: a pause (before a follower's truncation or a topic
    deletion) does not wait for a slow round to end; the round stops at its next batch,
    swaps nothing in, is no failure, and a round after resume cleans the log."""
    import threading

    a, _b, _d = logs
    fill(a, 300, 5)  # about 20 KB of batches
    lc = LogCleaner(lambda: [a], threads=0, dedupe_buffer_size=1 << 20)
    # A round of several seconds, throttled from its first batch (the default throttler
    # lets the first 10 ms run free: time enough to swap a group in before the pause).
    lc._cleaners[0].throttler = Throttler(4096, check_interval_s=0.0)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(lc.clean_once()))
    worker.start()
    deadline = time.monotonic() + 10
    while a not in lc._in_progress and time.monotonic() < deadline:
        time.sleep(0.005)
    assert a in lc._in_progress
    started = time.monotonic()
    assert lc.pause(a, timeout_s=30)
    assert time.monotonic() - started < 2.0
    worker.join(10)
    assert results == [None] and lc.rounds == 0 and a not in lc.uncleanable
    assert count(a) == 300
    assert lc.clean_once() is None  # paused
    lc.resume(a)
    lc._cleaners[0].throttler.rate = float("inf")
    assert lc.clean_once() is not None and count(a) == 5
