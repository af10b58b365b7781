"""The virtual clock: broker time that moves only when a test says so.

``KafkaBroker(clock="virtual")`` hands the broker a ``VirtualClock`` as its injected clock
(``pylog._clock.Clock``). It starts at the real wall-clock time (record timestamps that
clients write stay comparable with it) and then stands still: ``advance(seconds)`` moves it
forward and fires, in due order, every timer that became due, moving the clock to each
timer's due time before firing it (Kafka's ``MockTime`` with ``MockScheduler``; trio's
``MockClock``). A timer armed by a fired timer and due within the advance fires in the same
call; a timer armed with no delay runs at once. Time never goes backwards.

What follows it: everything the broker schedules through its clock (``Clock.call_later``
and ``Clock.sleep``) and everything that reads it: group session timeouts, rebalance
timeouts and ``group.initial.rebalance.delay.ms``, offsets retention
(``offsets.retention.check.interval.ms``, ``offsets.retention.minutes``), transaction
timeouts and transactional-id expiration, the retention check
(``log.retention.check.interval.ms`` with ``retention.ms``), ``segment.ms`` rolls (judged at
the next append), the log manager's scheduled flushes and checkpoints, and the backoff
before a failed coordinator load is retried. What does not: the network
(``connections.max.idle.ms``, request and fetch waits, which clients time in real time),
other retry backoffs, and every client-side timer.

Thread-safety: reading (``time_ms``, ``monotonic``) from any thread. ``call_later`` and
``sleep`` on the loop the clock is bound to (the broker's); ``run_due`` too (``KafkaBroker
.advance`` runs it there).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from pylog._clock import Clock

# Loop iterations given to what a fired timer starts (tasks it wakes, the timers they arm)
# before the next one fires.
_SETTLE_ROUNDS = 8
# Less than the coordinators' resolution (they keep deadlines in whole milliseconds of the
# monotonic clock, rounded): a deadline of "now" can come back as up to half a millisecond
# ahead. Such a delay is due at once; every Kafka duration is a whole number of ms.
_DUE_NOW_S = 0.001


class _Timer:
    __slots__ = ("due_ns", "callback", "cancelled")

    def __init__(self, due_ns: int, callback: Callable[[], Any]) -> None:
        self.due_ns = due_ns
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock(Clock):
    """A clock that moves only on ``advance`` (see the module docstring).

    Args:
        time_ms: the wall-clock time to start at (default: now).
    """

    def __init__(self, time_ms: int | None = None) -> None:
        self._start_ms = time.time_ns() // 1_000_000 if time_ms is None else time_ms
        # Whole seconds: the coordinators round the monotonic clock to milliseconds for their
        # deadlines, and a start with a fraction of a millisecond would put a deadline of
        # "now" a fraction of a millisecond ahead, to wait for the next advance().
        self._start_mono = float(int(time.monotonic()))
        self._elapsed_ns = 0
        self._lock = threading.Lock()
        self._timers: list[tuple[int, int, _Timer]] = []
        self._seq = itertools.count()

    def time_ms(self) -> int:
        return self._start_ms + self._elapsed_ns // 1_000_000

    def monotonic(self) -> float:
        return self._start_mono + self._elapsed_ns / 1e9

    def call_later(self, delay: float, callback: Callable[[], Any]) -> Any:
        if delay < _DUE_NOW_S:
            # Due now (a zero group.initial.rebalance.delay.ms, a deadline already past):
            # runs at once on the loop, as on real time; waiting for an advance() would
            # stall a broker whose test never advances.
            return asyncio.get_running_loop().call_soon(callback)
        timer = _Timer(self._elapsed_ns + round(delay * 1e9), callback)
        with self._lock:
            heapq.heappush(self._timers, (timer.due_ns, next(self._seq), timer))
        return timer

    async def sleep(self, delay: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = self.call_later(delay, wake)
        try:
            await fut
        finally:
            timer.cancel()

    def drop_timers(self) -> int:
        """Forget every armed timer (their loop is gone: the broker stopped); returns how
        many. The time stays where it is."""
        with self._lock:
            n = len(self._timers)
            self._timers.clear()
        return n

    @property
    def pending(self) -> int:
        """Timers armed and not cancelled."""
        with self._lock:
            return sum(1 for _d, _s, t in self._timers if not t.cancelled)

    def _pop_due(self, until_ns: int) -> _Timer | None:
        with self._lock:
            while self._timers:
                due, _seq, timer = self._timers[0]
                if timer.cancelled:
                    heapq.heappop(self._timers)
                    continue
                if due > until_ns:
                    return None
                heapq.heappop(self._timers)
                return timer
            return None

    async def run_due(self, seconds: float, settle: Callable[[], Any]) -> int:
        """Advance by ``seconds`` on the broker's loop, firing due timers in order; after
        each, ``await settle()`` lets what it started run. Returns how many fired."""
        if seconds < 0:
            raise ValueError(f"advance({seconds}): the clock does not go backwards; give "
                             "seconds >= 0")
        target = self._elapsed_ns + round(seconds * 1e9)
        fired = 0
        while True:
            timer = self._pop_due(target)
            if timer is None:
                break
            self._elapsed_ns = max(self._elapsed_ns, timer.due_ns)
            timer.callback()
            fired += 1
            await settle()
        self._elapsed_ns = max(self._elapsed_ns, target)
        await settle()
        return fired


async def settle_loop(rounds: int = _SETTLE_ROUNDS) -> None:
    """Give the running loop ``rounds`` iterations (woken tasks run, arm their timers)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
