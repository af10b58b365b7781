"""When the active segment rolls (Kafka's ``LogSegment.shouldRoll``), one rule for the two
places that ask: ``Log.append`` before it writes a batch, and ``Log.append_needs_io`` /
``Log.replica_append_needs_io``, which the broker asks on its event loop to decide whether
an append (a produced batch, or a follower's fetched batches) may run inline or goes to an
I/O thread because it could roll."""

from __future__ import annotations

import struct
from typing import Any

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


_REPLICA_HEADER = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23
_MAX_TIMESTAMP = struct.Struct(">q")  # at byte 35
_EPOCH = struct.Struct(">i")  # partition leader epoch, at byte 12
_HEADER_SIZE = 61
_ATTR_CONTROL = 0x20  # in the low byte of attributes (byte 22)


def replica_headers(records: Any) -> tuple[int, int, int, bool] | None:
    """What a replica append's roll and epoch decisions read from fetched batches, from
    their headers only: (last offset, largest max timestamp, newest partition leader
    epoch, whether any batch is a control batch); None when the headers do not walk
    (the append itself reports why)."""
    n = len(records)
    pos = 0
    last_offset = max_ts = epoch = -1
    control = False
    while pos < n:
        if n - pos < _HEADER_SIZE:
            return None
        base, length = _REPLICA_HEADER.unpack_from(records, pos)
        if length < _HEADER_SIZE - 12:
            return None
        last_offset = base + _LAST_OFFSET_DELTA.unpack_from(records, pos + 23)[0]
        max_ts = max(max_ts, _MAX_TIMESTAMP.unpack_from(records, pos + 35)[0])
        epoch = max(epoch, _EPOCH.unpack_from(records, pos + 12)[0])
        control = control or bool(records[pos + 22] & _ATTR_CONTROL)
        pos += 12 + length
    return (last_offset, max_ts, epoch, control) if pos == n and n else None
