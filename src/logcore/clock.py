"""Time as logcore sees it: an injected clock (Kafka's ``org.apache.kafka.common.utils.Time``).

The storage layer needs wall-clock milliseconds for LogAppendTime stamps, segment age
(``segment_ms``), retention (``retention_ms``) and delayed file deletion
(``file_delete_delay_ms``). It never reads ``time.time()`` itself: it asks its clock, so
tests drive every time-based rule with a :class:`ManualClock`.

The protocol is one method::

    class Clock(Protocol):
        def time_ms(self) -> int: ...   # wall-clock milliseconds since the epoch

Any object with that method will do (pylog's broker clock has it too).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock time in milliseconds since the Unix epoch."""
        ...


class SystemClock:
    """The real clock. Thread-safe."""

    __slots__ = ()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to (tests). Thread-safe.

    Args:
        start_ms: the initial time in milliseconds.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def time_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0); returns the new time."""
        if ms < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms

    def __repr__(self) -> str:
        return f"ManualClock({self._now})"


SYSTEM_CLOCK = SystemClock()
