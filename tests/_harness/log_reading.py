"""Reading a whole ``logcore.Log`` back in a test: every batch from the log start offset to
the log end offset, through the same ``Log.read`` a fetch uses (file regions of whole
batches), so that what a test compares is what a consumer would get."""

from __future__ import annotations

from typing import Any

from logcore import iter_batches


def all_batches(log: Any) -> list[Any]:
    """Every batch of ``log`` whose last offset is at or past the log start offset."""
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        region = log.read(off, 1 << 30)
        if not region:
            break
        out.extend(b for b in iter_batches(region.read()) if b.last_offset >= off)
        off = region.last_offset + 1
    return out


def records(log: Any) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record of ``log``, in offset order."""
    return [(r.offset, r.key, r.value, r.timestamp) for b in all_batches(log) for r in b]
