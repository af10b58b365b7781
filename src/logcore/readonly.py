"""ReadOnlyLog: a partition directory read by a process that is not its writer.

A broker (or an embedded client) owns a partition directory: it holds the directory lock,
recovers it at open, appends, rolls, deletes old segments. ``Log`` is that owner. A
``ReadOnlyLog`` is the other side: an analytics job reading the same files, directly from
disk, while the owner may be running. It

- never takes the directory lock, never writes, renames or deletes a file, never maps a
  file (a mapping of a file the owner trims would kill the reader with SIGBUS: every read
  is a ``pread``, a short one is just the end);
- never recovers: it reads only what is complete. The end of the log it serves
  (``log_end_offset``) is the end of the last whole batch of the last segment whose CRC
  checks, found at open by walking the batch headers from the last offset-index entry.
  A batch the owner is writing at that moment is either not wholly in the file yet (its
  length runs past the file's end) or, in a preallocated segment, fails its CRC: it is
  left out. Records above ``log_end_offset`` are read by a later ``ReadOnlyLog``;
- takes ``max_offset`` (exclusive), an upper bound from the caller, typically a high
  watermark recorded on disk (Kafka's ``replication-offset-checkpoint``): with
  replication, records above the high watermark may still be truncated by the leader;
- starts at the largest of the first segment's base offset and the checkpointed log start
  offset (``log-start-offset-checkpoint`` in the partition directory, as a standalone
  ``Log`` keeps it, or in its parent, as Kafka keeps it per log directory).

Every segment's ``.log`` is opened at construction and stays open for the reader's life,
so segments the owner deletes meanwhile (retention) stay readable: a reader sees the
directory as it was when it was opened, cut at ``log_end_offset``. Open a new
``ReadOnlyLog`` to see what was appended since.

Indexes are read with ``pread`` too: an active segment's ``.index`` / ``.timeindex`` is
preallocated and zero past its last entry, so the searches first find the last non-zero
entry. An index entry only tells where a walk over batch headers may start; the walk
checks every header it reads, and a bad entry falls back to a walk from the segment's
start.

Thread-safety: ``read`` and ``offset_for_timestamp`` may run in any number of threads at
once. The object is immutable after construction but for one thing: a segment found to end
in zeros (see ``_ends_in_zeros``) has its end cut there, the same cut from whichever thread.
"""

from __future__ import annotations

import bisect
import os
import re
import struct

from . import RecordBatch, crc32c
from .append import TimestampOffset
from .checkpoint import LOG_START_OFFSET_CHECKPOINT, read_offset_checkpoint
from .errors import CorruptRecordError, LogDirError, OffsetOutOfRangeError
from .region import FileRegion, SharedFd
from .segment import HEADER, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, scan

__all__ = ["ReadOnlyLog"]

_LOG_NAME = re.compile(r"^(\d{20})\.log$")
_TOPIC_PARTITION = re.compile(r"^(.+)-(\d+)$")
_OFFSET_ENTRY = struct.Struct(">ii")   # relative_offset, position
_TIME_ENTRY = struct.Struct(">qi")     # timestamp, relative_offset
_LOG_OVERHEAD = 12                     # base_offset + batch_length
_MIN_BATCH_LENGTH = 49
_CRC_START = 21                        # the CRC covers attributes..end
_WALK_CHUNK = 1 << 16


class _Segment:
    """One ``.log`` file opened read-only; ``end`` is where its readable batches end."""

    __slots__ = ("base_offset", "file", "end", "path")

    def __init__(self, base_offset: int, file: SharedFd, end: int) -> None:
        self.base_offset = base_offset
        self.file = file
        self.end = end
        self.path = file.path

    def sibling(self, suffix: str) -> str:
        return self.path[: -len(LOG_SUFFIX)] + suffix


def _read_entry(fd: int, size: int, i: int, st: struct.Struct) -> tuple[int, int] | None:
    data = os.pread(fd, st.size, i * st.size)
    if len(data) < st.size:
        return None
    return st.unpack(data)  # type: ignore[return-value]


def _search_index(path: str, st: struct.Struct, target: int) -> tuple[int, int] | None:
    """The last entry of an index file whose first field (relative offset, or timestamp)
    is <= target, by pread binary searches.

    Entries past the last written one are zero (the file is preallocated while its
    segment is active): the written prefix is found first. An offset-index entry has a
    position > 0 (Kafka writes the first one after index.interval.bytes), a time-index
    entry is not all zero. None when no entry qualifies or the file is missing.
    """
    nonzero = _offset_written if st is _OFFSET_ENTRY else _time_written
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        lo, hi = 0, size // st.size  # written entries: [0, count)
        while lo < hi:
            mid = (lo + hi) // 2
            e = _read_entry(fd, size, mid, st)
            if e is not None and nonzero(e):
                lo = mid + 1
            else:
                hi = mid
        count = lo
        lo, hi, best = 0, count - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            e = _read_entry(fd, size, mid, st)
            if e is None:
                return best
            if e[0] <= target:
                best, lo = e, mid + 1
            else:
                hi = mid - 1
        return best
    finally:
        os.close(fd)


def _offset_written(e: tuple[int, int]) -> bool:
    return e[1] > 0


def _time_written(e: tuple[int, int]) -> bool:
    return e[0] != 0 or e[1] != 0


def _walk_tail(fd: int, start: int, size: int) -> tuple[int, int, int]:
    """Walk batch headers from the batch boundary ``start``: (end position, next offset,
    position of the last whole batch or -1). Stops at a header that is incomplete,
    zero (preallocated space), malformed, or whose batch runs past ``size``."""
    pos, next_offset, last_pos = start, -1, -1
    buf, buf_pos = b"", start
    while pos + HEADER.size <= size:
        rel = pos - buf_pos
        if rel < 0 or rel + HEADER.size > len(buf):
            buf = os.pread(fd, min(_WALK_CHUNK, size - pos), pos)
            buf_pos, rel = pos, 0
            if len(buf) < HEADER.size:
                break
        fields = HEADER.unpack_from(buf, rel)
        base, length, magic, last_delta = fields[0], fields[1], fields[3], fields[6]
        if length < _MIN_BATCH_LENGTH or magic != 2 or pos + _LOG_OVERHEAD + length > size:
            break
        last_pos = pos
        next_offset = base + last_delta + 1
        pos += _LOG_OVERHEAD + length
    return pos, next_offset, last_pos


def _position_hint(seg: _Segment, offset: int) -> int:
    """A batch boundary of ``seg`` at or before the batch holding ``offset`` (from the
    offset index; 0 without a usable entry)."""
    hint = _search_index(seg.sibling(INDEX_SUFFIX), _OFFSET_ENTRY, offset - seg.base_offset)
    return hint[1] if hint is not None and hint[1] < seg.end else 0


def _last_position(index_path: str, end: int) -> int:
    """The position of the last offset-index entry below ``end`` (0 without one)."""
    hint = _search_index(index_path, _OFFSET_ENTRY, 2**31 - 1)
    return hint[1] if hint is not None and hint[1] < end else 0


def _ends_in_zeros(seg: _Segment, exc: CorruptRecordError) -> bool:
    """Whether a scan of ``seg`` failed on zeros rather than a bad batch, and if so cut the
    segment's end there.

    A segment listed while it was still the owner's preallocated active segment, and
    rolled before it was trimmed, is longer on disk than its batches: zeros follow them.
    The scans take a zero header for corruption; here it is the segment's end. (Cutting
    ``end`` is the only change a ReadOnlyLog makes after construction, and any thread
    that makes it makes the same one.)
    """
    at = exc.position
    if at is None or at >= seg.end:
        return False
    if os.pread(seg.file.fd, _LOG_OVERHEAD, at) != bytes(_LOG_OVERHEAD):
        return False
    seg.end = at
    return True


def _search_for_offset(seg: _Segment, start: int, target: int
                       ) -> tuple[int, int, int, int] | None:
    try:
        return scan.search_for_offset(seg.file.fd, start, seg.end, target)
    except CorruptRecordError as exc:
        if not _ends_in_zeros(seg, exc):
            raise
    return scan.search_for_offset(seg.file.fd, start, seg.end, target)


def _scan_region(seg: _Segment, pos: int, max_bytes: int, max_offset: int) -> tuple[int, int]:
    try:
        return scan.scan_region(seg.file.fd, pos, seg.end, max_bytes, max_offset, True)
    except CorruptRecordError as exc:
        if not _ends_in_zeros(seg, exc):
            raise
    return scan.scan_region(seg.file.fd, pos, seg.end, max_bytes, max_offset, True)


def _crc_ok(fd: int, pos: int, size: int) -> bool:
    data = os.pread(fd, size, pos)
    if len(data) < size:
        return False
    return crc32c(memoryview(data)[_CRC_START:]) == struct.unpack_from(">I", data, 17)[0]


class ReadOnlyLog:
    """Read-only view of one partition directory (see the module docstring).

    Args:
        directory: the partition directory (``<topic>-<partition>``).
        max_offset: exclusive upper bound on the offsets served (e.g. a recorded high
            watermark); None: the end of the last complete batch.

    Raises:
        LogDirError: the directory does not exist or cannot be read.

    Thread-safe (immutable after construction).
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_offset: int | None = None
                 ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self._segments: list[_Segment] = []
        try:
            names = os.listdir(self.directory)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot read log dir {self.directory}: "
                              f"{exc.strerror}") from exc
        bases = sorted(int(m.group(1)) for m in map(_LOG_NAME.match, names) if m)
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        for base in bases:
            path = os.path.join(self.directory, f"{base:020d}{LOG_SUFFIX}")
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:
                # Deleted by retention between the listing and the open: only segments
                # older than every one opened so far can go, so this one is below them.
                continue
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot open segment {path}: {exc.strerror}"
                                  ) from exc
            file = SharedFd(fd, path)
            self._segments.append(_Segment(base, file, os.fstat(fd).st_size))
        self._bases = [s.base_offset for s in self._segments]
        end = self._find_end()
        if max_offset is not None and max_offset < end:
            end = max(max_offset, self._bases[0] if self._bases else 0)
        self._log_end_offset = end
        start = self._bases[0] if self._bases else end
        self._log_start_offset = min(max(start, self._checkpointed_start()), end)

    # --- construction ----------------------------------------------------------------------

    def _find_end(self) -> int:
        """The offset after the last complete batch of the last segment; trims that
        segment's ``end`` to the position after it."""
        if not self._segments:
            return 0
        seg = self._segments[-1]
        fd = seg.file.fd
        start = _last_position(seg.sibling(INDEX_SUFFIX), seg.end)
        end_pos, next_offset, last_pos = _walk_tail(fd, start, seg.end)
        if start and last_pos < 0 and end_pos == start:
            # The index entry does not point at a batch: walk the whole segment.
            end_pos, next_offset, last_pos = _walk_tail(fd, 0, seg.end)
        if last_pos >= 0 and not _crc_ok(fd, last_pos, end_pos - last_pos):
            # A batch still being written into preallocated space: end before it.
            end_pos, next_offset, last_pos = _walk_tail(fd, start if start < last_pos else 0,
                                                        last_pos)
        seg.end = end_pos
        if next_offset < 0:
            # No batch in the last segment: the log ends at its base offset, unless an
            # earlier segment ends past it (never for a log its owner keeps consistent).
            return seg.base_offset
        return next_offset

    def _checkpointed_start(self) -> int:
        name = os.path.basename(self.directory)
        m = _TOPIC_PARTITION.match(name)
        found = -1
        for path in (os.path.join(self.directory, LOG_START_OFFSET_CHECKPOINT),
                     os.path.join(os.path.dirname(self.directory), LOG_START_OFFSET_CHECKPOINT)):
            try:
                entries = read_offset_checkpoint(path)
            except (CorruptRecordError, OSError):
                continue  # a checkpoint being replaced or unreadable: the segments decide
            if not entries:
                continue
            if m is not None and (m.group(1), int(m.group(2))) in entries:
                found = max(found, entries[(m.group(1), int(m.group(2)))])
            elif path.startswith(self.directory) and len(entries) == 1:
                found = max(found, next(iter(entries.values())))
        return found

    # --- public -----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first offset served."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """One past the last offset served (the end of the last complete batch, or
        ``max_offset``)."""
        return self._log_end_offset

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> FileRegion:
        """A region of whole batches starting with the batch that holds ``offset``, as
        ``Log.read`` answers (the first batch is returned even when larger than
        ``max_bytes``; no batch reaching ``max_offset`` or ``log_end_offset``).

        Raises:
            OffsetOutOfRangeError: offset outside [log_start_offset, log_end_offset].
            CorruptRecordError: a malformed batch header below the end.
        """
        leo, lso = self._log_end_offset, self._log_start_offset
        if offset < lso or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{lso}, {leo}] of {self.directory}",
                offset=offset, log_start_offset=lso, log_end_offset=leo)
        if max_offset is None or max_offset > leo:
            max_offset = leo
        if offset >= max_offset or max_bytes < 0:
            return FileRegion(None, 0, 0, offset, offset - 1)
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while i < len(self._segments):
            seg = self._segments[i]
            i += 1
            start = 0
            if offset > seg.base_offset:
                start = _position_hint(seg, offset)
            try:
                found = _search_for_offset(seg, start, offset)
            except CorruptRecordError:
                if start == 0:
                    raise
                found = _search_for_offset(seg, 0, offset)
            if found is None:
                continue
            pos, _size, base, _last = found
            rsize, rlast = _scan_region(seg, pos, max_bytes, max_offset)
            if rsize == 0:
                break
            return FileRegion(seg.file, pos, rsize, base, rlast)
        return FileRegion(None, 0, 0, offset, offset - 1)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """The first record at or after ``timestamp_ms`` (ListOffsets by time), below
        ``log_end_offset``; -2 asks for the log start offset, -1 for the end (timestamp -1
        in both answers). None when every record is older."""
        if timestamp_ms == -2:
            return TimestampOffset(self._log_start_offset, -1)
        if timestamp_ms == -1:
            return TimestampOffset(self._log_end_offset, -1)
        lso, leo = self._log_start_offset, self._log_end_offset
        first = max(bisect.bisect_right(self._bases, lso) - 1, 0)
        for seg in self._segments[first:]:
            if seg.base_offset >= leo:
                break
            pos = 0
            hint = _search_index(seg.sibling(TIME_INDEX_SUFFIX), _TIME_ENTRY, timestamp_ms)
            from_offset = max(lso, seg.base_offset + hint[1] if hint is not None else lso)
            if from_offset > seg.base_offset:
                pos = _position_hint(seg, from_offset)
            found = self._search_timestamp(seg, pos, timestamp_ms, from_offset)
            if found is not None:
                return found
        return None

    def _search_timestamp(self, seg: _Segment, pos: int, timestamp_ms: int, start_offset: int
                          ) -> TimestampOffset | None:
        """Kafka's ``FileRecords.searchForTimestamp`` from a batch boundary, below the end."""
        fd, end, leo = seg.file.fd, seg.end, self._log_end_offset
        while pos + HEADER.size <= end:
            hdr = os.pread(fd, HEADER.size, pos)
            if len(hdr) < HEADER.size:
                return None
            fields = HEADER.unpack(hdr)
            size = _LOG_OVERHEAD + fields[1]
            if fields[1] < _MIN_BATCH_LENGTH or pos + size > end:
                return None
            if fields[0] >= leo:
                return None
            if fields[8] >= timestamp_ms and fields[0] + fields[6] >= start_offset:
                data = os.pread(fd, size, pos)
                for rec in RecordBatch(data):
                    if rec.offset >= leo:
                        return None
                    if rec.timestamp >= timestamp_ms and rec.offset >= start_offset:
                        return TimestampOffset(rec.offset, rec.timestamp)
            pos += size
        return None

    def close(self) -> None:
        """Drop the segment descriptors (regions already cut keep theirs open)."""
        self._segments = []
        self._bases = []

    def __enter__(self) -> ReadOnlyLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ReadOnlyLog({self.directory!r}, offsets=[{self._log_start_offset}, "
                f"{self._log_end_offset}), segments={len(self._bases)})")
