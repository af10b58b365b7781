"""pylog.broker.eager: a coroutine started with send() and finished by the current task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pylog.broker import eager


def start(coro: Any) -> tuple[bool, Any]:
    """(True, result) when the coroutine finished in its first step, else (False, yielded)."""
    try:
        return False, coro.send(None)
    except StopIteration as stop:
        return True, stop.value


async def no_wait(x: int) -> int:
    return x * 2


def test_a_coroutine_that_does_not_wait_finishes_in_its_first_step() -> None:
    assert start(no_wait(21)) == (True, 42)


def test_a_waiting_coroutine_is_finished_with_its_futures_results() -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()
        seen: list[Any] = []

        async def handler() -> str:
            seen.append(await fut)
            await asyncio.sleep(0)  # a bare yield is passed up as None
            seen.append(await asyncio.sleep(0.001, "slept"))
            return "done"

        coro = handler()
        finished, yielded = start(coro)
        assert not finished and yielded is fut
        loop.call_soon(fut.set_result, "first")
        seen.append(await eager.finish(coro, yielded))
        return seen

    assert asyncio.run(main()) == ["first", "slept", "done"]


def test_an_exception_of_the_awaited_future_reaches_the_coroutine() -> None:
    async def main() -> str:
        fut = asyncio.get_running_loop().create_future()

        async def handler() -> str:
            try:
                await fut
            except KeyError as exc:
                return f"caught {exc}"
            return "not raised"

        coro = handler()
        _, yielded = start(coro)
        fut.set_exception(KeyError("k"))
        return await eager.finish(coro, yielded)

    assert asyncio.run(main()) == "caught 'k'"


def test_an_exception_raised_after_the_wait_propagates() -> None:
    async def main() -> None:
        async def handler() -> None:
            await asyncio.sleep(0)
            raise ValueError("late")

        coro = handler()
        _, yielded = start(coro)
        await eager.finish(coro, yielded)

    with pytest.raises(ValueError, match="late"):
        asyncio.run(main())


def test_cancelling_the_task_cancels_the_future_the_coroutine_waits_on() -> None:
    async def main() -> tuple[bool, list[str]]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        events: list[str] = []

        async def handler() -> None:
            try:
                await fut
            except asyncio.CancelledError:
                events.append("cancelled inside")
                raise

        async def worker() -> None:
            coro = handler()
            _, yielded = start(coro)
            await eager.finish(coro, yielded)

        task = asyncio.ensure_future(worker())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return fut.cancelled(), events

    assert asyncio.run(main()) == (True, ["cancelled inside"])


def test_a_cancellation_while_the_future_is_done_is_thrown_into_the_coroutine() -> None:
    # As with a task's own coroutine: the cancellation comes out of the await whose
    # future was already done when the task was cancelled.
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        events: list[str] = []

        async def handler() -> str:
            try:
                await fut
            except asyncio.CancelledError:
                events.append("cancelled at the done future")
                return "cleaned up"
            return "not cancelled"

        async def worker() -> str:
            coro = handler()
            _, yielded = start(coro)
            return await eager.finish(coro, yielded)

        task = asyncio.ensure_future(worker())
        await asyncio.sleep(0)  # the task now waits on fut
        fut.set_result(None)  # done: the task's wake-up is scheduled ...
        task.cancel()  # ... and the cancellation cannot cancel fut any more
        events.append(await task)
        return events

    assert asyncio.run(main()) == ["cancelled at the done future", "cleaned up"]


def test_the_same_coroutine_as_a_task_behaves_alike() -> None:
    """The reference: what asyncio does when the coroutine is the task's own."""
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        events: list[str] = []

        async def handler() -> str:
            try:
                await fut
            except asyncio.CancelledError:
                events.append("cancelled at the done future")
                return "cleaned up"
            return "not cancelled"

        task = asyncio.ensure_future(handler())
        await asyncio.sleep(0)
        fut.set_result(None)
        task.cancel()
        events.append(await task)
        return events

    assert asyncio.run(main()) == ["cancelled at the done future", "cleaned up"]
