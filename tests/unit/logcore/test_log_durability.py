"""Log durability: flush_up_to off the append lock, the roll hook, checkpoints, lazy indexes,
recovery above the recovery point only, and appends that fail with ENOSPC / EIO."""

from __future__ import annotations

import errno
import os
import subprocess
import threading

import pytest

import logcore
from logcore import Log, LogConfig, LogDirError, ManualClock

T0 = 1_700_000_000_000


def batch(n: int = 3, size: int = 10) -> bytes:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v" * size, key=b"k%d" % i, timestamp_ms=T0 + i)
    return b.build()


@pytest.fixture
def logdir(tmp_path) -> str:
    return str(tmp_path / "topic-0")


def read_checkpoint(directory: str, name: str) -> int:
    with open(os.path.join(directory, name)) as f:
        return int(f.read().split("\n")[2].split()[2])


def read_all(log: Log) -> list[int]:
    out: list[int] = []
    while len(out) < log.log_end_offset:
        region = log.read(len(out), 10**7)
        out += [r.offset for b in logcore.iter_batches(region.read()) for r in b
                if r.offset >= len(out)]
    return out


def test_roll_hook_gets_the_new_base_offset(logdir) -> None:
    rolls: list[int] = []
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0), on_roll=rolls.append) as log:
        for _ in range(6):
            log.append(batch())
        assert rolls == log.segment_base_offsets[1:]
        log.on_roll = None
        log.roll()
        assert rolls == log.segment_base_offsets[1:-1]


def test_flush_up_to_moves_the_recovery_point_without_checkpointing(logdir) -> None:
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0)) as log:
        for _ in range(6):
            log.append(batch())
        base = log.segment_base_offsets[-1]
        assert log.recovery_point == 0
        assert log.flush_up_to(base)
        assert log.recovery_point == base
        assert not log.flush_up_to(base)  # nothing new
        assert not os.path.exists(os.path.join(logdir, "recovery-point-offset-checkpoint"))
        assert log.checkpoint_recovery_point()
        assert read_checkpoint(logdir, "recovery-point-offset-checkpoint") == base
        assert not log.checkpoint_recovery_point()
        assert log.flush_up_to(10**9)  # capped at the log end
        assert log.recovery_point == log.log_end_offset


def test_appends_go_on_while_a_flush_waits_on_the_disk(logdir, monkeypatch) -> None:
    """The fsync runs without the append lock (Kafka flushes outside the log's lock)."""
    log = Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0))
    try:
        for _ in range(6):
            log.append(batch())
        in_fsync = threading.Event()
        release = threading.Event()
        real_fsync = os.fsync

        def slow_fsync(fd: int) -> None:
            in_fsync.set()
            assert release.wait(30)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", slow_fsync)
        target = log.log_end_offset
        flusher = threading.Thread(target=log.flush_up_to, args=(target,))
        flusher.start()
        assert in_fsync.wait(30)
        # The disk is "stuck": appends, rolls and reads still work.
        for _ in range(4):
            log.append(batch())
        assert log.read(target, 10_000).size > 0
        assert log.recovery_point < target
        release.set()
        flusher.join(30)
        assert log.recovery_point == target
    finally:
        release.set()
        monkeypatch.undo()
        log.close()


def test_a_truncation_during_a_flush_keeps_the_recovery_point(logdir, monkeypatch) -> None:
    log = Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0))
    try:
        for _ in range(6):
            log.append(batch())
        in_fsync, release = threading.Event(), threading.Event()
        real_fsync = os.fsync

        def slow_fsync(fd: int) -> None:
            if threading.current_thread().name == "flusher":  # the disk is slow for it only
                in_fsync.set()
                release.wait(30)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", slow_fsync)
        flusher = threading.Thread(target=log.flush_up_to, args=(18,), name="flusher")
        flusher.start()
        assert in_fsync.wait(30)
        log.truncate_to(6)
        log.append(batch())
        release.set()
        flusher.join(30)
        # Offsets 6..8 were written again after the flush started: not known durable.
        assert log.recovery_point <= 6
        assert read_checkpoint(logdir, "recovery-point-offset-checkpoint") <= 6
    finally:
        release.set()
        monkeypatch.undo()
        log.close()


def test_reopen_maps_only_the_active_segment(logdir) -> None:
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0)) as log:
        for _ in range(20):
            log.append(batch())
        n = log.num_segments
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0)) as log:
        assert log.num_segments == n > 5
        assert log.mapped_indexes == 2
        stats = log.recovery_stats
        assert stats.clean and stats.segments == n and stats.segments_scanned == 0
        assert stats.indexes_checked == 1
        # The checkpoint files already say what the log says: nothing to rewrite.
        assert not log.checkpoint_recovery_point() and not log.checkpoint_log_start_offset()
        log.read(0, 100)
        assert log.mapped_indexes == 3  # the first segment's offset index, on demand
        assert log.release_idle_indexes() == 0  # just used
        assert log.release_idle_indexes() == 1
        assert log.mapped_indexes == 2


def test_recovery_scans_only_segments_above_the_checkpointed_recovery_point(logdir) -> None:
    """A child process appends, flushes part of the log, checkpoints and is killed -9."""
    script = f"""
import os, signal, logcore
b = logcore.BatchBuilder()
for i in range(3):
    b.append(b"v" * 10, key=b"k", timestamp_ms={T0})
buf = b.build()
log = logcore.Log({logdir!r}, logcore.LogConfig(segment_bytes=300))
for _ in range(40):
    log.append(buf)
keep = log.segment_base_offsets[-3]
log.flush_up_to(keep)
log.checkpoint_recovery_point()
for _ in range(2):
    log.append(buf)
print(keep, log.num_segments, log.log_end_offset, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    env = dict(os.environ)
    out = subprocess.run([__import__("sys").executable, "-c", script], capture_output=True,
                         env=env, timeout=120)
    assert out.returncode == -9, out.stderr.decode()
    keep, segments, leo = map(int, out.stdout.split())
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0)) as log:
        stats = log.recovery_stats
        assert log.recovered and not stats.clean
        assert stats.recovery_point == keep
        above = [b for b in log.segment_base_offsets if b >= keep]
        assert stats.segments_scanned == len(above) >= 3
        assert stats.segments == segments and stats.segments_scanned < segments / 3
        assert log.log_end_offset == leo  # the page cache survived: nothing lost
        assert log.mapped_indexes == 2


# --- disk full ------------------------------------------------------------------------


def _fail_writes_to(fd: int, monkeypatch, *, partial: bool, err: int = errno.ENOSPC,
                    truncate_fails: bool = False) -> None:
    real_pwrite, real_ftruncate = os.pwrite, os.ftruncate

    def pwrite(f: int, data, pos: int) -> int:
        if f != fd:
            return real_pwrite(f, data, pos)
        view = memoryview(data)
        if partial and len(view) > 8:
            return real_pwrite(f, view[: len(view) // 2], pos)  # a short write, then ...
        raise OSError(err, os.strerror(err))

    def ftruncate(f: int, length: int) -> None:
        if f == fd and truncate_fails:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_ftruncate(f, length)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "ftruncate", ftruncate)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO])
def test_a_failed_append_leaves_the_log_as_it_was(logdir, monkeypatch, partial, err) -> None:
    with Log(logdir, LogConfig(index_interval_bytes=0), clock=ManualClock(T0)) as log:
        for _ in range(3):
            log.append(batch())
        seg = log.active_segment
        leo, size, entries = log.log_end_offset, seg.size, seg.offset_index.entries
        _fail_writes_to(seg.fd, monkeypatch, partial=partial, err=err)
        with pytest.raises(LogDirError) as info:
            log.append(batch())
        e = info.value
        assert e.errno == err and isinstance(e, OSError)
        assert e.path == seg.file.path and e.position == size
        assert str(size) in str(e) and seg.file.path in str(e)
        assert (log.log_end_offset, seg.size, seg.offset_index.entries) == (leo, size, entries)
        assert os.path.getsize(seg.file.path) == size  # partial bytes cut off
        monkeypatch.undo()  # space is back
        info2 = log.append(batch())
        assert info2.first_offset == leo
        assert read_all(log) == list(range(leo + 3))


def test_partial_bytes_that_could_not_be_cut_are_overwritten_or_recovered(logdir, monkeypatch) -> None:
    log = Log(logdir, LogConfig(), clock=ManualClock(T0))
    for _ in range(2):
        log.append(batch())
    seg = log.active_segment
    size = seg.size
    _fail_writes_to(seg.fd, monkeypatch, partial=True, truncate_fails=True)
    with pytest.raises(LogDirError):
        log.append(batch(3, 500))
    monkeypatch.undo()
    assert os.path.getsize(seg.file.path) > size == seg.size  # garbage past the end
    # A crash now: recovery cuts the partial batch off.
    log._dir_lock.release()  # simulate the process dying without close()
    with Log(logdir, LogConfig(), clock=ManualClock(T0)) as again:
        assert again.recovered and again.log_end_offset == 6
        assert again.recovery_truncated_bytes > 0
        # ... and the next append writes over where the garbage was.
        assert again.append(batch()).first_offset == 6
    with Log(logdir, LogConfig(), clock=ManualClock(T0)) as again:
        assert again.log_end_offset == 9


def test_disk_full_on_a_real_tmpfs(tmp_path) -> None:
    """A 256 KiB tmpfs fills up; appends fail with ENOSPC and work again once space returns."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        filler = mnt / "filler"
        filler.write_bytes(b"x" * 96 * 1024)  # the space that "returns" later
        d = str(mnt / "full-0")
        # Small index files, so that the data fills the disk.
        cfg = LogConfig(segment_index_bytes=1024, segment_bytes=64 * 1024)
        log = Log(d, cfg, clock=ManualClock(T0))
        acked = 0
        with pytest.raises(LogDirError) as info:
            for _ in range(10_000):
                acked = log.append(batch(4, 1000)).last_offset + 1
        assert info.value.errno == errno.ENOSPC
        assert log.log_end_offset == acked
        with pytest.raises(LogDirError):  # still full
            log.append(batch(4, 1000))
        filler.unlink()
        assert log.append(batch(4, 1000)).first_offset == acked
        log.close()
        with Log(d, cfg, clock=ManualClock(T0)) as again:
            assert again.log_end_offset == acked + 4
            assert read_all(again) == list(range(acked + 4))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_roll_that_fails_for_lack_of_space_leaves_the_log_appendable(logdir, monkeypatch) -> None:
    rolls: list[int] = []
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0), on_roll=rolls.append) as log:
        log.append(batch())
        log.append(batch())
        leo, segments = log.log_end_offset, log.segment_base_offsets
        real_open = os.open

        def full_open(path, flags, *args):
            if str(path).endswith(".log") and flags & os.O_CREAT:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            return real_open(path, flags, *args)

        monkeypatch.setattr(os, "open", full_open)
        with pytest.raises(LogDirError) as info:
            for _ in range(5):
                log.append(batch())
        assert info.value.errno == errno.ENOSPC
        assert log.log_end_offset >= leo and rolls == log.segment_base_offsets[1:]
        leo, segments = log.log_end_offset, log.segment_base_offsets
        assert log.active_segment.writable
        monkeypatch.undo()
        info2 = log.append(batch())
        assert info2.first_offset == leo and info2.rolled
        assert log.segment_base_offsets == segments + [leo]
        assert rolls == log.segment_base_offsets[1:]
    with Log(logdir, LogConfig(segment_bytes=300), clock=ManualClock(T0)) as log:
        assert read_all(log) == list(range(leo + 3))
