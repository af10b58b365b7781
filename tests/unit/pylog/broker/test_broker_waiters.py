"""PartitionWaiters: an append wakes exactly the fetches waiting on its partition."""

from __future__ import annotations

import asyncio

from pylog.broker.waiters import PartitionWaiters


def test_notify_wakes_waiters_of_that_partition_only() -> None:
    async def scenario() -> tuple[bool, bool, int]:
        w = PartitionWaiters()
        a = asyncio.ensure_future(w.wait([("t", 0), ("t", 1)], 30))
        b = asyncio.ensure_future(w.wait([("u", 0)], 0.2))
        await asyncio.sleep(0.01)
        assert len(w) == 3
        w.notify(("t", 1))
        woke = await asyncio.wait_for(a, 1)
        timed_out = await asyncio.wait_for(b, 2)
        return woke, timed_out, len(w)

    woke, timed_out, left = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert woke is True and timed_out is False and left == 0


def test_zero_timeout_returns_at_once_and_notify_all() -> None:
    async def scenario() -> tuple[bool, bool]:
        w = PartitionWaiters()
        immediate = await w.wait([("t", 0)], 0)
        c = asyncio.ensure_future(w.wait([("x", 0)], 30))
        await asyncio.sleep(0)
        w.notify_all()
        return immediate, await asyncio.wait_for(c, 1)

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == (False, True)


def test_an_append_during_the_read_is_not_missed() -> None:
    """A fetch notes ``sequence`` before reading; an append that lands while it reads (before
    it waits) wakes it at once instead of leaving it to wait out its timeout."""

    async def scenario() -> tuple[bool, bool, float]:
        w = PartitionWaiters()
        since = w.sequence
        w.notify(("t", 0))  # appended while the fetch was reading
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        woke = await w.wait([("t", 0)], 30, since)
        elapsed = loop.time() - t0
        other = await w.wait([("u", 0)], 0.05, since)  # another partition: still waits
        return woke, other, elapsed

    woke, other, elapsed = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert woke is True and elapsed < 1.0 and other is False
