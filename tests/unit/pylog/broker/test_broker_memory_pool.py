"""MemoryPool: queued.max.request.bytes, with one frame of any size always admissible."""

from __future__ import annotations

import asyncio

from pylog.broker.memory_pool import MemoryPool


def test_capacity_and_the_one_frame_rule() -> None:
    p = MemoryPool(100)
    assert p.try_acquire(250)  # empty pool: one frame of any size
    assert not p.try_acquire(1)
    p.release(250)
    assert p.try_acquire(60) and p.try_acquire(40) and not p.try_acquire(1)
    p.release(100)
    assert p.in_use == 0 and p.peak == 250
    unlimited = MemoryPool(-1)
    assert unlimited.try_acquire(1 << 40) and unlimited.try_acquire(1 << 40)


def test_waiters_are_granted_in_order_every_one_that_fits() -> None:
    async def scenario() -> list[str]:
        p = MemoryPool(100)
        order: list[str] = []
        assert p.try_acquire(90)

        async def take(name: str, n: int) -> None:
            await p.acquire(n)
            order.append(name)

        big = asyncio.ensure_future(take("big", 80))
        await asyncio.sleep(0)
        small = asyncio.ensure_future(take("small", 5))  # fits now: goes ahead
        await asyncio.sleep(0)
        assert order == ["small"] and p.waiting == 1
        p.release(90)  # 5 in use: big fits
        await asyncio.wait_for(big, 1)
        await small
        assert p.in_use == 85
        # A cancelled waiter leaves nothing taken and no entry behind.
        late = asyncio.ensure_future(take("late", 50))
        await asyncio.sleep(0)
        late.cancel()
        await asyncio.gather(late, return_exceptions=True)
        assert p.waiting == 0 and p.in_use == 85
        return order

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == ["small", "big"]


def test_kept_buffers_are_counted_and_give_way_to_requests() -> None:
    p = MemoryPool(100)
    dropped: list[str] = []
    assert p.hold_spare("a", 40, lambda: dropped.append("a"))
    assert p.hold_spare("b", 40, lambda: dropped.append("b"))
    assert p.in_use == 80
    assert not p.hold_spare("c", 30, lambda: dropped.append("c"))  # does not fit: refused
    assert p.try_acquire(50)  # a request: the kept buffers are reclaimed for it
    assert sorted(dropped) == ["a", "b"] and p.in_use == 50
    assert p.hold_spare("a", 10, lambda: None) and p.in_use == 60
    assert p.hold_spare("a", 0, lambda: None) and p.in_use == 50  # forgotten
    p.release(50)
    assert p.in_use == 0
