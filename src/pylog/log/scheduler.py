"""Scheduler: named background tasks, run once or periodically on a few threads.

Kafka's ``KafkaScheduler`` (a ``ScheduledThreadPoolExecutor`` with ``background.threads``
threads): the LogManager uses it to flush rolled segments, flush logs by ``flush.ms``,
checkpoint recovery points and log start offsets, and unmap idle indexes. The work is
blocking file I/O, so it runs on these threads, never on the broker's event loop.

Time comes from an injected :class:`pylog._clock.Clock` (its ``monotonic`` seconds). The
threads sleep until the next task is due, at most ``max_sleep`` seconds at a time, so a
test that advances a ``ManualClock`` sees its tasks run within that bound (``wake()``
makes it immediate); ``run_due()`` runs due tasks on the caller's thread instead, for
tests that start no threads.

A task that raises is logged and, when periodic, runs again at its next time. Periodic
tasks are scheduled at fixed delay (the next run is ``period`` after the previous one
ends), so a slow run never piles up runs behind it.

Thread-safety: every method may be called from any thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from pylog._clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("pylog.log.scheduler")


class ScheduledTask:
    """A handle on a scheduled task; ``cancel()`` stops future runs."""

    __slots__ = ("name", "fn", "period_s", "due", "cancelled", "runs")

    def __init__(self, name: str, fn: Callable[[], object], period_s: float, due: float) -> None:
        self.name = name
        self.fn = fn
        self.period_s = period_s
        self.due = due
        self.cancelled = False
        self.runs = 0

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        kind = f"every {self.period_s:g} s" if self.period_s > 0 else "once"
        return f"ScheduledTask({self.name!r}, {kind}, runs={self.runs})"


class Scheduler:
    """Run callables later or periodically on ``threads`` daemon threads.

    Args:
        threads: worker threads (Kafka's ``background.threads``); 0 starts none (tests
            call ``run_due``).
        clock: injected time.
        name: thread name prefix.
        max_sleep: longest single wait of an idle thread, in seconds.
    """

    def __init__(self, threads: int = 1, clock: Clock = SYSTEM_CLOCK, name: str = "pylog-scheduler",
                 max_sleep: float = 1.0) -> None:
        if threads < 0:
            raise ValueError("threads must be >= 0")
        self.clock = clock
        self.name = name
        self.max_sleep = max_sleep
        self._n_threads = threads
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, ScheduledTask]] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._running = 0  # tasks being run right now
        self._started = False
        self._stopped = False

    # --- lifecycle ---------------------------------------------------------------------
    def startup(self) -> None:
        """Start the threads (tasks scheduled before run from now on)."""
        with self._cond:
            if self._started:
                raise RuntimeError("scheduler already started")
            self._started = True
            self._stopped = False
        for i in range(self._n_threads):
            t = threading.Thread(target=self._worker, name=f"{self.name}-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Drop pending tasks, let running ones finish, join the threads. Idempotent."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
        self._started = False

    @property
    def is_started(self) -> bool:
        return self._started and not self._stopped

    # --- scheduling ----------------------------------------------------------------------
    def schedule(self, name: str, fn: Callable[[], object], *, delay_ms: float = 0,
                 period_ms: float = -1) -> ScheduledTask:
        """Run ``fn`` after ``delay_ms``, then every ``period_ms`` if that is > 0.

        Returns the task handle. After ``shutdown`` the task is not queued (the handle
        comes back cancelled).
        """
        due = self.clock.monotonic() + max(delay_ms, 0) / 1000.0
        task = ScheduledTask(name, fn, period_ms / 1000.0 if period_ms > 0 else 0.0, due)
        with self._cond:
            if self._stopped:
                task.cancelled = True
                return task
            heapq.heappush(self._heap, (due, next(self._seq), task))
            self._cond.notify()
        return task

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: float = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms=delay_ms)

    def wake(self) -> None:
        """Make the threads look at the clock now (after a ManualClock advanced)."""
        with self._cond:
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Tasks queued and not cancelled (running ones not counted)."""
        with self._cond:
            return sum(1 for _d, _s, t in self._heap if not t.cancelled)

    def idle(self) -> bool:
        """True when no task is due now and none is running."""
        now = self.clock.monotonic()
        with self._cond:
            return self._running == 0 and not any(
                d <= now and not t.cancelled for d, _s, t in self._heap)

    # --- running ---------------------------------------------------------------------------
    def run_due(self) -> int:
        """Run every task due now on this thread; returns how many ran."""
        ran = 0
        while True:
            task = self._take_due()
            if task is None:
                return ran
            self._run(task)
            ran += 1

    def _take_due(self) -> ScheduledTask | None:
        with self._cond:
            now = self.clock.monotonic()
            while self._heap:
                due, _seq, task = self._heap[0]
                if task.cancelled:
                    heapq.heappop(self._heap)
                    continue
                if due > now:
                    return None
                heapq.heappop(self._heap)
                self._running += 1
                return task
            return None

    def _run(self, task: ScheduledTask) -> None:
        try:
            task.fn()
        except Exception:  # noqa: BLE001 - a failing task must not kill the scheduler
            log.exception("scheduled task %s failed", task.name)
        finally:
            task.runs += 1
            with self._cond:
                self._running -= 1
                if task.period_s > 0 and not task.cancelled and not self._stopped:
                    task.due = self.clock.monotonic() + task.period_s
                    heapq.heappush(self._heap, (task.due, next(self._seq), task))
                self._cond.notify_all()

    def _worker(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                wait = self.max_sleep
                if self._heap:
                    wait = min(wait, max(self._heap[0][0] - self.clock.monotonic(), 0.0))
                if wait > 0:
                    self._cond.wait(wait)
                if self._stopped:
                    return
            task = self._take_due()
            if task is not None:
                self._run(task)
