"""Pure-Python twin of logcore._segment: batch-header scans over segment files.

These are the only places the storage layer looks inside a ``.log`` file. They read just
the fields of the RecordBatch v2 header they need (big-endian, Kafka's
``DefaultRecordBatch.java``)::

    0 base_offset int64 | 8 batch_length int32 | 12 partition_leader_epoch int32 |
    16 magic int8 | 17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 |
    23 last_offset_delta int32 | 27 base_timestamp int64 | 35 max_timestamp int64 | ...

A batch occupies ``12 + batch_length`` bytes and batch_length >= 49 (the 61-byte header).

- ``search_for_offset`` is Kafka's ``FileRecords.searchForOffsetWithSize``: from a batch
  boundary (an offset-index entry), walk headers to the first batch whose last offset is
  at or past the target.
- ``scan_region`` extends a read from its first batch over whole batches while they fit
  in ``max_bytes`` and stay below ``max_offset``.
- ``txn_batches`` lists the transactional and control batches of a region (their producer
  id and whether they are control batches, a share group's read needs to leave out
  transaction markers and, under read_committed, aborted data; Kafka's
  ``SharePartition.fetchAbortedTransactionRecordBatches`` walks the same headers).
- ``recover_scan`` is ``LogSegment.recover``: check every batch (length bounds, magic, CRC,
  increasing offsets that fit the segment), rebuild both indexes, and report where the
  valid prefix ends.

The header walks read the file with ``os.pread`` (never mmap: a concurrent truncation of
a mapped file would kill the process with SIGBUS; a short pread is just the end).

Thread-safety: the functions keep no state; ``pread`` does not move the file position, so
any number of threads may scan the same descriptor.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

from ..errors import CorruptRecordError

HEADER_SIZE = 61
MIN_BATCH_LENGTH = 49
LOG_OVERHEAD = 12
# Bytes of header the walks need: up to and including last_offset_delta.
_PEEK = 27
_CHUNK = 4096
_I32_MAX = 2**31 - 1

_PEEK_FMT = struct.Struct(">qiib")  # base_offset, batch_length, leader_epoch, magic
_LOD = struct.Struct(">i")
_FULL = struct.Struct(">qiibIhiqqqhii")
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_TXN_FIELDS = struct.Struct(">h")  # attributes at 21
_PID = struct.Struct(">q")  # producer_id at 43


class _Reader:
    """Chunked pread cursor over [.., end) of a file descriptor."""

    __slots__ = ("fd", "end", "buf", "buf_pos")

    def __init__(self, fd: int, end: int) -> None:
        self.fd = fd
        self.end = end
        self.buf = b""
        self.buf_pos = 0

    def header(self, pos: int) -> tuple[int, int, int] | None:
        """(base_offset, batch_size, last_offset) of the batch at ``pos``, or None when the
        header is not wholly before ``end`` (or the file is shorter).

        Raises:
            CorruptRecordError: batch_length below the minimum or magic != 2.
        """
        if pos + _PEEK > self.end:
            return None
        rel = pos - self.buf_pos
        if rel < 0 or rel + _PEEK > len(self.buf):
            self.buf = os.pread(self.fd, min(_CHUNK, self.end - pos), pos)
            self.buf_pos = pos
            rel = 0
            if len(self.buf) < _PEEK:
                return None
        base, length = _checked_header(self.buf, rel, pos)
        (lod,) = _LOD.unpack_from(self.buf, rel + 23)
        return base, LOG_OVERHEAD + length, base + lod


def _checked_header(buf: Any, rel: int, pos: int) -> tuple[int, int]:
    """(base_offset, batch_length) of the batch header at ``buf[rel:]``, which lies at file
    position ``pos``. Raises CorruptRecordError on a bad length or magic."""
    base, length, _epoch, magic = _PEEK_FMT.unpack_from(buf, rel)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} has batch_length {length} < {MIN_BATCH_LENGTH}",
            position=pos,
        )
    if magic != 2:
        raise CorruptRecordError(f"batch at position {pos} has magic {magic}", position=pos)
    return base, length


def txn_batches(fd: int, start: int, end: int) -> list[tuple[int, int, int, bool]]:
    """The transactional and control batches among the whole batches in [start, end).

    Args:
        fd: the ``.log`` file; start: a batch boundary; end: the end of the region.

    Returns:
        (base_offset, last_offset, producer_id, is_control) of each batch whose attributes
        have the transactional or the control bit, in file order (empty for a region of
        plain batches).

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    out: list[tuple[int, int, int, bool]] = []
    pos = start
    while pos + HEADER_SIZE <= end:
        hdr = os.pread(fd, HEADER_SIZE, pos)
        if len(hdr) < HEADER_SIZE:
            break
        base, length = _checked_header(hdr, 0, pos)
        size = LOG_OVERHEAD + length
        if pos + size > end:
            break
        (attributes,) = _TXN_FIELDS.unpack_from(hdr, 21)
        if attributes & (_ATTR_TRANSACTIONAL | _ATTR_CONTROL):
            (lod,) = _LOD.unpack_from(hdr, 23)
            (pid,) = _PID.unpack_from(hdr, 43)
            out.append((base, base + lod, pid, bool(attributes & _ATTR_CONTROL)))
        pos += size
    return out


def batch_bounds(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The (base_offset, last_offset) of every whole batch in [start, end).

    Args:
        fd: the ``.log`` file; start: a batch boundary; end: the end of the region.

    Returns:
        [(base_offset, last_offset)] in file order (a share fetch's batch boundaries).

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    reader = _Reader(fd, end)
    out: list[tuple[int, int]] = []
    pos = start
    while (h := reader.header(pos)) is not None:
        base, size, last = h
        if pos + size > end:
            break
        out.append((base, last))
        pos += size
    return out


def search_for_offset(
    fd: int, start: int, end: int, target: int
) -> tuple[int, int, int, int] | None:
    """First batch in [start, end) whose last offset >= ``target``.

    Args:
        fd: the ``.log`` file; start: a batch boundary; end: the segment's size.

    Returns:
        (position, size, base_offset, last_offset) or None if no whole batch qualifies.

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    reader = _Reader(fd, end)
    pos = start
    while True:
        h = reader.header(pos)
        if h is None:
            return None
        base, size, last = h
        if pos + size > end:
            return None
        if last >= target:
            return pos, size, base, last
        pos += size


def scan_region(
    fd: int, start: int, end: int, max_bytes: int, max_offset: int, min_one_batch: bool,
    walk_from: int = -1,
) -> tuple[int, int]:
    """Extent of a read that starts at the batch boundary ``start``.

    Takes whole batches while the total stays <= ``max_bytes`` and each batch's last
    offset is < ``max_offset``; with ``min_one_batch`` the first batch is taken even when
    it alone exceeds ``max_bytes``. ``walk_from`` (a batch boundary >= start, from the
    offset index) lets the walk skip batches already known to qualify.

    Returns:
        (size, last_offset); last_offset is -1 when size is 0.
    """
    reader = _Reader(fd, end)
    pos = walk_from if walk_from > start else start
    last_offset = -1
    while True:
        h = reader.header(pos)
        if h is None:
            break
        _base, size, last = h
        if pos + size > end or last >= max_offset:
            break
        if pos + size - start > max_bytes and not (min_one_batch and pos == start):
            break
        last_offset = last
        pos += size
    if pos > start and last_offset < 0:
        # walk_from skipped every batch we took and the first one it saw did not qualify:
        # only a wrong index entry can do that.
        raise CorruptRecordError(f"walk from position {walk_from} (an index entry) skipped past the region that starts at {start}", position=walk_from)
    return pos - start, last_offset


def locate(
    fd: int, end: int, index: Any, target: int, max_bytes: int, max_offset: int,
    min_one_batch: bool, use_index: bool = True,
) -> tuple[int, int, int, int] | None:
    """The whole read path of one segment in one call (Log.read's hot path).

    Offset-index lookup for ``target``, header walk to the first batch whose last offset
    >= target, then the region's extent (whole batches within ``max_bytes``, each below
    the exclusive ``max_offset``, at least one with ``min_one_batch``) using
    ``index.walk_start`` to skip batches known to qualify.

    Args:
        use_index: False walks from position 0 (the fallback when an index entry turns out
            not to point at a batch).

    Returns:
        None if no batch in the segment reaches ``target``; else (position, size,
        first_base_offset, last_offset): size 0 (last_offset = -1) when the first batch
        is already at or past ``max_offset``, or does not fit and min_one_batch is off.

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    pos = index.lookup(target)[1] if use_index else 0
    reader = _Reader(fd, end)
    while True:
        h = reader.header(pos)
        if h is None:
            return None
        base, size, last = h
        if pos + size > end:
            return None
        if last >= target:
            break
        pos += size
    start, first_base = pos, base
    if last >= max_offset or (size > max_bytes and not min_one_batch):
        return start, 0, first_base, -1
    last_offset = last
    pos += size
    if pos - start + MIN_BATCH_LENGTH + LOG_OVERHEAD > max_bytes:
        return start, pos - start, first_base, last_offset
    walk = index.walk_start(start + max_bytes, max_offset) if use_index else 0
    if walk > pos:
        pos = walk
        last_offset = -2  # set by the walk (it always takes the batch at walk)
    while True:
        h = reader.header(pos)
        if h is None:
            break
        _b, size, last = h
        if pos + size > end or last >= max_offset or pos + size - start > max_bytes:
            break
        last_offset = last
        pos += size
    if last_offset == -2:
        raise CorruptRecordError(
            f"walk from position {walk} (an index entry) skipped past the region that starts "
            f"at {start}", position=walk,
        )
    return start, pos - start, first_base, last_offset


def recover_scan(
    buf: Any,
    end: int,
    base_offset: int,
    index_interval_bytes: int,
    offset_index: Any,
    time_index: Any,
    crc32c: Callable[..., int],
) -> tuple[int, int, int, int, int, str | None]:
    """Validate batches from position 0 of ``buf`` and rebuild both (empty) indexes.

    Args:
        buf: the segment bytes (mmap / bytes); end: how many bytes of it to scan.
        base_offset: the segment's base offset; every batch must lie in
            [base_offset, base_offset + 2**31 - 1] with offsets increasing.
        index_interval_bytes: index cadence (as on append).
        offset_index, time_index: truncated indexes to append to.
        crc32c: the CRC-32C function (``logcore.crc32c``).

    Returns:
        (valid_bytes, batch_count, next_offset, max_timestamp,
        shallow_offset_of_max_timestamp, error): the shallow offset is the last offset of the
        first batch holding max_timestamp (what the time index entries name, as Kafka's
        LogSegment.recover); ``error`` says why the scan stopped before ``end`` (None if it
        did not). next_offset is base_offset when no batch is valid; max_timestamp is -1.
    """
    mv = memoryview(buf)
    pos = 0
    count = 0
    next_offset = base_offset
    max_ts, offset_of_max_ts = -1, base_offset
    since_index = 0
    error: str | None = None
    try:
        while pos < end:
            if end - pos < HEADER_SIZE:
                error = f"truncated batch header at position {pos} ({end - pos} bytes left)"
                break
            (base, length, _epoch, magic, crc, _attrs, lod, _bts, max_t,
             _pid, _pep, _bseq, _n) = _FULL.unpack_from(mv, pos)
            if length < MIN_BATCH_LENGTH:
                error = f"batch_length {length} < {MIN_BATCH_LENGTH} at position {pos}"
                break
            size = LOG_OVERHEAD + length
            if size > end - pos:
                error = f"batch at position {pos} declares {size} bytes, {end - pos} left"
                break
            if magic != 2:
                error = f"magic {magic} at position {pos}"
                break
            actual = crc32c(mv[pos + 21 : pos + size])
            if actual != crc:
                error = f"CRC mismatch at position {pos}: stored {crc:#010x}, computed {actual:#010x}"
                break
            last = base + lod
            if lod < 0 or base < next_offset or last - base_offset > _I32_MAX:
                error = (
                    f"batch at position {pos} has offsets [{base}, {last}], expected them "
                    f"increasing from {next_offset} and within 2**31-1 of {base_offset}"
                )
                break
            if max_t > max_ts:
                max_ts, offset_of_max_ts = max_t, last
            if since_index > index_interval_bytes:
                if not offset_index.is_full():
                    offset_index.append(last, pos)
                if time_index.entries + 1 < time_index.max_entries:
                    time_index.append(max_ts, offset_of_max_ts)
                since_index = 0
            since_index += size
            next_offset = last + 1
            pos += size
            count += 1
    finally:
        mv.release()
    if pos < end and error is None:
        error = f"scan stopped at position {pos}"
    return pos, count, next_offset, max_ts, offset_of_max_ts, error
