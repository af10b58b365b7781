"""When the active segment rolls (Kafka's ``LogSegment.shouldRoll``), one rule for the two
places that ask: ``Log.append`` before it writes a batch, and ``Log.append_needs_io``,
which the broker asks on its event loop to decide whether an append may run inline or
goes to an I/O thread because it could roll."""

from __future__ import annotations

from .clock import Clock
from .segment import LogSegment

_I32_MAX = 2**31 - 1

#: How much older than it is ``Log.append_needs_io`` judges the active segment: a batch
#: that would roll it within this many milliseconds is predicted to roll.
ROLL_MARGIN_MS = 50


def roll_due(seg: LogSegment, ssize: int, room: int, max_timestamp: int, last_offset: int,
             clock: Clock, margin_ms: int) -> bool:
    """Kafka's ``LogSegment.shouldRoll`` for a non-empty active segment: full by size
    (``ssize`` over ``room``, what is left of segment_bytes for the batch) or index, too
    old (the incoming batch's timestamp against the first batch's, or the wall clock when
    that has none), or an offset that does not fit relative to the base offset."""
    if ssize > room or seg.index_full or last_offset - seg.base_offset > _I32_MAX:
        return True
    rolling = seg.rolling_based_timestamp
    if rolling is not None and rolling >= 0:
        waited = max_timestamp - rolling
    else:
        waited = clock.time_ms() - seg.created_ms
    return waited + margin_ms > seg.roll_after_ms
