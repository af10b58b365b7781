"""ISO-8601 durations as Java's ``java.time.Duration.parse`` reads them (``PnDTnHnMn.nS``):
Kafka's ``--by-duration`` of the offset-reset tools and its ``by_duration:<duration>``
auto-offset-reset strategy (KIP-1106) use that grammar.

Days, hours, minutes and seconds (with up to 9 fraction digits), each optionally signed,
the whole optionally signed; case-insensitive; at least one part; a ``T`` must be followed
by a time part. No years, months or weeks (``Duration`` has none).
"""

from __future__ import annotations

import re

__all__ = ["parse_duration_ms"]

_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration (fractions below a millisecond dropped).

    Raises:
        ValueError: ``text`` is not such a duration.
    """
    m = _DURATION.fullmatch(text.strip())
    if m is None or text.strip().upper().endswith("T") or not any(m.group(i) for i in range(2, 6)):
        raise ValueError(f"{text!r} is not an ISO-8601 duration PnDTnHnMn.nS (e.g. PT30M, P1DT2H)")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    seconds_sign = -1 if (seconds or "").startswith("-") else 1
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000
          + int(minutes or 0) * 60_000 + int(seconds or 0) * 1000
          + seconds_sign * int(((fraction or "") + "000")[:3]))
    return -ms if sign == "-" else ms
