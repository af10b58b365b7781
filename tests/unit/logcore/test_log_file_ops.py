"""logcore.segment_files and the Log's lock scopes: an append never waits for a rename, an
unlink, an fsync or a checkpoint write that another thread's swap, retention pass,
truncation or DeleteRecords is doing.

Each case parks the background thread inside one file-system call (``os.rename``,
``os.unlink``, ``os.fsync``, ``os.replace``) made by the operation, and then appends from
the test's thread: the append must finish while the other thread is still parked. Under
the append lock (the old code) it would wait for the release, which comes only after
``PARK_S``, and the bound below fails.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable

import pytest
from _harness.log_reading import all_batches as _batches

from logcore import BatchBuilder, Log, LogConfig, ManualClock, iter_batches
from logcore.cleaner import Cleaner

T0 = 1_700_000_000_000
PARK_S = 5.0  # how long the parked call waits for the append at most
APPEND_BOUND_S = 2.0  # an append of a few hundred bytes; generous for a loaded CI machine


def batch(n: int, key_base: int, ts: int) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(b"v" * 40, key=b"k%d" % ((key_base + i) % 7), timestamp_ms=ts + i)
    return b.build()


def fill(log: Log, clock: ManualClock, batches: int) -> None:
    for i in range(batches):
        log.append(batch(4, i * 4, clock.time_ms()))
        clock.advance(10)


def _targeted(name: str, args: tuple) -> bool:
    """The calls a case parks in: a directory's fsync (not a file the cleaner writes
    before it swaps), the unlink of a ``.deleted`` file; any rename or replace."""
    if name == "fsync":
        return stat.S_ISDIR(os.fstat(args[0]).st_mode)  # type: ignore[arg-type]
    if name == "unlink":
        return str(args[0]).endswith(".deleted")
    return True


class Park:
    """Replaces ``os.<name>``: the first targeted call from ``thread_name`` signals
    ``inside`` and waits (up to PARK_S) for ``release``; every other call goes straight
    through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str, thread_name: str) -> None:
        self.name = name
        self.real = getattr(os, name)
        self.thread_name = thread_name
        self.inside, self.release = threading.Event(), threading.Event()
        self.parked = False
        monkeypatch.setattr(os, name, self)

    def __call__(self, *args: object, **kw: object) -> object:
        if (
            threading.current_thread().name == self.thread_name
            and not self.parked
            and _targeted(self.name, args)
        ):
            self.parked = True
            self.inside.set()
            self.release.wait(PARK_S)
        return self.real(*args, **kw)


def _compacted(tmp_path, clock: ManualClock) -> Log:
    cfg = LogConfig(
        cleanup_policy="compact",
        segment_bytes=1500,
        segment_index_bytes=4096,
        index_interval_bytes=100,
        file_delete_delay_ms=0,
    )
    log = Log(tmp_path / "c-0", cfg, clock=clock)
    fill(log, clock, 40)
    log.assign_leader_epoch(3)
    return log


def _retained(tmp_path, clock: ManualClock) -> Log:
    cfg = LogConfig(
        segment_bytes=1500,
        segment_index_bytes=4096,
        index_interval_bytes=100,
        retention_bytes=3000,
        file_delete_delay_ms=0,
    )
    log = Log(tmp_path / "r-0", cfg, clock=clock)
    log.assign_leader_epoch(3)  # retention moves the epoch's start: a leader-epoch write
    fill(log, clock, 40)
    return log


def _swap(log: Log) -> None:
    assert Cleaner(1 << 20).clean(log) is not None


def _retention(log: Log) -> None:
    assert log.apply_retention() > 0


def _truncation(log: Log) -> None:
    assert log.truncate_to(log.segment_base_offsets[1] + 2)


def _delete_records(log: Log) -> None:
    log.delete_records_before(log.segment_base_offsets[2])


CASES: list[tuple[str, Callable[..., Log], Callable[[Log], None], str]] = [
    ("swap-rename", _compacted, _swap, "rename"),  # .cleaned -> .swap -> final, .deleted
    ("swap-dir-fsync", _compacted, _swap, "fsync"),
    ("swap-unlink", _compacted, _swap, "unlink"),  # the old segments, after the publish
    ("retention-rename", _retained, _retention, "rename"),
    ("retention-unlink", _retained, _retention, "unlink"),
    ("retention-epoch-checkpoint", _retained, _retention, "replace"),
    ("truncation-checkpoint", _retained, _truncation, "replace"),
    ("truncation-fsync", _retained, _truncation, "fsync"),
    ("truncation-rename", _retained, _truncation, "rename"),
    ("delete-records-checkpoint", _retained, _delete_records, "replace"),
]


@pytest.mark.parametrize(
    ("make", "operation", "call"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_append_does_not_wait_for_file_work_of_another_thread(
    tmp_path, monkeypatch, make, operation, call
) -> None:
    clock = ManualClock(T0)
    log = make(tmp_path, clock)
    park = Park(monkeypatch, call, "file-op")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            operation(log)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    worker = threading.Thread(target=run, name="file-op")
    worker.start()
    try:
        assert park.inside.wait(30), f"the operation made no os.{call} call"
        started = time.monotonic()
        info = log.append(batch(2, 1, clock.time_ms()))
        took = time.monotonic() - started
        still_parked = worker.is_alive()
    finally:
        park.release.set()
        worker.join(30)
    assert not errors, errors
    assert took < APPEND_BOUND_S, f"append waited {took:.3f} s for os.{call} in another thread"
    assert still_parked
    # The log reads back whole and in order after the operation, with the append in it
    # (unless a truncation that parked before its cut then removed it).
    offsets = [b.base_offset for b in _batches(log)]
    assert offsets == sorted(offsets)
    if info.first_offset < log.log_end_offset:
        assert offsets[-1] == info.first_offset
    else:
        assert operation is _truncation
    log.close()
    reopened = Log(log.directory, log.config, clock=clock)
    assert reopened.log_end_offset == log.log_end_offset
    assert [b.base_offset for b in _batches(reopened)] == offsets
    reopened.close()


def test_a_roll_writes_its_producer_snapshot_after_the_lock(tmp_path, monkeypatch) -> None:
    """The roll's producer snapshot is written after the append lock is released: another
    thread appends while the rolling thread is parked in its ``os.replace``."""
    clock = ManualClock(T0)
    log = Log(
        tmp_path / "s-0", LogConfig(segment_bytes=1500, segment_index_bytes=4096), clock=clock
    )
    fill(log, clock, 3)
    park = Park(monkeypatch, "replace", "roller")
    roller = threading.Thread(target=log.roll, name="roller")
    roller.start()
    try:
        assert park.inside.wait(30)
        started = time.monotonic()
        log.append(batch(2, 1, clock.time_ms()))
        took = time.monotonic() - started
    finally:
        park.release.set()
        roller.join(30)
    assert took < APPEND_BOUND_S
    base = log.segment_base_offsets[-1]
    assert os.path.exists(os.path.join(log.directory, f"{base:020d}.snapshot"))
    log.close()


def test_a_roll_snapshot_is_skipped_after_a_truncation_in_between(tmp_path) -> None:
    """A snapshot encoded at a roll and not yet written when a truncation cuts below it
    is dropped: it would describe producers of offsets the truncation removed."""
    clock = ManualClock(T0)
    log = Log(
        tmp_path / "t-0", LogConfig(segment_bytes=1500, segment_index_bytes=4096), clock=clock
    )
    fill(log, clock, 3)
    seen: list[int] = []
    log.on_roll = seen.append
    with log._lock:  # the roll's bookkeeping, without _after_roll running yet
        log._roll(clock.time_ms())
        pending = list(log._rolls_pending)
        log._rolls_pending.clear()
    base = pending[0][0]
    log.truncate_to(base - 1)
    log._rolls_pending.extend(pending)
    log._after_roll()
    assert seen == [base]  # the hook still runs (a flush that finds nothing to do)
    assert not os.path.exists(os.path.join(log.directory, f"{base:020d}.snapshot"))
    log.close()


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_append_needs_io_predicts_every_roll(tmp_path, timestamp_type, seed) -> None:
    """Random batch sizes, clock steps and timestamps: each append that rolled (by size,
    age with jitter, or a full index) was predicted to by ``append_needs_io`` just before,
    and most that were predicted did roll (the prediction is not just always True)."""
    import random

    rng = random.Random(seed)
    clock = ManualClock(T0)
    cfg = LogConfig(
        segment_bytes=4000,
        segment_index_bytes=64,
        index_interval_bytes=150,
        segment_ms=2000,
        segment_jitter_ms=500,
        message_timestamp_type=timestamp_type,
    )
    log = Log(tmp_path / f"p-{seed}", cfg, clock=clock)
    rolls = predicted = 0
    for i in range(600):
        clock.advance(rng.choice([0, 1, 10, 100, 400]))
        ts = clock.time_ms() + rng.randint(-300, 300)
        b = BatchBuilder()
        for j in range(rng.randint(1, 6)):
            b.append(b"x" * rng.randint(0, 300), key=b"%d" % j, timestamp_ms=ts)
        data = b.build()
        header_max_ts = int.from_bytes(data[35:43], "big", signed=True)
        delta = int.from_bytes(data[23:27], "big", signed=True)
        needs = log.append_needs_io(len(data), header_max_ts, delta, None)
        info = log.append(data)
        predicted += needs
        rolls += info.rolled
        assert needs or not info.rolled, f"append {i} rolled unpredicted"
    assert rolls > 20
    assert predicted < 2 * rolls + 20
    # The other reasons: a new leader epoch, an fsync policy, an offset overflow.
    assert log.append_needs_io(100, -1, 0, 7)
    assert log.append_needs_io(100, -1, 2**31, None)
    log.update_config(cfg.replace(flush_ms=60_000))
    assert log.append_needs_io(100, -1, 0, None)
    log.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replica_append_needs_io_predicts_every_roll_and_epoch(tmp_path, seed) -> None:
    """A follower's appends of fetched batches (one to three per fetch, random sizes,
    timestamps and leader epochs): each that rolled or wrote the leader-epoch file was
    predicted by ``replica_append_needs_io`` just before, and most predictions came true."""
    import random

    rng = random.Random(seed)
    clock = ManualClock(T0)
    cfg = LogConfig(segment_bytes=4000, segment_index_bytes=64, index_interval_bytes=150,
                    segment_ms=2000, segment_jitter_ms=500)
    log = Log(tmp_path / f"r-{seed}", cfg, clock=clock)
    rolls = epochs = predicted = 0
    offset, epoch = 0, 0
    for i in range(400):
        clock.advance(rng.choice([0, 1, 10, 100, 400]))
        if rng.random() < 0.03:
            epoch += 1
        data = bytearray()
        for _ in range(rng.randint(1, 3)):
            b = BatchBuilder(base_offset=offset, partition_leader_epoch=epoch)
            for j in range(rng.randint(1, 5)):
                b.append(b"x" * rng.randint(0, 250), key=b"%d" % j,
                         timestamp_ms=clock.time_ms() + rng.randint(-300, 300))
            built = b.build()
            offset += int.from_bytes(built[23:27], "big", signed=True) + 1
            data += built
        latest = log.leader_epoch_cache.latest_epoch
        needs = log.replica_append_needs_io(data)
        info = log.append(data, assign_offsets=False)
        new_epoch = log.leader_epoch_cache.latest_epoch != latest
        predicted += needs
        rolls += info.rolled
        epochs += new_epoch
        assert needs or not (info.rolled or new_epoch), f"append {i} did file work unpredicted"
    assert rolls > 10 and epochs > 3
    assert predicted < 2 * (rolls + epochs) + 20
    # Control batches (a .txnindex entry), a flush policy, headers that do not walk.
    marker = BatchBuilder(base_offset=offset, is_control=True, partition_leader_epoch=epoch)
    marker.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")
    assert log.replica_append_needs_io(marker.build())
    assert log.replica_append_needs_io(b"\x00" * 70)
    assert log.replica_append_needs_io(b"")
    big = bytearray()  # more than segment.bytes: appended batch by batch, each may roll
    for k in range(3):
        b = BatchBuilder(base_offset=offset + k, partition_leader_epoch=epoch)
        b.append(b"x" * 1500)
        big += b.build()
    assert log.replica_append_needs_io(big)
    empty = Log(tmp_path / f"r-{seed}-empty", cfg, clock=clock)
    no_epoch = bytearray()  # no leader epoch to record: only the size says it
    for k in range(3):
        b = BatchBuilder(base_offset=k)
        b.append(b"x" * 1500)
        no_epoch += b.build()
    assert empty.replica_append_needs_io(no_epoch)  # no active segment bytes to roll either
    empty.close()
    log.update_config(cfg.replace(flush_ms=60_000))
    plain = BatchBuilder(base_offset=offset, partition_leader_epoch=epoch)
    plain.append(b"v")
    assert log.replica_append_needs_io(plain.build())
    log.close()


@pytest.mark.parametrize("restart_at", [0, 7, 1000])
def test_full_truncation_restarts_at_an_offset_an_old_segment_starts_at(tmp_path, restart_at) -> None:
    """truncate_fully_and_start_at(offset) where an old segment has that base offset (a
    follower restarting at 0, or at a rolled segment's base): the old files go to
    ``.deleted`` first, the new empty segment takes the name, appends go on from there."""
    clock = ManualClock(T0)
    log = Log(tmp_path / "p-0", LogConfig(segment_bytes=600, file_delete_delay_ms=0), clock=clock)
    try:
        if restart_at:
            log.truncate_fully_and_start_at(restart_at)
        fill(log, clock, 12)
        assert log.segment_base_offsets[0] == restart_at and log.num_segments > 1
        log.truncate_fully_and_start_at(restart_at)
        assert (log.log_start_offset, log.log_end_offset) == (restart_at, restart_at)
        assert log.segment_base_offsets == [restart_at]
        log.append(batch(2, 0, clock.time_ms()))
        assert log.log_end_offset == restart_at + 2
        got = [b.base_offset for b in iter_batches(log.read(restart_at, 1 << 20).read())]
        assert got == [restart_at]
    finally:
        log.close()
    names = sorted(os.listdir(tmp_path / "p-0"))
    assert f"{restart_at:020d}.log" in names
    assert not [n for n in names if n.endswith(".deleted")]  # file.delete.delay.ms=0
