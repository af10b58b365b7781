"""The read side of a Log: ``read`` (a region of whole batches) and ``offset_for_timestamp``.

Kafka's ``LogSegment.read`` / ``translateOffset`` and ``findOffsetByTimestamp``: binary
search over the segment list, an offset-index lookup, then a walk over batch headers (with
``pread``) to the first batch holding the offset; the answer is a
:class:`~logcore.region.FileRegion` cut on batch boundaries, sent later with ``sendfile``.

Thread-safety: no lock, ever. A read works on one immutable snapshot of the segment list
(``Log._snapshot``) and reads each segment's ``size`` once; the writer publishes a new
segment list before the offsets that live in it and a segment's size only after its
bytes are in the file, so a reader never sees a partial batch. A read marks the segments
it uses ``touched`` so that ``Log.release_idle_indexes`` leaves their mappings alone.
A segment the cleaner, retention or a truncation removes is marked ``deleted`` before its
files are renamed ``.deleted`` (a read of an older list maps those), and its files are
unlinked only after the list without it is published (:mod:`logcore.segment_files`): a
read that finds them gone reads the newer list.
"""

from __future__ import annotations

import bisect
import os
import threading
from typing import Any

from . import RecordBatch
from .append import TimestampOffset
from .errors import CorruptRecordError, LogcoreError, LogDirError, OffsetOutOfRangeError
from .region import FileRegion
from .segment import HEADER, LogSegment, scan

_bisect_right = bisect.bisect_right
_locate = scan.locate
_txn_batches = scan.txn_batches
_batch_bounds = scan.batch_bounds
_HEADER = HEADER


class LogReads:
    """Mixin of :class:`logcore.log.Log`: its lock-free readers."""

    directory: str
    _closed: bool
    _log_end_offset: int
    _log_start_offset: int
    _snapshot: Any
    _lock: threading.RLock

    def _check_open(self) -> None:
        if self._closed:
            raise LogcoreError(f"log {self.directory} is closed")

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FileRegion:
        """A region of whole batches starting with the batch that holds ``offset``.

        Args:
            offset: the first offset wanted; the region may begin with earlier offsets
                of the same batch (clients skip them, as with Kafka).
            max_bytes: size limit; batches are never cut.
            max_offset: exclusive upper bound (the high watermark): no batch whose last
                offset is >= max_offset is included. Defaults to log_end_offset.
            min_one_batch: return the first batch even if it exceeds max_bytes.

        Returns:
            A :class:`FileRegion` (empty at log_end_offset or when nothing fits).

        Raises:
            OffsetOutOfRangeError: offset < log_start_offset or > log_end_offset.

        Thread-safe with respect to the writer and other readers (takes no lock).
        """
        if self._closed:
            raise LogcoreError(f"log {self.directory} is closed")
        # The log end offset first, then the snapshot: the writer publishes a new segment
        # list before the offsets that live in it, so this view holds every offset < leo.
        leo = self._log_end_offset
        view = self._snapshot
        lso = self._log_start_offset
        if offset < lso or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{lso}, {leo}] of {self.directory}",
                offset=offset, log_start_offset=lso, log_end_offset=leo,
            )
        if max_offset is None or max_offset > leo:
            max_offset = leo
        if offset >= max_offset or max_bytes < 0:
            return FileRegion(None, 0, 0, offset, offset - 1)
        segments = view.segments
        i = _bisect_right(view.bases, offset) - 1
        if i < 0:
            i = 0
        locate = _locate
        while i < len(segments):
            seg = segments[i]
            seg.touched = True  # keeps its index mapped (see release_idle_indexes)
            idx = seg._offset_index
            if idx is None:
                try:
                    idx = seg.offset_index
                except LogDirError:
                    if not seg.deleted:
                        raise
                    # The cleaner or retention replaced this segment after this read took its
                    # view, and its files are gone (file.delete.delay.ms=0): the list without
                    # it was published before the unlink, read that one (rare path).
                    if self._snapshot is view:
                        raise
                    return self.read(offset, max_bytes, max_offset=max_offset,
                                     min_one_batch=min_one_batch)
            try:
                found = locate(seg.fd, seg.size, idx, offset, max_bytes,
                               max_offset, min_one_batch)
            except CorruptRecordError:
                # An index entry that does not point at a batch (a scribbled index that
                # passed the open-time checks): walk the segment from its start instead.
                try:
                    found = locate(seg.fd, seg.size, idx, offset, max_bytes,
                                   max_offset, min_one_batch, False)
                except CorruptRecordError as exc:
                    raise CorruptRecordError(
                        f"{exc} in {seg.file.path}", position=exc.position, path=seg.file.path
                    ) from exc
            if found is None:
                i += 1
                continue
            pos, rsize, base, rlast = found
            if rsize == 0:
                return FileRegion(None, 0, 0, offset, offset - 1)
            return FileRegion(seg.file, pos, rsize, base, rlast)
        return FileRegion(None, 0, 0, offset, offset - 1)

    @staticmethod
    def txn_batches(region: FileRegion) -> list[tuple[int, int, int, bool]]:
        """The transactional and control batches of a region ``read`` returned.

        Returns:
            [(base_offset, last_offset, producer_id, is_control)] in offset order; empty
            for an empty region or one of plain batches. A share group's read leaves the
            control batches (transaction markers) out, and under read_committed the data
            batches of aborted transactions (with :meth:`aborted_transactions`).

        Raises:
            CorruptRecordError: a batch header with a bad length or magic.

        Thread-safe: reads the headers with ``pread`` through the region's own descriptor.
        """
        if not region.size:
            return []
        return _txn_batches(region.fileno, region.position, region.position + region.size)

    @staticmethod
    def batch_bounds(region: FileRegion) -> list[tuple[int, int]]:
        """The (base_offset, last_offset) of each batch of a region ``read`` returned, in
        offset order: where a share fetch may cut its acquisitions (KIP-1206's
        batch-optimized mode). Empty for an empty region.

        Raises:
            CorruptRecordError: a batch header with a bad length or magic.

        Thread-safe: reads the headers with ``pread`` through the region's own descriptor.
        """
        if not region.size:
            return []
        return _batch_bounds(region.fileno, region.position, region.position + region.size)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """First record whose timestamp is >= ``timestamp_ms`` (ListOffsets by time).

        Special values as in ListOffsets: -2 earliest (log_start_offset), -1 latest
        (log_end_offset), -3 the record with the largest timestamp. Those return
        timestamp -1 for earliest/latest.

        Returns:
            (offset, timestamp) or None if every record is older.
        """
        self._check_open()
        view = self._snapshot
        lso = self._log_start_offset
        if timestamp_ms == -2:
            return TimestampOffset(lso, -1)
        if timestamp_ms == -1:
            return TimestampOffset(self._log_end_offset, -1)
        if timestamp_ms == -3:
            return self._max_timestamp_offset(view.segments)
        for i, seg in enumerate(view.segments):
            if i + 1 < len(view.segments) and view.segments[i + 1].base_offset <= lso:
                continue
            if not seg.writable and seg.max_timestamp < 0:
                seg.load_max_timestamp()
            seg.touched = True
            if seg.max_timestamp < timestamp_ms and seg.max_timestamp >= 0:
                continue
            # Kafka's LogSegment.findOffsetByTimestamp: the time index entry only says
            # where to start (its offset is the last offset of a batch, or, in a segment
            # pylog wrote before it followed Kafka there, a record inside one: the offset
            # index lookup lands at or before that batch either way); records are then
            # filtered by the log start offset alone.
            _ts, idx_offset = seg.time_index.lookup(timestamp_ms)
            _o, pos = seg.offset_index.lookup(max(idx_offset, lso))
            found = self._search_timestamp(seg, pos, timestamp_ms, lso)
            if found is not None:
                return found
        return None

    def _max_timestamp_offset(self, segments: Any) -> TimestampOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3, KIP-734): the first record holding the largest
        timestamp of the log, with its own offset.

        The segment's time index keeps Kafka's shallow offset (the last offset of the first
        batch holding its largest timestamp); as Kafka does since KAFKA-16310, the record
        is found by reading from that batch's indexed position. Every batch before that
        batch in the segment has a smaller largest timestamp, so the first record at or
        above the timestamp from there is the one. A largest timestamp that no record holds
        any more (a batch the cleaner emptied keeps its header) answers with the batch's
        last offset.
        """
        best: LogSegment | None = None
        for seg in segments:
            if seg.max_timestamp < 0 and not seg.writable:
                seg.load_max_timestamp()
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        # The offset before the timestamp: the writer sets the timestamp first, so the
        # offset read is never newer than the timestamp (a stale one only starts the walk
        # at an earlier batch).
        shallow = best.shallow_offset_of_max_timestamp
        ts = best.max_timestamp
        best.touched = True
        _o, pos = best.offset_index.lookup(shallow)
        found = self._search_timestamp(best, pos, ts, best.base_offset)
        return found if found is not None else TimestampOffset(shallow, ts)

    @staticmethod
    def _search_timestamp(
        seg: LogSegment, pos: int, timestamp_ms: int, start_offset: int
    ) -> TimestampOffset | None:
        """Kafka's ``FileRecords.searchForTimestamp`` from a batch boundary."""
        fd, end = seg.file.fd, seg.size
        while pos + _HEADER.size <= end:
            hdr = os.pread(fd, _HEADER.size, pos)
            if len(hdr) < _HEADER.size:
                return None
            fields = _HEADER.unpack(hdr)
            size = 12 + fields[1]
            if fields[8] >= timestamp_ms and fields[0] + fields[6] >= start_offset:
                data = os.pread(fd, size, pos)
                if len(data) < size:
                    return None
                try:
                    for rec in RecordBatch(data):
                        if rec.timestamp >= timestamp_ms and rec.offset >= start_offset:
                            return TimestampOffset(rec.offset, rec.timestamp)
                except CorruptRecordError as exc:
                    raise CorruptRecordError(
                        f"{exc} (batch at position {pos} of {seg.file.path})",
                        position=pos, path=seg.file.path,
                    ) from exc
            pos += size
        return None
