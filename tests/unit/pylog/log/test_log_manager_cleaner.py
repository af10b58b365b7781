"""LogManager and the log cleaner: started and stopped with the manager, compacted topics
cleaned, a config change to compact wakes it, deletion and truncation pause it, and the
cleaner threads run the compacted logs' retention."""

from __future__ import annotations

import os
import threading
import time

import pytest

import logcore
from logcore import compaction
from pylog._clock import ManualClock
from pylog.config import BrokerConfig
from pylog.log import LogManager

T0 = 1_700_000_000_000


def _config(tmp_path, **extra: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1",
                         "log.cleaner.backoff.ms": "50",
                         "log.cleaner.dedupe.buffer.size": str(4 << 20), **extra})


COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01",
           "file.delete.delay.ms": "0"}


def _fill(plog, n: int, keys: int, start: int = 0) -> None:
    for i in range(start, start + n):
        b = logcore.BatchBuilder()
        b.append(b"v%d" % i, key=b"k%d" % (i % keys), timestamp_ms=T0 + i)
        plog.append(b.build())
    plog.roll()


def _records(plog) -> list[tuple[int, bytes | None, bytes | None]]:
    out, off = [], plog.log_start_offset
    while off < plog.log_end_offset:
        region = plog.read(off, 1 << 30, min_one_batch=True)
        if not region:
            break
        for batch in logcore.iter_batches(region.read()):
            out.extend((r.offset, r.key, r.value) for r in batch)
        off = region.last_offset + 1
    return out


def _wait(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


@pytest.fixture
def manager(tmp_path):
    made: list[LogManager] = []

    def make(**extra: str) -> LogManager:
        m = LogManager(_config(tmp_path, **extra), ManualClock(T0 + 10_000))
        m.startup()
        made.append(m)
        return m

    yield make
    for m in made:
        m.shutdown()


def test_cleaner_runs_with_the_manager_and_compacts_a_compact_topic(manager) -> None:
    m = manager()
    assert m.cleaner is not None and m.cleaner.running
    p = m.create_topic("c", 1, configs=COMPACT).partitions[0]
    d = m.create_topic("d", 1, configs={"segment.bytes": "1000"}).partitions[0]
    _fill(p.log, 200, 5)
    _fill(d.log, 200, 5)
    assert _wait(lambda: len(_records(p.log)) == 5)
    # the latest value of each key, at its original offset
    assert _records(p.log) == [(195 + i, b"k%d" % i, b"v%d" % (195 + i)) for i in range(5)]
    assert len(_records(d.log)) == 200  # a delete-policy topic is never cleaned
    # the replaced segments went with the cleaner's own retention pass (delay 0)
    assert _wait(lambda: not [f for f in os.listdir(p.directory) if f.endswith(".deleted")])
    assert not m.cleaner.uncleanable
    m.shutdown()
    assert not m.cleaner.running


def test_cleaner_disabled_leaves_compacted_topics_alone(manager) -> None:
    m = manager(**{"log.cleaner.enable": "false"})
    assert m.cleaner is None
    p = m.create_topic("c", 1, configs=COMPACT).partitions[0]
    _fill(p.log, 100, 5)
    time.sleep(0.3)
    assert len(_records(p.log)) == 100


def test_a_topic_altered_to_compact_is_cleaned_at_once(manager) -> None:
    # backoff 10 min: only the wake-up that the config change sends can start the clean
    m = manager(**{"log.cleaner.backoff.ms": "600000"})
    p = m.create_topic("t", 1, configs={"segment.bytes": "1000"}).partitions[0]
    _fill(p.log, 100, 4)
    time.sleep(0.2)  # the thread has looked once and gone to sleep
    m.set_topic_configs("t", {"cleanup.policy": ["compact"], "segment.bytes": 1000,
                              "min.cleanable.dirty.ratio": 0.01})
    assert p.log.config.compact and p.log.config.min_cleanable_dirty_ratio == 0.01
    assert _wait(lambda: len(_records(p.log)) == 4, timeout=20)


def _block_at_swap(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """Make the next clean stop before it swaps its cleaned segment in."""
    reached, release = threading.Event(), threading.Event()

    def hook(phase: str) -> None:
        if phase == "cleaned" and not reached.is_set():
            reached.set()
            release.wait(30)

    monkeypatch.setattr(compaction, "phase_hook", hook)
    return reached, release


def test_deleting_a_topic_waits_for_the_clean_in_progress(manager, monkeypatch) -> None:
    m = manager()
    reached, release = _block_at_swap(monkeypatch)
    p = m.create_topic("gone", 1, configs=COMPACT).partitions[0]
    _fill(p.log, 200, 5)
    assert reached.wait(30)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (m.delete_topic("gone"), done.set()))
    worker.start()
    time.sleep(0.3)
    assert not done.is_set() and not p.log.closed  # paused: waits for the clean to end
    release.set()
    worker.join(30)
    assert done.is_set() and p.log.closed and not os.path.exists(p.directory)
    assert p.log not in m.cleaner.uncleanable  # a deletion is not a failure
    assert m.cleaner.rounds == 0  # the clean that was running was aborted before its swap


def test_truncation_waits_for_the_clean_in_progress_and_resumes_it(manager, monkeypatch) -> None:
    m = manager()
    reached, release = _block_at_swap(monkeypatch)
    p = m.create_topic("tr", 1, configs=COMPACT).partitions[0]
    _fill(p.log, 200, 5)
    assert reached.wait(30)
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(m.truncate_to(p, 150)))
    worker.start()
    time.sleep(0.3)
    assert not result and p.log.log_end_offset == 200
    release.set()
    worker.join(30)
    assert result == [True] and p.log.log_end_offset <= 150
    # cleaning resumes afterwards: new dirty data gets compacted
    _fill(p.log, 100, 5, start=1000)
    assert _wait(lambda: len(_records(p.log)) == 5)
    assert [v for _o, _k, v in _records(p.log)] == [b"v%d" % i for i in range(1095, 1100)]


def test_manager_retention_leaves_compacted_logs_to_the_cleaner(manager) -> None:
    m = manager(**{"log.cleaner.backoff.ms": "600000"})
    p = m.create_topic("cd", 1, configs={**COMPACT, "cleanup.policy": "compact,delete",
                                         "retention.ms": "1"}).partitions[0]
    d = m.create_topic("dd", 1, configs={"segment.bytes": "1000", "retention.ms": "1"}).partitions[0]
    m.cleaner.pause(p.log)  # the cleaner threads stay off it while the manager's pass runs
    for plog in (p.log, d.log):
        b = logcore.BatchBuilder()
        b.append(b"v", key=b"k", timestamp_ms=T0)
        plog.append(b.build())
        plog.roll()
    assert m.apply_retention() == 1  # the delete-policy log's old segment only
    assert p.log.num_segments == 2 and d.log.num_segments == 1
    assert m.cleaner.delete_old_segments() == 0  # paused: not the cleaner's either
    m.cleaner.resume(p.log)
    m.cleaner.wake()
    # the cleaner threads' own retention pass (time retention of a compact,delete log)
    assert _wait(lambda: p.log.num_segments == 1)


def test_the_cleaner_stops_at_the_high_watermark_of_a_replicated_log(manager) -> None:
    """Kafka's cleanableOffsets: a record above the high watermark may be truncated by a
    failover, so it must not clean away the committed value of its key below."""
    m = manager()
    p = m.create_topic("r", 1, configs=COMPACT).partitions[0]
    plog = p.log
    plog.track_high_watermark(0)  # what the replica manager does for a replicated log
    _fill(plog, 60, 5)  # committed: offsets 0-59, rolled
    committed = plog.log_end_offset
    plog.on_high_watermark(committed)
    _fill(plog, 60, 5, start=60)  # 60-119, rolled, not replicated yet
    assert plog.active_segment.base_offset > committed
    assert plog.high_watermark == committed and plog.cleanable_upper_bound() == committed
    assert _wait(lambda: plog.first_dirty_offset == committed)
    time.sleep(0.3)  # several more looks of the cleaner (backoff 50 ms)
    assert plog.first_dirty_offset == committed
    recs = _records(plog)
    # Below the high watermark: the latest committed value of each key is still there.
    assert [r for r in recs if r[0] < committed] == [
        (55 + i, b"k%d" % i, b"v%d" % (55 + i)) for i in range(5)]
    assert [r[0] for r in recs if r[0] >= committed] == list(range(committed, 120))
    # Replicated: the high watermark moves and the rest is cleaned.
    plog.on_high_watermark(plog.log_end_offset)
    assert _wait(lambda: len(_records(plog)) == 5)
    assert _records(plog) == [(115 + i, b"k%d" % i, b"v%d" % (115 + i)) for i in range(5)]
