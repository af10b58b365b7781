"""Fault injection for logcore.Log recovery (issue 3; Kafka's LogLoader recovery).

Each test damages a partition directory the way a crash, a torn write or bit rot would,
reopens it, and asserts that the log comes back as exactly the valid prefix: every batch
passes its CRC, offsets are dense, the indexes agree with a full scan (checked by the
independent reader in tests/_harness/kafka_format.py), and nothing before the damage is
lost. Loops are bounded (every byte of the LAST batch only) to keep CI fast.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from _harness.kafka_format import (
    BatchHeader,
    check_partition,
    read_batches,
    segment_base_offsets,
    segment_path,
)

from logcore import BatchBuilder, Log, LogConfig, ManualClock, iter_batches

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=3000, index_interval_bytes=300, segment_index_bytes=4096)


def batch(n: int, seed: int) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(b"%d-%d" % (seed, i) * 3, key=b"k", timestamp_ms=T0 + seed)
    return b.build()


def build(directory: str, batches: int = 60) -> list[BatchHeader]:
    """A closed log with several segments; returns every batch header in order."""
    with Log(directory, CFG, clock=ManualClock(T0)) as log:
        for i in range(batches):
            log.append(batch(1 + i % 4, i))
    return check_partition(directory)


def crash(directory: str) -> None:
    """Make the next open unclean with nothing flushed: no marker, no recovery point."""
    for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            os.unlink(path)


def expected_prefix(directory: str) -> list[BatchHeader]:
    """The valid prefix as the independent reader sees the damaged files."""
    out: list[BatchHeader] = []
    for base in segment_base_offsets(directory):
        path = segment_path(directory, base, ".log")
        batches, end = read_batches(path)
        for b in batches:
            if out and b.base_offset != out[-1].last_offset + 1:
                return out
            out.append(b)
        if end < os.path.getsize(path):
            return out
    return out


def reopen_and_check(directory: str, expected: list[BatchHeader]) -> None:
    log = Log(directory, CFG, clock=ManualClock(T0))
    try:
        leo = expected[-1].last_offset + 1 if expected else 0
        assert log.log_end_offset == leo
        if expected:
            # every offset is readable and lands in its batch
            for b in expected[:: max(1, len(expected) // 25)] + expected[-1:]:
                r = log.read(b.last_offset, 1)
                (got,) = list(iter_batches(r.read()))
                assert (got.base_offset, got.last_offset) == (b.base_offset, b.last_offset)
                got.validate()
            # Indexes of segments below the recovery point are checked (and rebuilt if
            # bad) when first mapped, not at open: use every segment's two indexes once.
            for base in log.segment_base_offsets:
                r = log.read(max(base, log.log_start_offset), 1)
                assert r.first_offset <= max(base, log.log_start_offset) <= r.last_offset
            assert log.offset_for_timestamp(-3) is not None
        # the log keeps working after recovery
        info = log.append(batch(2, 999))
        assert info.first_offset == leo
    finally:
        log.close()
    after = check_partition(directory)
    assert [(b.base_offset, b.last_offset) for b in after[:-1]] == [
        (b.base_offset, b.last_offset) for b in expected
    ]
    assert after[-1].base_offset == (expected[-1].last_offset + 1 if expected else 0)
    # dense offsets
    for a, b in zip(after, after[1:], strict=False):
        assert b.base_offset == a.last_offset + 1


def test_truncate_last_batch_at_every_byte(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    allb = build(d)
    last_seg = segment_base_offsets(d)[-1]
    log_path = segment_path(d, last_seg, ".log")
    with open(log_path, "rb") as f:
        data = f.read()
    last = allb[-1]
    assert last.position + last.size == len(data)
    prev = allb[-2]
    for cut in range(last.position, last.position + last.size):
        crash(d)
        with open(log_path, "wb") as f:
            f.write(data[:cut])
        # Open without closing: the next iteration is another crash. (The full close /
        # reopen / append cycle runs once below; fsyncs make it too slow to repeat.)
        log = Log(d, CFG, clock=ManualClock(T0))
        assert log.recovered and log.log_end_offset == prev.last_offset + 1
        assert log.recovery_truncated_bytes == cut - last.position
        r = log.read(prev.last_offset, 1)
        assert (r.first_offset, r.last_offset) == (prev.base_offset, prev.last_offset)
        assert os.path.getsize(log_path) == last.position
        # the rebuilt active index points at batch starts (the file past its entries
        # is stale preallocated space until the log closes, so ask the index itself)
        starts = {b.position for b in read_batches(log_path)[0]}
        oi = log.active_segment.offset_index
        assert oi.entries >= 1
        assert all(oi.entry(i)[1] in starts for i in range(oi.entries))
        del log, r, oi
    crash(d)
    with open(log_path, "wb") as f:
        f.write(data[: last.position + last.size // 2])
    reopen_and_check(d, allb[:-1])


@pytest.mark.parametrize("garbage", [b"\0" * 100, bytes(range(256)) * 3, b"\xff" * 7])
def test_garbage_appended(tmp_path, garbage: bytes) -> None:
    d = str(tmp_path / "t-0")
    allb = build(d)
    crash(d)
    with open(segment_path(d, segment_base_offsets(d)[-1], ".log"), "ab") as f:
        f.write(garbage)
    reopen_and_check(d, allb)


def test_bit_flip_in_a_middle_batch(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    allb = build(d, 100)
    bases = segment_base_offsets(d)
    assert len(bases) >= 4
    seg = bases[len(bases) // 2]
    batches, _ = read_batches(segment_path(d, seg, ".log"))
    victim = batches[len(batches) // 2]
    crash(d)
    with open(segment_path(d, seg, ".log"), "r+b") as f:
        f.seek(victim.position + 40)
        byte = f.read(1)
        f.seek(victim.position + 40)
        f.write(bytes([byte[0] ^ 0x10]))
    expected = [b for b in allb if b.last_offset < victim.base_offset]
    assert expected_prefix(d) == expected
    reopen_and_check(d, expected)
    # the later segments are gone
    assert segment_base_offsets(d)[-1] == seg


def test_zeroed_page(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    cfg_batches = build(d, 120)
    bases = segment_base_offsets(d)
    seg = bases[1]
    crash(d)
    path = segment_path(d, seg, ".log")
    with open(path, "r+b") as f:
        f.seek(1024)
        f.write(b"\0" * min(4096, os.path.getsize(path) - 1024))
    expected = expected_prefix(d)
    assert expected and expected[-1].last_offset < cfg_batches[-1].last_offset
    reopen_and_check(d, expected)


def test_partial_page_cache_loss_at_the_tail(tmp_path) -> None:
    """A clean log whose last pages were lost but whose size stayed (zeros at the end)."""
    d = str(tmp_path / "t-0")
    allb = build(d)
    crash(d)
    path = segment_path(d, segment_base_offsets(d)[-1], ".log")
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - 50)
        f.write(b"\0" * 50)
    reopen_and_check(d, allb[:-1])


@pytest.mark.parametrize("clean", [True, False])
def test_deleted_or_scribbled_indexes_are_rebuilt(tmp_path, clean: bool) -> None:
    d = str(tmp_path / "t-0")
    allb = build(d, 160)
    bases = segment_base_offsets(d)
    assert len(bases) >= 6
    if not clean:
        crash(d)
    rnd = random.Random(7)
    os.unlink(segment_path(d, bases[0], ".index"))
    os.unlink(segment_path(d, bases[1], ".timeindex"))
    for base, suffix in ((bases[2], ".index"), (bases[3], ".timeindex"), (bases[-1], ".index")):
        p = segment_path(d, base, suffix)
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.write(bytes(rnd.randrange(256) for _ in range(max(size, 24))))
    with open(segment_path(d, bases[4], ".index"), "ab") as f:
        f.write(b"\x01\x02\x03")  # torn
    reopen_and_check(d, allb)


def test_index_pointing_inside_a_batch_is_survived(tmp_path) -> None:
    """A monotone index that points mid-batch passes the open checks; reads still work."""
    d = str(tmp_path / "t-0")
    allb = build(d)
    base = segment_base_offsets(d)[0]
    p = segment_path(d, base, ".index")
    import struct

    with open(p, "rb") as f:
        entries = [struct.unpack_from(">ii", f.read(), 0)]
    with open(p, "r+b") as f:
        f.write(struct.pack(">ii", entries[0][0], entries[0][1] + 3))
    with Log(d, CFG, clock=ManualClock(T0)) as log:
        for b in allb:
            if b.base_offset >= segment_base_offsets(d)[1]:
                break
            r = log.read(b.base_offset, 1)
            assert r.first_offset == b.base_offset


CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path[:0] = {paths!r}
    from logcore import BatchBuilder, Log, LogConfig
    cfg = LogConfig(segment_bytes=20000, index_interval_bytes=500)
    log = Log(sys.argv[1], cfg)
    i = 0
    while True:
        b = BatchBuilder()
        for j in range(1 + i % 5):
            b.append(b"x" * (50 + i % 200), key=b"%d" % i)
        info = log.append(b.build())
        if i % 50 == 0:
            log.flush()
        os.write(1, b"%d\\n" % info.last_offset)
        i += 1
    """
)


def test_sigkill_mid_append(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(paths=[p for p in sys.path if p]))
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, str(script), d], stdout=subprocess.PIPE, env=env)
    acked = -1
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    try:
        while acked < 3000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        rest = proc.stdout.read()
        proc.stdout.close()
    for line in rest.split():
        acked = max(acked, int(line))
    assert acked >= 3000, "the child did not get going"
    # Killing the process keeps the page cache: every acknowledged offset survives.
    with Log(d, LogConfig(segment_bytes=20000, index_interval_bytes=500)) as log:
        assert log.recovered
        assert log.log_end_offset >= acked + 1
        r = log.read(log.log_end_offset - 1, 1)
        assert r.last_offset == log.log_end_offset - 1
    allb = check_partition(d)
    for a, b in zip(allb, allb[1:], strict=False):
        assert b.base_offset == a.last_offset + 1
    assert allb[-1].last_offset + 1 == log.log_end_offset


def test_readers_survive_truncation_retention_and_restart_races(tmp_path) -> None:
    """Readers racing a writer that truncates, rolls, deletes and restarts the log.

    Index trims and remaps, segment deletion and truncation happen under the readers'
    feet. A reader may get an empty region, OffsetOutOfRangeError, or (a region cut by
    a truncation) LogcoreError, but never a crash, and every region it does get holds
    whole, valid batches.
    """
    import threading

    from logcore import LogcoreError, OffsetOutOfRangeError

    d = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=100, segment_index_bytes=160,
                    file_delete_delay_ms=0, retention_bytes=8000)
    log = Log(d, cfg, clock=ManualClock(T0))
    stop = threading.Event()
    errors: list[BaseException] = []
    seen = [0]

    def reader(seed: int) -> None:
        rnd = random.Random(seed)
        while not stop.is_set():
            lso, leo = log.log_start_offset, log.log_end_offset
            if leo <= lso:
                continue
            try:
                r = log.read(rnd.randrange(lso, leo), rnd.choice([1, 300, 3000]))
                data = r.read()
            except (OffsetOutOfRangeError, LogcoreError):
                continue
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return
            try:
                for b in iter_batches(data):
                    b.validate()
                seen[0] += 1
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    rnd = random.Random(99)
    try:
        for i in range(400):
            log.append(batch(1 + i % 4, i))
            op = rnd.random()
            if op < 0.05 and log.log_end_offset > log.log_start_offset + 5:
                log.truncate_to(log.log_end_offset - rnd.randrange(1, 5))
            elif op < 0.08:
                log.apply_retention()
            elif op < 0.09:
                log.truncate_fully_and_start_at(log.log_end_offset + 3)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        log.close()
    assert not errors, errors[0]
    assert seen[0] > 0
    check_partition(d)
