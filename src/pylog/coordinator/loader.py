"""Reading a coordinator's internal-topic partition back, one bounded chunk at a time.

A coordinator (groups, transactions) rebuilds its state by replaying its partition from the
log start to the log end. ``read_chunk`` is the blocking half of that: it runs on an I/O
thread, reads at most ``max_bytes`` of whole batches (at least one, however large) and
copies their records out, so that the event loop replays a bounded amount of work per
chunk and waits for no disk (``runtime.CoordinatorRuntime`` drives it). Control batches
become ``LoadedMarker``s: the group coordinator applies transaction markers in their place
in the log; the transaction coordinator skips them.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import logcore

__all__ = ["Chunk", "LoadedMarker", "LoadedRecord", "read_all", "read_chunk"]


class LoadedRecord(NamedTuple):
    """A record read back from an internal topic: producer_id >= 0 when its batch is
    transactional (a TxnOffsetCommit)."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1


class LoadedMarker(NamedTuple):
    """A transaction marker (control batch) read back from an internal topic."""

    offset: int
    producer_id: int
    commit: bool


class Chunk(NamedTuple):
    """What one ``read_chunk`` found: the entries in log order and the offset to read
    next (the last batch's last offset + 1; ``offset`` itself when nothing was read)."""

    entries: list[LoadedRecord | LoadedMarker]
    next_offset: int


_CONTROL_KEY = struct.Struct(">hh")  # control record key: version, type (0 ABORT, 1 COMMIT)


def _marker(batch: Any) -> LoadedMarker | None:
    """The COMMIT/ABORT marker of a control batch; None for other control types (KRaft's)."""
    for rec in batch:
        key = rec.key
        if key is None or len(key) < _CONTROL_KEY.size:
            return None
        _version, kind = _CONTROL_KEY.unpack_from(key, 0)
        if kind in (0, 1):
            return LoadedMarker(rec.offset, batch.producer_id, kind == 1)
        return None
    return None


def read_chunk(plog: Any, offset: int, max_bytes: int) -> Chunk:
    """The records and markers of ``plog`` from ``offset``: whole batches, at most
    ``max_bytes`` of them unless the first alone is larger (blocking: an I/O thread).

    Raises ``logcore.LogcoreError`` / ``OSError`` when the log cannot be read (the runtime
    fails the load and retries it)."""
    out: list[LoadedRecord | LoadedMarker] = []
    region = plog.read(offset, max_bytes, min_one_batch=True)
    if region.size == 0:
        return Chunk(out, offset)
    last = offset - 1
    for batch in logcore.iter_batches(region.read()):
        last = batch.last_offset
        if batch.last_offset < offset:
            continue
        if batch.is_control:
            marker = _marker(batch)
            if marker is not None:
                out.append(marker)
            continue
        pid = batch.producer_id if batch.is_transactional else -1
        for rec in batch:
            if rec.offset >= offset:
                out.append(LoadedRecord(rec.offset, rec.key, rec.value, pid))
    return Chunk(out, max(last + 1, offset))


def read_all(plog: Any, max_bytes: int = 4 * 1024 * 1024) -> tuple[list[LoadedRecord | LoadedMarker], int]:
    """Every entry from log start to log end and the offset reading stopped at, in one
    blocking call (tools and tests; the runtime reads chunk by chunk)."""
    entries: list[LoadedRecord | LoadedMarker] = []
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        chunk = read_chunk(plog, offset, max_bytes)
        entries.extend(chunk.entries)
        if chunk.next_offset <= offset:
            break
        offset = chunk.next_offset
    return entries, max(offset, end)
