"""pylog.log.scheduler: once and periodic tasks, manual clock, failures, threads."""

from __future__ import annotations

import threading
import time

import pytest

from pylog._clock import ManualClock
from pylog.log.scheduler import Scheduler


def test_once_and_periodic_tasks_follow_the_manual_clock() -> None:
    clock = ManualClock()
    s = Scheduler(0, clock)
    runs: list[str] = []
    s.schedule_once("now", lambda: runs.append("now"))
    s.schedule_once("later", lambda: runs.append("later"), delay_ms=500)
    s.schedule("tick", lambda: runs.append("tick"), delay_ms=100, period_ms=100)
    assert s.run_due() == 1 and runs == ["now"]
    clock.advance(100)
    assert s.run_due() == 1 and runs[-1] == "tick"
    clock.advance(99)
    assert s.run_due() == 0  # fixed delay: 100 ms after the previous run ended
    clock.advance(1)
    assert s.run_due() == 1
    clock.advance(300)
    # "later" and one "tick" (a periodic task runs once however late it is)
    assert s.run_due() == 2 and sorted(runs[-2:]) == ["later", "tick"]
    assert s.pending == 1


def test_cancel_and_failures() -> None:
    clock = ManualClock()
    s = Scheduler(0, clock)
    calls = []

    def boom() -> None:
        calls.append(1)
        raise OSError("disk on fire")

    task = s.schedule("boom", boom, period_ms=10)
    victim = s.schedule_once("victim", lambda: calls.append(2), delay_ms=5)
    victim.cancel()
    assert s.run_due() == 1
    clock.advance(10)
    assert s.run_due() == 1  # a failing periodic task keeps its schedule
    assert calls == [1, 1] and task.runs == 2
    task.cancel()
    clock.advance(10)
    assert s.run_due() == 0 and s.pending == 0


def test_threads_run_tasks_and_shutdown_joins_them() -> None:
    s = Scheduler(2)
    s.startup()
    try:
        done = threading.Event()
        periodic = threading.Event()
        counter = [0]

        def tick() -> None:
            counter[0] += 1
            if counter[0] >= 3:
                periodic.set()

        s.schedule_once("once", done.set, delay_ms=20)
        s.schedule("tick", tick, period_ms=10)
        assert done.wait(10) and periodic.wait(10)
        with pytest.raises(RuntimeError):
            s.startup()
    finally:
        s.shutdown()
    assert not s.is_started
    assert all(not t.is_alive() for t in threading.enumerate() if t.name.startswith("pylog-scheduler"))
    # after shutdown nothing is queued any more
    assert s.schedule_once("late", lambda: None).cancelled


def test_threads_follow_a_manual_clock_after_wake() -> None:
    clock = ManualClock()
    s = Scheduler(1, clock, max_sleep=0.05)
    s.startup()
    try:
        ran = threading.Event()
        s.schedule_once("due-in-an-hour", ran.set, delay_ms=3_600_000)
        time.sleep(0.1)
        assert not ran.is_set()
        clock.advance(3_600_000)
        s.wake()
        assert ran.wait(10)
    finally:
        s.shutdown()
