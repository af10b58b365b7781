"""pylog.testing.clock: the virtual clock fires due timers in order on advance, moving the
clock to each one's due time, and never goes backwards."""

from __future__ import annotations

import asyncio

import pytest

from pylog.testing.clock import VirtualClock, settle_loop


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_time_stands_still_until_advanced() -> None:
    clock = VirtualClock(time_ms=1_000_000)
    mono = clock.monotonic()

    async def main() -> None:
        await clock.run_due(2.5, settle_loop)

    assert clock.time_ms() == 1_000_000
    _run(main())
    assert clock.time_ms() == 1_002_500
    assert clock.monotonic() == pytest.approx(mono + 2.5)


def test_due_timers_fire_in_order_at_their_due_time() -> None:
    clock = VirtualClock(time_ms=0)
    seen: list[tuple[str, int]] = []

    async def main() -> int:
        clock.call_later(3.0, lambda: seen.append(("c", clock.time_ms())))
        clock.call_later(1.0, lambda: seen.append(("a", clock.time_ms())))
        clock.call_later(2.0, lambda: seen.append(("b", clock.time_ms())))
        clock.call_later(9.0, lambda: seen.append(("late", clock.time_ms())))
        cancelled = clock.call_later(1.5, lambda: seen.append(("cancelled", 0)))
        cancelled.cancel()
        return await clock.run_due(5.0, settle_loop)

    assert _run(main()) == 3
    assert seen == [("a", 1000), ("b", 2000), ("c", 3000)]
    assert clock.pending == 1  # "late" waits for a further advance


def test_a_sleep_that_rearms_runs_every_period_within_one_advance() -> None:
    """The retention loop's shape: sleep(interval), work, sleep again."""
    clock = VirtualClock(time_ms=0)
    runs: list[int] = []

    async def loop_body() -> None:
        while True:
            await clock.sleep(10.0)
            runs.append(clock.time_ms())

    async def main() -> None:
        task = asyncio.ensure_future(loop_body())
        await settle_loop()
        await clock.run_due(35.0, settle_loop)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    _run(main())
    assert runs == [10_000, 20_000, 30_000]


def test_the_clock_does_not_go_backwards() -> None:
    clock = VirtualClock()
    with pytest.raises(ValueError, match="does not go backwards"):
        _run(clock.run_due(-1, settle_loop))


def test_a_timer_due_now_runs_without_an_advance() -> None:
    """group.initial.rebalance.delay.ms=0 arms a zero delay: it must not wait for advance()."""
    clock = VirtualClock(time_ms=0)
    seen: list[int] = []

    async def main() -> None:
        clock.call_later(0, lambda: seen.append(clock.time_ms()))
        await settle_loop()

    _run(main())
    assert seen == [0]


def test_a_deadline_of_now_in_rounded_milliseconds_is_due_now() -> None:
    """The coordinators' shape: deadline = round(monotonic * 1000) + 0, re-armed as
    (deadline - monotonic * 1000) / 1000 seconds: float noise, never a wait for advance()."""
    clock = VirtualClock(time_ms=0)
    seen: list[str] = []

    async def main() -> None:
        await clock.run_due(0.0127, settle_loop)  # 0.7 ms past a whole millisecond
        deadline_ms = round(clock.monotonic() * 1000)  # rounds up, 0.3 ms ahead
        assert deadline_ms > clock.monotonic() * 1000
        clock.call_later((deadline_ms - clock.monotonic() * 1000) / 1000,
                         lambda: seen.append("fired"))
        await settle_loop()

    _run(main())
    assert seen == ["fired"]
