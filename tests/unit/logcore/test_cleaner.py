"""logcore.cleaner: compaction of cleanup_policy=compact logs, and its crash safety."""

from __future__ import annotations

import os
import time

import pytest
from _harness.log_reading import all_batches, records

from logcore import (
    BatchBuilder,
    InvalidConfigError,
    InvalidRecordError,
    Log,
    LogConfig,
    ManualClock,
    iter_batches,
)
from logcore import compaction as compaction_mod
from logcore.cleaner import Cleaner, Throttler, cleanable, filthiest
from logcore.compaction import CLEANER_CHECKPOINT

T0 = 1_700_000_000_000
DAY = 86_400_000


def cfg(**kw) -> LogConfig:
    base = dict(cleanup_policy="compact", segment_bytes=1200, segment_index_bytes=4096,
                index_interval_bytes=100, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def batch(pairs, ts, *, compression="none", pid=-1, epoch=-1, seq=-1) -> bytes:
    b = BatchBuilder(compression=compression, producer_id=pid, producer_epoch=epoch,
                     base_sequence=seq)
    for i, (k, v) in enumerate(pairs):
        b.append(v, key=k, timestamp_ms=ts + i)
    return b.build()


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def latest(recs) -> dict:
    out = {}
    for off, k, v, _ts in recs:
        out[k] = (off, v)
    return out


@pytest.fixture
def clock():
    return ManualClock(T0)


def fill(log: Log, clock: ManualClock, n: int, keys: int, *, every_tombstone: int = 0,
         per_batch: int = 1, compression: str = "none") -> None:
    i = 0
    while i < n:
        pairs = []
        for _ in range(per_batch):
            k = b"k%d" % (i % keys)
            tomb = every_tombstone and i % every_tombstone == every_tombstone - 1
            pairs.append((k, None if tomb else b"v%d" % i))
            i += 1
        log.append(batch(pairs, clock.time_ms(), compression=compression))
        clock.advance(1)


def test_clean_keeps_latest_per_key_with_offsets_and_order(tmp_path, clock) -> None:
    log = Log(tmp_path / "t-0", cfg(), clock=clock)
    fill(log, clock, 300, 12)
    before = records(log)
    active_bytes = read_file(log.active_segment.file.path)
    stats = Cleaner(1 << 20).clean(log)
    assert stats is not None and stats.end_offset == log.active_segment.base_offset
    after = records(log)
    end = stats.end_offset
    # below the end: exactly the latest record of each key (as of the end), same offsets
    want = sorted(off for off, _v in latest([r for r in before if r[0] < end]).values())
    assert [r[0] for r in after if r[0] < end] == want
    by_offset = {r[0]: r for r in before}
    assert all(by_offset[r[0]] == r for r in after)  # key, value, timestamp unchanged
    assert [r for r in after if r[0] >= end] == [r for r in before if r[0] >= end]
    assert read_file(log.active_segment.file.path) == active_bytes
    assert log.log_end_offset == 300
    assert log.first_dirty_offset == end
    assert read_file(tmp_path / "t-0" / CLEANER_CHECKPOINT).decode().split("\n")[2] == f"t 0 {end}"
    log.close()
    with Log(tmp_path / "t-0", cfg(), clock=clock) as again:
        assert records(again) == after
        assert again.first_dirty_offset == end
        # a second clean finds nothing new below the active segment
        assert Cleaner(1 << 20).clean(again) is None


def test_keyless_records_are_refused_on_a_compacted_log(tmp_path, clock) -> None:
    with Log(tmp_path / "t-0", cfg(), clock=clock) as log:
        log.append(batch([(b"a", b"1")], T0))
        with pytest.raises(InvalidRecordError) as err:
            log.append(batch([(b"b", b"2"), (None, b"3")], T0))
        assert err.value.record_index == 1
        assert log.log_end_offset == 1
    with Log(tmp_path / "d-0", cfg(cleanup_policy="delete"), clock=clock) as plain:
        plain.append(batch([(None, b"3")], T0))


def test_cleanup_policy_spellings() -> None:
    assert LogConfig(cleanup_policy="delete,compact").cleanup_policy == "compact,delete"
    c = LogConfig.from_properties({"cleanup.policy": "compact , delete",
                                   "min.cleanable.dirty.ratio": "0.25"})
    assert c.compact and c.delete and c.min_cleanable_dirty_ratio == 0.25
    assert LogConfig.from_properties(c.to_properties()) == c
    for bad in ("shred", "", "compact,shred"):
        with pytest.raises(InvalidConfigError):
            LogConfig(cleanup_policy=bad)
    with pytest.raises(InvalidConfigError):
        LogConfig(min_cleanable_dirty_ratio=1.5)
    with pytest.raises(InvalidConfigError):
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)


def test_compact_only_logs_are_not_deleted_by_time_or_size(tmp_path, clock) -> None:
    c = cfg(retention_ms=1, retention_bytes=0)
    with Log(tmp_path / "t-0", c, clock=clock) as log:
        fill(log, clock, 100, 5)
        n = log.num_segments
        clock.advance(DAY)
        assert log.apply_retention() == 0 and log.num_segments == n
        log.config = c.replace(cleanup_policy="compact,delete")
        assert log.apply_retention() == n - 1


def test_tombstones_stay_until_the_delete_horizon(tmp_path, clock) -> None:
    c = cfg(delete_retention_ms=DAY)
    log = Log(tmp_path / "t-0", c, clock=clock)
    fill(log, clock, 60, 6)
    for k in range(3):  # delete three keys
        log.append(batch([(b"k%d" % k, None)], clock.time_ms()))
    fill(log, clock, 60, 1)  # push them out of the active segment (key k0 again...)
    log.append(batch([(b"z", b"roll")] * 30, clock.time_ms()))
    log.roll()
    cleaner = Cleaner(1 << 20)
    stats = cleaner.clean(log)
    assert stats is not None
    tomb = [b for b in all_batches(log) for r in b if r.value is None]
    assert tomb, "the tombstones of k1, k2 are kept until the horizon"
    for b in tomb:
        assert b.attributes & 0x40  # KIP-534 delete-horizon flag
        assert b.base_timestamp == clock.time_ms() + DAY
        for r in b:  # record timestamps are unchanged by the rebase
            assert T0 <= r.timestamp <= clock.time_ms()
    keys_deleted = {r.key for b in tomb for r in b}
    assert keys_deleted == {b"k1", b"k2"}  # k0 was written again after its tombstone
    # before the horizon another clean keeps them (copying the batch unchanged)
    log.append(batch([(b"y", b"1")], clock.time_ms()))
    log.roll()
    clock.advance(DAY - 10)
    cleaner.clean(log)
    assert {r.key for b in all_batches(log) for r in b if r.value is None} == keys_deleted
    clock.advance(20)
    log.append(batch([(b"y", b"2")], clock.time_ms()))
    log.roll()
    stats = cleaner.clean(log)
    assert stats is not None and stats.tombstones_removed == 2
    assert not [r for b in all_batches(log) for r in b if r.value is None]
    log.close()


def test_min_compaction_lag_leaves_young_segments_alone(tmp_path, clock) -> None:
    log = Log(tmp_path / "t-0", cfg(min_compaction_lag_ms=1000), clock=clock)
    fill(log, clock, 100, 4)
    clock.advance(5000)
    boundary = log.log_end_offset
    fill(log, clock, 100, 4)  # young: within the lag
    before = records(log)
    upper = log.first_uncleanable_offset()
    assert upper <= boundary + 20 and upper > 0
    stats = Cleaner(1 << 20).clean(log)
    assert stats is not None and stats.end_offset <= upper
    after = records(log)
    assert [r for r in after if r[0] >= upper] == [r for r in before if r[0] >= upper]
    assert all(ts <= clock.time_ms() - 1000 for _o, _k, _v, ts in before
               if _o < stats.end_offset)
    log.close()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_filtered_and_recompressed(tmp_path, clock, codec) -> None:
    log = Log(tmp_path / "t-0", cfg(segment_bytes=3000), clock=clock)
    fill(log, clock, 400, 7, per_batch=8, compression=codec, every_tombstone=13)
    before = records(log)
    stats = Cleaner(1 << 20).clean(log)
    assert stats is not None
    batches = all_batches(log)
    for b in batches:
        b.validate()  # CRC and records
        assert b.compression == codec or b.records_count == 0
    after = [(r.offset, r.key, r.value, r.timestamp) for b in batches for r in b]
    end = stats.end_offset
    want = latest([r for r in before if r[0] < end])
    assert {r[1]: (r[0], r[2]) for r in after if r[0] < end} == want
    assert len([r for r in after if r[0] < end]) == len(want)
    log.close()


def test_idempotent_producer_keeps_its_state_across_a_clean(tmp_path, clock) -> None:
    pid = 4242
    log = Log(tmp_path / "t-0", cfg(), clock=clock)
    seq = 0
    for i in range(40):
        log.append(batch([(b"same", b"v%d" % i)], clock.time_ms(), pid=pid, epoch=0, seq=seq))
        seq += 1
    # another producer writes the latest value of the same key: pid's last batch would
    # lose its only record
    log.append(batch([(b"same", b"other")], clock.time_ms()))
    log.roll()
    stats = Cleaner(1 << 20).clean(log)
    assert stats is not None and stats.empty_batches_kept == 1
    mine = [b for b in all_batches(log) if b.producer_id == pid]
    assert len(mine) == 1 and mine[0].records_count == 0
    assert mine[0].base_sequence == 39 and mine[0].last_offset == 39
    log.close()
    log = Log(tmp_path / "t-0", cfg(), clock=clock)
    # the duplicate of the last batch is still recognised, the next sequence accepted
    dup = log.append(batch([(b"same", b"v39")], clock.time_ms(), pid=pid, epoch=0, seq=39))
    assert dup.duplicate
    info = log.append(batch([(b"same", b"v40")], clock.time_ms(), pid=pid, epoch=0, seq=40))
    assert not info.duplicate and info.first_offset == 41
    log.close()


def test_a_small_map_cleans_in_rounds(tmp_path, clock) -> None:
    log = Log(tmp_path / "t-0", cfg(), clock=clock)
    fill(log, clock, 400, 50)
    log.roll()
    before = records(log)
    cleaner = Cleaner(24 * 40)  # 36 entries: fewer than the 50 keys
    ends = []
    while True:
        s = cleaner.clean(log)
        if s is None:
            break
        ends.append(s.end_offset)
        assert s.map_entries <= cleaner.offset_map.capacity
    assert len(ends) > 2 and ends == sorted(ends) and ends[-1] == 400
    assert {r[1]: (r[0], r[2]) for r in records(log)} == latest(before)
    assert len(records(log)) == 50
    log.close()


def test_dirty_ratio_and_filthiest(tmp_path, clock) -> None:
    a = Log(tmp_path / "a-0", cfg(), clock=clock)
    b = Log(tmp_path / "b-0", cfg(), clock=clock)
    plain = Log(tmp_path / "p-0", cfg(cleanup_policy="delete"), clock=clock)
    for log in (a, b, plain):
        fill(log, clock, 200, 5)
    c = cleanable(a)
    assert c.clean_bytes == 0 and c.dirty_ratio == 1.0
    Cleaner(1 << 20).clean(a)
    fill(a, clock, 20, 5)
    assert cleanable(a).dirty_ratio < cleanable(b).dirty_ratio
    assert filthiest([a, b, plain]).log is b
    assert filthiest([plain]) is None
    # the max lag forces a log below the ratio
    a.config = a.config.replace(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=10)
    b.config = b.config.replace(min_cleanable_dirty_ratio=1.0)
    clock.advance(1000)
    pick = filthiest([a, b])
    assert pick is not None and pick.log is a and pick.due
    for log in (a, b, plain):
        log.close()


def test_throttler_sleeps_to_the_rate() -> None:
    now = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    t = Throttler(1000.0, sleep=sleep, monotonic=lambda: now[0], check_interval_s=0.1)
    for _ in range(10):
        now[0] += 0.05
        t.maybe_throttle(200)  # 4000 B/s offered
    # 2000 bytes at 1000 B/s take 2 s; only the bytes since the last check (at most
    # one interval's worth, 400 B here) may go unthrottled
    assert 2.0 - 0.4 <= now[0] <= 2.0 + 1e-9
    with pytest.raises(ValueError):
        Throttler(0)


def test_throttler_gives_no_credit_for_idle_time_and_bites_within_a_short_clean() -> None:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    t = Throttler(1000.0, sleep=sleep, monotonic=lambda: now[0])
    now[0] += 3600.0  # an hour idle between two cleans
    t.restart()  # what Cleaner.clean does first
    for _ in range(100):  # a clean whose work takes 1 ms per 100 bytes: 0.1 s unthrottled
        now[0] += 0.001
        t.maybe_throttle(100)
    # 10,000 bytes at 1000 B/s: 10 s, less at most one 10 ms interval's worth of bytes
    assert 10.0 - 0.02 <= now[0] - 3600.0 <= 10.0 + 1e-9


def test_a_read_racing_the_swap_neither_waits_nor_fails(tmp_path, clock, monkeypatch) -> None:
    """With file.delete.delay.ms=0 the old segments are renamed ``.deleted`` before the
    swap publishes the new list and unlinked only after it: a read that takes the old list
    meanwhile (its index not mapped yet) maps the ``.deleted`` files and returns whole
    batches at once, without waiting for the swap (which holds no lock a read takes)."""
    import threading

    d = tmp_path / "t-0"
    log = Log(d, cfg(segment_bytes=4000), clock=clock)
    fill(log, clock, 300, 9, every_tombstone=11)
    log.roll()
    log.close()
    log = Log(d, cfg(segment_bytes=4000), clock=clock)  # old segments' indexes unmapped
    first = log._snapshot.segments[0]
    assert first._offset_index is None
    in_swap, go = threading.Event(), threading.Event()

    def hook(p: str) -> None:
        if p == "deleted":
            in_swap.set()
            assert go.wait(30)

    monkeypatch.setattr(compaction_mod, "phase_hook", hook)
    cleaner = threading.Thread(target=Cleaner(1 << 20).clean, args=(log,))
    cleaner.start()
    assert in_swap.wait(30)
    assert not os.path.exists(first.path(".index")) and first.deleted
    got: list = []
    reader = threading.Thread(target=lambda: got.append(log.read(log.log_start_offset, 1 << 20)))
    reader.start()
    reader.join(30)
    done = not reader.is_alive()  # while the swap is still paused between its renames
    assert os.path.exists(first.path(".log.deleted"))
    go.set()
    cleaner.join(30)
    reader.join(30)
    monkeypatch.setattr(compaction_mod, "phase_hook", None)
    assert done
    (region,) = got
    batches = list(iter_batches(region.read()))  # whole batches, from the old segment
    assert batches and batches[0].base_offset == region.first_offset
    assert not os.path.exists(first.path(".log.deleted"))  # unlinked after the publish
    assert log._snapshot.segments[0] is not first
    assert log.read(log.log_start_offset, 1 << 20).size > 0
    log.close()


class Crash(Exception):
    pass


@pytest.mark.parametrize("grouped", [False, True], ids=["one-per-group", "grouped"])
@pytest.mark.parametrize("phase", ["cleaned", "swap", "deleted"])
def test_a_crash_at_any_phase_leaves_a_correct_log(tmp_path, clock, phase, grouped,
                                                   monkeypatch) -> None:
    d = tmp_path / "t-0"
    log = Log(d, cfg(segment_bytes=4000, file_delete_delay_ms=60_000), clock=clock)
    fill(log, clock, 300, 9, every_tombstone=11)
    log.roll()
    if grouped:
        # several old segments per cleaned one: the swap replaces a run of segments
        log.config = log.config.replace(segment_bytes=40_000)
    before = records(log)

    def hook(p: str) -> None:
        if p == phase:
            raise Crash(p)

    monkeypatch.setattr(compaction_mod, "phase_hook", hook)
    with pytest.raises(Crash):
        Cleaner(1 << 20).clean(log)
    monkeypatch.setattr(compaction_mod, "phase_hook", None)
    names = os.listdir(d)
    marker = {"cleaned": ".cleaned", "swap": ".swap", "deleted": ".deleted"}[phase]
    assert any(n.endswith(marker) for n in names)
    # the process dies here: no close, no clean-shutdown marker
    log_cfg = log.config
    log._dir_lock.release()
    del log
    reopened = Log(d, log_cfg, clock=clock)
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap", ".deleted"))]
    after = records(reopened)
    offsets = [r[0] for r in after]
    assert offsets == sorted(set(offsets))
    by_offset = {r[0]: r for r in before}
    assert all(by_offset[r[0]] == r for r in after)
    # every key's latest record survived
    assert {k: v for k, v in latest(after).items()} == latest(before)
    assert reopened.log_end_offset == 300
    # and the next clean finishes the job
    Cleaner(1 << 20).clean(reopened)
    assert latest(records(reopened)) == latest(before)
    assert len(records(reopened)) == len(latest(before))
    reopened.close()


def test_cleaning_a_delete_policy_log_is_refused(tmp_path, clock) -> None:
    from logcore import LogcoreError

    with Log(tmp_path / "t-0", cfg(cleanup_policy="delete"), clock=clock) as log:
        with pytest.raises(LogcoreError):
            Cleaner(1 << 20).clean(log)


def test_appends_and_reads_go_on_while_a_clean_runs(tmp_path, clock) -> None:
    """The cleaner holds the log's lock only for the swap: a writer and a reader on other
    threads keep working, and every read sees valid batches in offset order."""
    import threading

    log = Log(tmp_path / "t-0", cfg(segment_bytes=2000, file_delete_delay_ms=60_000),
              clock=clock)
    fill(log, clock, 500, 20)
    stop = threading.Event()
    errors: list[BaseException] = []
    appended = [0]

    def writer() -> None:
        try:
            i = 0
            while not stop.is_set() and i < 2000:
                log.append(batch([(b"k%d" % (i % 20), b"w%d" % i)], T0 + i))
                i += 1
                if i % 20 == 0:
                    time.sleep(0.001)
            appended[0] = i
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                time.sleep(0.002)
                offs = [r[0] for r in records(log)]
                assert offs == sorted(set(offs))
                for b in all_batches(log):
                    b.validate()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    cleaner = Cleaner(1 << 20)
    try:
        for _ in range(6):
            log.roll()
            cleaner.clean(log)
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    log.roll()
    cleaner.clean(log)
    recs = records(log)
    assert len(recs) == 20  # one per key
    assert log.log_end_offset == 500 + appended[0]
    log.close()


def test_a_truncation_during_a_clean_makes_the_swap_back_off(tmp_path, clock,
                                                             monkeypatch) -> None:
    """A replica truncation into the segments being cleaned: the swap finds its segments
    changed, drops its .cleaned files, and the log is the truncated log."""
    log = Log(tmp_path / "t-0", cfg(segment_bytes=100_000), clock=clock)
    fill(log, clock, 100, 5)
    log.roll()
    fill(log, clock, 50, 5)  # the active segment
    cut = 60

    def hook(phase: str) -> None:
        if phase == "cleaned":
            log.truncate_to(cut)

    monkeypatch.setattr(compaction_mod, "phase_hook", hook)
    before = records(log)
    stats = Cleaner(1 << 20).clean(log)
    monkeypatch.setattr(compaction_mod, "phase_hook", None)
    assert stats is not None and stats.segments_cleaned == 0
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]
    assert records(log) == [r for r in before if r[0] < cut]
    assert log.log_end_offset == cut
    assert log.first_dirty_offset == 0  # the checkpoint did not move
    log.close()
