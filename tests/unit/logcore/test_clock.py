"""logcore.clock: the injected time protocol (Kafka's Time) and its two clocks."""

from __future__ import annotations

import time

import pytest

from logcore import Clock, ManualClock, SystemClock


def test_manual_clock() -> None:
    c = ManualClock(1000)
    assert c.time_ms() == 1000
    assert c.advance(250) == 1250 and c.time_ms() == 1250
    c.set(5)
    assert c.time_ms() == 5
    with pytest.raises(ValueError):
        c.advance(-1)
    assert isinstance(c, Clock) and "5" in repr(c)


def test_system_clock_is_wall_clock_ms() -> None:
    c = SystemClock()
    before = time.time_ns() // 1_000_000
    now = c.time_ms()
    assert before <= now <= time.time_ns() // 1_000_000
    assert isinstance(c, Clock)


def test_any_object_with_time_ms_is_a_clock() -> None:
    class Mine:
        def time_ms(self) -> int:
            return 42

    assert isinstance(Mine(), Clock)
    assert not isinstance(object(), Clock)
