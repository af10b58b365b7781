"""IoThreads: per-key order on a thread pool; cold-region probe and load."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

import logcore
from pylog.broker.io_threads import COPY_MAX, IoThreads, is_cached, load, read_cached


def test_calls_for_one_key_run_in_order_others_overlap() -> None:
    io = IoThreads(4)
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()

    def work(key: str, i: int, delay: float) -> int:
        time.sleep(delay)
        with lock:
            seen.append((key, i))
        return i

    async def scenario() -> list[int]:
        # The first call for "a" is the slowest: later "a" calls must still wait for it.
        jobs = [io.run_ordered("a", work, "a", i, 0.05 if i == 0 else 0.0) for i in range(5)]
        jobs.append(io.run_ordered("b", work, "b", 0, 0.0))
        results = await asyncio.gather(*jobs)
        assert not io.busy("a") and not io.busy("b")
        return list(results)

    try:
        assert asyncio.run(asyncio.wait_for(scenario(), 10)) == [0, 1, 2, 3, 4, 0]
    finally:
        io.shutdown()
    assert [i for k, i in seen if k == "a"] == [0, 1, 2, 3, 4]
    assert seen.index(("b", 0)) < seen.index(("a", 0))  # "b" did not wait for "a"


def test_a_cancelled_call_keeps_the_order_of_later_ones() -> None:
    io = IoThreads(2)
    seen: list[int] = []
    gate = threading.Event()

    async def scenario() -> None:
        first = asyncio.ensure_future(io.run_ordered("k", lambda: (gate.wait(5), seen.append(1))))
        await asyncio.sleep(0.02)
        second = asyncio.ensure_future(io.run_ordered("k", seen.append, 2))
        await asyncio.sleep(0.02)
        second.cancel()  # never ran
        third = asyncio.ensure_future(io.run_ordered("k", seen.append, 3))
        await asyncio.sleep(0.05)
        assert seen == []  # the first still runs: the third waits
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, third), 5)
        await asyncio.gather(second, return_exceptions=True)

    try:
        asyncio.run(asyncio.wait_for(scenario(), 10))
    finally:
        io.shutdown()
    assert seen == [1, 3]


def test_region_probe_and_load(tmp_path) -> None:
    with logcore.Log(str(tmp_path / "t-0")) as log:
        b = logcore.BatchBuilder()
        for _ in range(300):
            b.append(os.urandom(1000))
        log.append(b.build())
        log.flush()
        region = log.read(0, 1 << 20)
        assert region.size > 0 and is_cached(region) is True  # just written
        if hasattr(os, "RWF_NOWAIT") and hasattr(os, "posix_fadvise") and not _in_memory_fs(tmp_path):
            # Drop the (clean) pages: the probe must now see the region as cold.
            os.posix_fadvise(region.fileno, 0, 0, os.POSIX_FADV_DONTNEED)
            assert is_cached(region) is False
        load(region)  # reads it once: back in the page cache
        assert is_cached(region) is True
        assert is_cached(log.read(log.log_end_offset, 1 << 20)) is True  # empty region


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="no preadv(RWF_NOWAIT) here")
def test_small_regions_in_the_page_cache_are_copied_whole(tmp_path) -> None:
    with logcore.Log(str(tmp_path / "t-0")) as log:
        small = logcore.BatchBuilder()
        small.append(b"v" * 100, key=b"k")
        first = small.build()
        log.append(first)
        big = logcore.BatchBuilder()
        big.append(os.urandom(COPY_MAX))
        log.append(big.build())
        log.flush()
        region = log.read(0, 1 << 20, max_offset=1)
        assert region.size == len(first)
        data = read_cached(region)
        assert data is not None and bytes(data) == region.read()
        assert read_cached(log.read(1, 1 << 20)) is None  # over COPY_MAX: sendfile it
        assert read_cached(log.read(log.log_end_offset, 1 << 20)) is None  # empty
        if hasattr(os, "posix_fadvise") and not _in_memory_fs(tmp_path):
            os.posix_fadvise(region.fileno, 0, 0, os.POSIX_FADV_DONTNEED)
            assert read_cached(region) is None  # cold: the caller loads it on a thread


def _in_memory_fs(path) -> bool:
    """tmpfs keeps file pages in memory: they cannot be dropped to make a region cold."""
    best, fstype = "", ""
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            mount = fields[1]
            if str(path).startswith(mount) and len(mount) > len(best):
                best, fstype = mount, fields[2]
    return fstype in ("tmpfs", "ramfs")


def test_an_error_goes_to_its_caller_only() -> None:
    io = IoThreads(2)

    def fail() -> None:
        time.sleep(0.02)
        raise ValueError("boom")

    async def scenario() -> tuple[BaseException | None, int]:
        first = asyncio.ensure_future(io.run_ordered("k", fail))
        second = asyncio.ensure_future(io.run_ordered("k", lambda: 7))
        results = await asyncio.gather(first, second, return_exceptions=True)
        return results[0] if isinstance(results[0], BaseException) else None, results[1]

    try:
        err, value = asyncio.run(asyncio.wait_for(scenario(), 10))
    finally:
        io.shutdown()
    assert isinstance(err, ValueError) and value == 7
