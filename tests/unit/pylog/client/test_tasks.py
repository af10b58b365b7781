"""Stopping background tasks (``pylog.client.aio._tasks``): a task whose cancel Python
3.11's ``asyncio.wait_for`` swallowed is cancelled again until it ends, and a task that
will not end is given up on after the bound instead of waited for without end.

The swallowed cancel is made deterministically: a loop around ``wait_for(event.wait(),
t)``, the event set, the loop let run a few turns (so that the event's wait completed but
the loop task has not resumed yet), then the cancel. How many turns that takes is
CPython's business, so every test tries each of 0 to 3 turns."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from pylog.client.aio._tasks import cancel_all, cancel_and_wait, run_within

TURNS = range(4)
# The guard against a hang in these tests (not a speed assertion: each case ends within a
# few loop turns, or never).
HANG_GUARD = 10.0


async def _looping_waiter(event: asyncio.Event, rounds: list[int]) -> None:
    """The shape of a consumer's heartbeat loop: wait for a wake-up or the next beat."""
    while True:
        rounds.append(1)
        event.clear()
        try:
            await asyncio.wait_for(event.wait(), 5.0)
        except asyncio.TimeoutError:
            pass


async def _swallow_setup(turns: int) -> tuple[asyncio.Task[None], asyncio.Event, list[int]]:
    event = asyncio.Event()
    rounds: list[int] = []
    task = asyncio.get_running_loop().create_task(_looping_waiter(event, rounds))
    while not rounds:
        await asyncio.sleep(0)
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    return task, event, rounds


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for keeps the cancel from 3.12 on")
def test_a_single_cancel_is_swallowed_by_wait_for_on_python_3_11() -> None:
    # The CPython behaviour the module works around (gh-86296): for some turn the cancel is
    # lost and the loop goes round again. Were it not, the tests below would prove nothing.
    async def go(turns: int) -> bool:
        task, _, _ = await _swallow_setup(turns)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=0.5)
        swallowed = not done
        task.cancel()  # the waiter is back in an unbounded-for-now wait: this one lands
        await asyncio.wait({task})
        return swallowed

    assert any(asyncio.run(go(turns)) for turns in TURNS)


@pytest.mark.parametrize("turns", TURNS)
def test_cancel_and_wait_ends_a_task_whose_cancel_was_swallowed(turns: int) -> None:
    async def go() -> tuple[bool, bool]:
        task, _, _ = await _swallow_setup(turns)
        ended = await asyncio.wait_for(cancel_and_wait(task), HANG_GUARD)
        return ended, task.cancelled()

    assert asyncio.run(go()) == (True, True)


def test_cancel_and_wait_gives_up_on_a_task_that_refuses_to_end(caplog: Any) -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # refuses every cancel

    async def go() -> tuple[bool, bool]:
        task = asyncio.get_running_loop().create_task(stubborn())
        await asyncio.sleep(0)
        ended = await asyncio.wait_for(cancel_and_wait(task, timeout=0.3), HANG_GUARD)
        running = not task.done()
        release.set()
        await task
        return ended, running

    assert asyncio.run(go()) == (False, True)
    assert "did not end within 0.3 s" in caplog.text


def test_cancel_and_wait_retrieves_a_failure_and_accepts_none_or_done_tasks() -> None:
    async def fails() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            raise ValueError("failed while stopping")

    async def go() -> bool:
        task = asyncio.get_running_loop().create_task(fails())
        await asyncio.sleep(0)
        assert await cancel_and_wait(task)
        assert isinstance(task.exception(), ValueError)
        assert await cancel_and_wait(None)
        return await cancel_and_wait(task)  # already done

    # Also: no "Task exception was never retrieved" at garbage collection (warnings are
    # errors, and the loop's exception handler logs it).
    assert asyncio.run(go())


@pytest.mark.parametrize("turns", TURNS)
def test_cancel_all_stops_every_task_within_its_bound(turns: int) -> None:
    async def go() -> tuple[bool, list[bool]]:
        a, _, _ = await _swallow_setup(turns)
        b, _, _ = await _swallow_setup(turns)
        ended = await asyncio.wait_for(cancel_all([a, None, b]), HANG_GUARD)
        return ended, [a.done(), b.done()]

    assert asyncio.run(go()) == (True, [True, True])


def test_a_cancel_of_the_caller_does_not_cut_the_stop_short() -> None:
    # Close's later steps (the link, the connections) must run: the caller's cancel is
    # absorbed, as the code these helpers replace absorbed it, and the task still ends.
    async def go() -> tuple[bool, bool, bool]:
        task, _, _ = await _swallow_setup(0)
        after: list[bool] = []

        async def stopper() -> None:
            await cancel_and_wait(task)
            after.append(True)  # the rest of the close

        outer = asyncio.get_running_loop().create_task(stopper())
        await asyncio.sleep(0)
        outer.cancel()
        done, _ = await asyncio.wait({outer}, timeout=HANG_GUARD)
        return outer in done and not outer.cancelled(), task.done(), after == [True]

    assert asyncio.run(go()) == (True, True, True)


async def _absorbs_a_cancel(rounds: list[int]) -> None:
    """A task that goes on after one cancel, as one whose cancel 3.11's wait_for swallowed."""
    rounds.append(1)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        rounds.append(2)
    await asyncio.sleep(3600)


def test_run_within_stops_a_task_that_absorbs_the_first_cancel() -> None:
    """3.11's ``wait_for(aw, t)`` cancels once on timeout and then waits for ``aw`` without
    bound; ``run_within`` cancels again until it ends, and raises TimeoutError."""
    async def main() -> None:
        rounds: list[int] = []
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(run_within(_absorbs_a_cancel(rounds), 0.05), HANG_GUARD)
        assert rounds == [1, 2]  # the first cancel was absorbed, the second ended it

    asyncio.run(main())


def test_run_within_returns_the_result_or_raises_the_error() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    async def main() -> None:
        assert await run_within(asyncio.sleep(0, result=7), 5.0) == 7
        with pytest.raises(ValueError, match="boom"):
            await run_within(fails(), 5.0)
        with pytest.raises(asyncio.TimeoutError):
            await run_within(asyncio.sleep(3600), 0.0)

    asyncio.run(main())


def test_run_within_stops_the_task_when_the_caller_is_cancelled() -> None:
    async def main() -> None:
        rounds: list[int] = []
        inner: list[asyncio.Task[Any]] = []

        async def body() -> None:
            inner.append(asyncio.current_task())  # type: ignore[arg-type]
            await _absorbs_a_cancel(rounds)

        outer = asyncio.get_running_loop().create_task(run_within(body(), 3600))
        while not rounds:
            await asyncio.sleep(0)
        outer.cancel()
        done, _ = await asyncio.wait({outer}, timeout=HANG_GUARD)
        assert done and outer.cancelled()
        assert inner[0].done() and rounds == [1, 2]

    asyncio.run(main())


def test_run_within_a_gather_that_runs_out_raises_timeout_error() -> None:
    """A cancelled gather ends with CancelledError as its exception (not cancelled()):
    still a TimeoutError for the caller."""
    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await run_within(asyncio.gather(asyncio.sleep(3600), asyncio.sleep(3600)), 0.01)

    asyncio.run(main())
