"""pylog.console.reset: Kafka's --to-datetime and --by-duration values."""

from __future__ import annotations

import pytest

from pylog.console.reset import ResetError, parse_datetime, parse_duration


def test_datetimes() -> None:
    assert parse_datetime("1970-01-01T00:00:01") == 1000
    assert parse_datetime("1970-01-01T00:00:01.250Z") == 1250
    assert parse_datetime("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(ResetError, match="2024-05-01T12:00:00"):
        parse_datetime("yesterday")


def test_durations() -> None:
    assert parse_duration("PT1H") == 3_600_000
    assert parse_duration("P1DT30M") == 86_400_000 + 1_800_000
    assert parse_duration("PT0.5S") == 500
    for bad in ("P", "PT", "1H", "PT1X"):
        with pytest.raises(ResetError, match="ISO-8601"):
            parse_duration(bad)
