"""Injected time (whatever waits, expires or schedules takes a Clock).

Anchor: apache/kafka ``org.apache.kafka.common.utils.Time``. ``SystemClock`` reads the real
clocks; ``ManualClock`` is advanced by tests. Both are safe to share between threads for
reading; ``ManualClock.advance`` is meant to be called from the test's thread only.

Besides reading time, a clock schedules on the running event loop: ``call_later`` and
``sleep``. The broker's Kafka-configured timers (group and transaction deadlines, the
retention check) go through them, so that a clock that owns its own timers
(``pylog.testing``'s virtual clock) fires them when it is advanced. The base class schedules
on the loop's real time, which is what ``SystemClock`` and ``ManualClock`` want.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


class Clock:
    """Wall-clock milliseconds (record timestamps, retention) and a monotonic clock (timeouts)."""

    def time_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        raise NotImplementedError

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for deadlines)."""
        raise NotImplementedError

    def call_later(self, delay: float, callback: Callable[[], Any]) -> Any:
        """Run ``callback`` on the running event loop ``delay`` seconds from now; returns a
        handle with ``cancel()``. Must be called on that loop."""
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)

    async def sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds of this clock's time on the running event loop."""
        await asyncio.sleep(max(delay, 0.0))


class SystemClock(Clock):
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock(Clock):
    """A clock that moves only when told to."""

    def __init__(self, time_ms: int = 1_700_000_000_000, monotonic: float = 0.0) -> None:
        self._time_ms = time_ms
        self._monotonic = monotonic

    def time_ms(self) -> int:
        return self._time_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go backwards")
        self._time_ms += ms
        self._monotonic += ms / 1000.0


SYSTEM_CLOCK = SystemClock()
