"""Micro benchmarks of logcore's storage hot paths (STYLE 8).

- ``Log.append`` of pre-built batches (1 record of 100 B, 16 KiB, 1 MiB), in place;
- ``Log.read`` at random offsets (the lookup path: segment bisect, index, header walk);
- ``OffsetIndex.lookup`` and the one-segment ``locate``, compiled and ``_ref`` in one group;
- the recovery scan of a 64 MiB segment;
- a share fetch's 1 MiB reads with and without ``Log.txn_batches`` (the marker walk).

Inputs are built outside the timed call; outputs are consumed. Run::

    .venv/bin/python -m pytest benchmarks/micro/bench_log.py --benchmark-columns=min,median,ops

Throughput against the machine's physical limits (raw write / sendfile in the same run)
is ``benchmarks/storage.py``; its figures are in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import mmap
import os
import random

import pytest

import logcore
from logcore import BatchBuilder, Log, LogConfig
from logcore._ref import index as ref_index
from logcore._ref import segment as ref_segment

IMPLS = {"python": (ref_index, ref_segment)}
if logcore.IMPLEMENTATION == "c":
    from logcore import _index, _segment

    IMPLS["c"] = (_index, _segment)


def make_batch(target: int, record: int) -> bytearray:
    b = BatchBuilder()
    for i in range(max(1, (target - 61) // (record + 12))):
        b.append(b"x" * record, timestamp_ms=1_700_000_000_000 + i)
    return bytearray(b.build())


@pytest.mark.benchmark(group="log-append")
@pytest.mark.parametrize("shape", ["100B", "16KiB", "1MiB"])
def test_append(benchmark, tmp_path, shape: str) -> None:
    batch = {"100B": make_batch(161, 100), "16KiB": make_batch(16384, 1024),
             "1MiB": make_batch(1 << 20, 1024)}[shape]
    log = Log(tmp_path / "t-0", LogConfig(max_message_bytes=2 << 20, segment_bytes=256 << 20))
    try:
        info = benchmark(log.append, batch)
        assert info.size_in_bytes == len(batch)
    finally:
        log.close()


@pytest.fixture(scope="module")
def read_log(tmp_path_factory):
    log = Log(tmp_path_factory.mktemp("r") / "t-0", LogConfig(segment_bytes=16 << 20))
    batch = make_batch(16384, 1024)
    for _ in range(4096):  # 64 MiB, 4 segments
        log.append(batch)
    yield log
    log.close()


@pytest.mark.benchmark(group="log-read")
def test_read_random_offsets(benchmark, read_log) -> None:
    rnd = random.Random(1)
    offs = [rnd.randrange(read_log.log_end_offset) for _ in range(1000)]
    read = read_log.read

    def run() -> int:
        n = 0
        for o in offs:
            n += read(o, 1).size
        return n

    assert benchmark(run) > 0


@pytest.mark.benchmark(group="log-read")
def test_read_1mib_fetches(benchmark, read_log) -> None:
    read = read_log.read
    end = read_log.log_end_offset

    def run() -> int:
        pos, n = 0, 0
        while pos < end:
            r = read(pos, 1 << 20)
            n += r.size
            pos = r.last_offset + 1
        return n

    assert benchmark(run) == read_log.size_in_bytes


@pytest.mark.benchmark(group="index-lookup")
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_index_lookup(benchmark, tmp_path, impl: str) -> None:
    idx_mod = IMPLS[impl][0]
    idx = idx_mod.OffsetIndex(str(tmp_path / "a.index"), 0, 8 * 100_000)
    for i in range(100_000):
        idx.append(10 * i + 9, 4096 * i)
    rnd = random.Random(2)
    offs = [rnd.randrange(1_000_000) for _ in range(1000)]

    def run() -> int:
        return sum(idx.lookup(o)[1] for o in offs)

    try:
        assert benchmark(run) >= 0
    finally:
        idx.close()


@pytest.mark.benchmark(group="segment-recovery-scan")
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_recovery_scan(benchmark, tmp_path, impl: str) -> None:
    idx_mod, seg_mod = IMPLS[impl]
    batch = make_batch(16384, 1024)
    n = 4096 if impl == "c" else 64
    path = str(tmp_path / "00000000000000000000.log")
    with open(path, "wb") as f:
        for i in range(n):
            b = bytearray(batch)
            logcore.validate_for_append(b, next_offset=i * 1000, max_message_bytes=1 << 20)
            f.write(b)
    size = os.path.getsize(path)
    oi = idx_mod.OffsetIndex(str(tmp_path / "a.index"), 0, 1 << 20)
    ti = idx_mod.TimeIndex(str(tmp_path / "a.timeindex"), 0, 1 << 20)
    fd = os.open(path, os.O_RDONLY)
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)

    def run() -> int:
        oi.truncate()
        ti.truncate()
        valid, *_rest = seg_mod.recover_scan(mm, size, 0, 4096, oi, ti, logcore.crc32c)
        return valid

    try:
        assert benchmark(run) == size
    finally:
        mm.close()
        os.close(fd)
        oi.close()
        ti.close()


@pytest.fixture(scope="module")
def txn_log(tmp_path_factory):
    """64 MiB in 4 segments, all transactional: 8 producers take turns with transactions of
    4 batches of 16 KiB, every fifth transaction aborted (~820 ``.txnindex`` entries)."""
    log = Log(tmp_path_factory.mktemp("x") / "t-0", LogConfig(segment_bytes=16 << 20))
    seq: dict[int, int] = {}
    n = 0
    while log.size_in_bytes < 64 << 20:
        pid = 1 + n % 8
        for _ in range(4):
            b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq.get(pid, 0),
                             transactional=True)
            for i in range(15):
                b.append(b"x" * 1024, timestamp_ms=1_700_000_000_000 + i)
            seq[pid] = seq.get(pid, 0) + 15
            log.append(b.build())
        log.append_control(pid, 0, commit=n % 5 != 4, coordinator_epoch=0)
        n += 1
    yield log
    log.close()


@pytest.mark.benchmark(group="log-read-committed")
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_read_1mib_fetches_transactional(benchmark, txn_log, isolation: str) -> None:
    """The whole log in 1 MiB fetches as the Fetch handler reads it: read_committed adds the
    aborted-transaction lookup of each fetch (``Log.aborted_transactions``) and reads up to
    the LSO; the pair's ratio is that lookup's cost."""
    read = txn_log.read
    end = txn_log.log_end_offset
    committed = isolation == "read_committed"
    lookup = txn_log.aborted_transactions

    def run() -> int:
        pos, n, aborted = 0, 0, 0
        bound = txn_log.last_stable_offset() if committed else end
        while pos < bound:
            r = read(pos, 1 << 20, max_offset=bound)
            n += r.size
            if committed:
                aborted += len(lookup(pos, r.last_offset + 1))
            pos = r.last_offset + 1
        return n

    assert benchmark(run) == txn_log.size_in_bytes


@pytest.fixture(scope="module")
def small_batches_log(tmp_path_factory):
    """~4 MiB of one-record batches of 40 B (~9,700 batches per MiB): the worst shape for a
    header walk over a share fetch's 1 MiB read."""
    log = Log(tmp_path_factory.mktemp("s") / "t-0", LogConfig(segment_bytes=64 << 20))
    b = BatchBuilder()
    b.append(b"x" * 40, timestamp_ms=1_700_000_000_000)
    batch = b.build()
    while log.size_in_bytes < 4 << 20:
        log.append(bytearray(batch))
    yield log
    log.close()


@pytest.mark.benchmark(group="share-fetch-read")
@pytest.mark.parametrize("walk", ["read", "read+txn_batches"])
@pytest.mark.parametrize("shape", ["40B-batches", "16KiB-txn-batches"])
def test_share_fetch_read(benchmark, small_batches_log, txn_log, walk: str, shape: str) -> None:
    """A share fetch's read of each partition: ``Log.read`` of 1 MiB, and with
    ``Log.txn_batches`` (the header walk that finds markers and transactional batches,
    pylog.group.share.transactions); the pair's ratio is the walk's cost. Shapes: plain
    one-record batches (the walk's worst case, nothing found) and the transactional log
    above (16 KiB batches, a marker every 4)."""
    log = small_batches_log if shape == "40B-batches" else txn_log
    read = log.read
    batches = log.txn_batches
    end = log.log_end_offset
    with_walk = walk != "read"

    def run() -> int:
        pos, n = 0, 0
        while pos < end:
            r = read(pos, 1 << 20, max_offset=end)
            if with_walk:
                n += len(batches(r))
            pos = r.last_offset + 1
        return pos

    assert benchmark(run) == end
