"""The blocking consumer's callback plumbing (``Consumer._serve`` / ``_dispatch``): the
core hands a rebalance callback to the call waiting on the application's thread, which runs
it and hands back its outcome. No broker is needed: the calls run coroutines that ask for
callbacks the way the core does."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from pylog.client import Consumer


@pytest.fixture
def consumer():
    c = Consumer({"bootstrap.servers": "127.0.0.1:1"})  # nothing is sent in these tests
    yield c
    c.close()


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_a_callback_runs_on_the_waiting_thread_and_may_call_back(consumer: Consumer) -> None:
    seen: list[Any] = []

    def callback(partitions: list[Any]) -> str:
        seen.append((threading.current_thread(), partitions))
        # A callback calls the consumer: a nested waiting call serves its own callbacks.
        inner = consumer._serve(consumer._dispatch(lambda p: f"inner {p}", ["y"]))
        return f"outer {partitions} / {inner}"

    assert consumer._serve(consumer._dispatch(callback, ["x"])) == "outer ['x'] / inner ['y']"
    assert seen == [(threading.current_thread(), ["x"])]
    # Its exception goes back to the coroutine that asked.
    with pytest.raises(ZeroDivisionError):
        consumer._serve(consumer._dispatch(lambda p: 1 / 0, []))


def test_a_callback_asked_for_between_calls_runs_in_the_next_one(consumer: Consumer) -> None:
    async def ask() -> asyncio.Future[Any]:
        return asyncio.ensure_future(consumer._dispatch(lambda p: f"late {p}", ["z"]))

    fut = consumer._thread.run(ask())  # a rebalance going on between polls

    async def idle() -> str:
        return "idle"

    assert consumer._serve(idle()) == "idle"  # ran it while waiting

    async def result() -> Any:
        return await fut

    assert consumer._thread.run(result()) == "late ['z']"


def test_each_waiting_call_gets_its_own_wake_up(consumer: Consumer) -> None:
    """The hang of a close() run while another thread sat in a callback of its poll: that
    thread came back to wait after close's call had ended, took close's wake-up from a
    queue shared by every waiting call, and close waited forever once its own callback
    returned."""
    poll_callback_done, close_callback_done = threading.Event(), threading.Event()

    async def polling() -> str:  # a poll left running on another thread
        await consumer._dispatch(lambda p: poll_callback_done.wait(10), [])
        await asyncio.sleep(20)
        return "polled"

    async def closing() -> str:
        # close() gives up waiting for its callback (its timeout) and ends.
        try:
            await asyncio.wait_for(consumer._dispatch(lambda p: close_callback_done.wait(10), []), 0.6)
        except asyncio.TimeoutError:
            pass
        return "closed"

    _in_thread(lambda: consumer._serve(polling()))
    time.sleep(0.3)  # the poller runs its callback
    t2, out2 = _in_thread(lambda: consumer._serve(closing()))
    time.sleep(0.3)  # the closer runs its callback
    poll_callback_done.set()  # the poller waits again, and closing() ends meanwhile
    time.sleep(1.0)
    close_callback_done.set()
    t2.join(5)
    assert out2 == ["closed"]
