"""LogSegment: one ``.log`` file of a partition and its two indexes (Kafka's ``LogSegment``).

A segment is named by its base offset (20 digits, zero-padded)::

    00000000000000368769.log        record batches, appended strictly sequentially
    00000000000000368769.index      offset index (8-byte entries, mmapped, sparse)
    00000000000000368769.timeindex  time index (12-byte entries, mmapped, sparse)
    00000000000000368769.txnindex   aborted transactions (34-byte entries; only when the
                                    segment holds an ABORT marker, logcore.txn_index)

Indexes are mapped lazily (Kafka's ``LazyIndex``): a segment opened from disk maps an
index the first time a read, a timestamp search or a recovery needs it, and
``release_indexes`` unmaps them again when the log finds them idle (see
``Log.release_idle_indexes``). So a log with thousands of old segments holds mappings only
for its active segment and the few segments being read. The ``.log`` descriptor stays
open for the segment's life (regions cut from it hold it, see :mod:`logcore.region`).

Durability: ``append`` writes to the page cache only; ``flush`` fsyncs the data and both
index files. Index files are fsynced through a fresh descriptor instead of ``msync`` on the
mapping: on Linux fsync writes back the dirty pages of a shared mapping too, it releases
the GIL, and it never touches a mapping that another thread may be resizing or unmapping.

Thread-safety: created and mutated by the owning Log's writer (under the log's lock);
readers read ``size`` once per operation (it grows only after the bytes are in the file)
and use the indexes, whose methods are atomic. ``flush`` may run on any thread without the
log's lock; it holds its own reference to the file so a concurrent close cannot pull the
descriptor away.
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import struct
import threading
from collections.abc import Callable
from typing import Any

from . import IMPLEMENTATION, crc32c
from .config import LogConfig
from .errors import CorruptRecordError, LogDirError
from .region import SharedFd
from .txn_index import TransactionIndex

if IMPLEMENTATION == "python":
    from ._ref import segment as scan
    from ._ref.index import OffsetIndex, TimeIndex
else:
    from . import _segment as scan  # type: ignore[no-redef]
    from ._index import OffsetIndex, TimeIndex  # type: ignore[no-redef,assignment]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte RecordBatch v2 header


def filename_prefix(offset: int) -> str:
    """Kafka's ``filenamePrefixFromOffset``: the offset as 20 zero-padded digits."""
    return f"{offset:020d}"


def fsync_path(path: str) -> None:
    """fsync a file by name (its dirty mmapped pages included); a missing file is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LogSegment:
    """One ``.log`` file and its two indexes.

    Created by the Log; not part of the public API. Its mutable fields are written only
    by the log's writer; readers read ``size`` once per operation (it grows after the
    bytes are in the file) and use the indexes, whose methods are atomic.
    """

    __slots__ = (
        "directory",
        "base_offset",
        "config",
        "file",
        "size",
        "_offset_index",
        "_time_index",
        "_index_lock",
        "touched",
        "index_dirty",
        "writable",
        "max_timestamp",
        "shallow_offset_of_max_timestamp",
        "bytes_since_last_index_entry",
        "created_ms",
        "rolling_based_timestamp",
        "roll_jitter_ms",
        "roll_after_ms",
        "index_full",
        "index_interval",
        "fd",
        "deleted",
        "txn_index",
    )

    def __init__(
        self, directory: str, base_offset: int, config: LogConfig, *, created_ms: int,
        writable: bool, create: bool,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.writable = writable
        self.deleted = False
        path = self.path(LOG_SUFFIX)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot open segment {path}: {exc.strerror}") from exc
        self.file = SharedFd(fd, path)
        self.fd = fd  # valid as long as self.file is
        self.index_interval = config.index_interval_bytes
        self.size = os.fstat(fd).st_size
        if create and config.preallocate and hasattr(os, "posix_fallocate"):
            # Kafka's `preallocate`: reserve the whole segment now; seal()/close() trim it.
            try:
                os.posix_fallocate(fd, 0, config.segment_bytes)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise LogDirError(
                        exc.errno, f"cannot preallocate {path}: {exc.strerror}"
                    ) from exc
                # The filesystem cannot reserve space: carry on without (an optimisation).
        self._offset_index: Any = None
        self._time_index: Any = None
        # Creating a mapping races with readers on other threads; the lock makes it once.
        self._index_lock = threading.Lock()
        # Set by every read that uses the indexes, cleared by Log.release_idle_indexes:
        # a segment found untouched twice in a row has its mappings released.
        self.touched = False
        # Index files changed since their last fsync (flush skips clean ones: a clean
        # open of many segments must not cost three fsyncs per segment at close).
        self.index_dirty = create
        # Kafka's maxTimestampAndOffsetSoFar: the largest record timestamp and the last
        # offset of the first batch holding it (what the time index stores; the record's
        # own offset is found by reading that batch, see LogReads.offset_for_timestamp).
        self.max_timestamp = -1
        self.shallow_offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self.created_ms = created_ms
        self.rolling_based_timestamp: int | None = None
        jitter = config.segment_jitter_ms
        self.roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter else 0
        self.roll_after_ms = config.segment_ms - self.roll_jitter_ms
        # Set when either index has no room left for another entry pair (a roll is due).
        self.index_full = False
        #: Aborted transactions whose ABORT marker is in this segment (``.txnindex``,
        #: created with the first entry).
        self.txn_index = TransactionIndex(self.path(TXN_INDEX_SUFFIX))

    def path(self, suffix: str) -> str:
        return os.path.join(self.directory, filename_prefix(self.base_offset) + suffix)

    def set_config(self, config: LogConfig) -> None:
        """A changed log config: the roll deadline and index cadence follow it."""
        self.config = config
        self.index_interval = config.index_interval_bytes
        self.roll_jitter_ms = min(self.roll_jitter_ms, max(config.segment_ms - 1, 0))
        self.roll_after_ms = config.segment_ms - self.roll_jitter_ms

    # --- indexes (mapped lazily, as Kafka's LazyIndex) ---
    def _open_index(self, kind: type, suffix: str) -> Any:
        path = self.path(suffix)
        if self.deleted:
            # A reader of an older segment list: the files were renamed, and a segment
            # the cleaner wrote may own the old name now (never map its index here).
            path += DELETED_SUFFIX
        try:
            return kind(path, self.base_offset,
                        self.config.segment_index_bytes if self.writable else -1, self.writable)
        except OSError as exc:
            if isinstance(exc, LogDirError):
                raise
            raise LogDirError(exc.errno, f"cannot open index {self.path(suffix)}: "
                                         f"{exc.strerror or exc}") from exc

    @property
    def offset_index(self) -> Any:
        idx = self._offset_index
        if idx is None:
            with self._index_lock:
                idx = self._offset_index
                if idx is None:
                    idx = self._offset_index = self._open_index(OffsetIndex, INDEX_SUFFIX)
                    if not self.writable and not self._index_sane(idx):
                        self._rebuild_indexes()
                        idx = self._offset_index
        return idx

    @property
    def time_index(self) -> Any:
        idx = self._time_index
        if idx is None:
            with self._index_lock:
                idx = self._time_index
                if idx is None:
                    idx = self._time_index = self._open_index(TimeIndex, TIME_INDEX_SUFFIX)
                    if not self.writable and not self._index_sane(idx):
                        self._rebuild_indexes()
                        idx = self._time_index
        return idx

    def _index_sane(self, idx: Any) -> bool:
        # The open checks only the indexes above the recovery point; an older one is
        # checked here, the first time it is mapped (a scribbled index must not send a
        # read to the wrong batch).
        try:
            idx.sanity_check(self.size)
        except CorruptRecordError:
            return False
        return True

    def _rebuild_indexes(self) -> None:
        """Rebuild both indexes of an inactive segment from its data (a lazily opened
        index failed its check). Caller holds ``_index_lock``. The data below the
        recovery point is not cut: a corrupt batch there fails the reads that reach it."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()
        size = self.config.segment_index_bytes
        oi = OffsetIndex(self.path(INDEX_SUFFIX), self.base_offset, size, True)
        ti = TimeIndex(self.path(TIME_INDEX_SUFFIX), self.base_offset, size, True)
        for idx in (oi, ti):
            idx.truncate()
            idx.resize(size)
        if self.size:
            with mmap.mmap(self.file.fd, self.size, access=mmap.ACCESS_READ) as mm:
                _v, _c, _n, max_ts, off_max, _e = scan.recover_scan(
                    mm, self.size, self.base_offset, self.config.index_interval_bytes, oi, ti,
                    crc32c,
                )
            if max_ts >= 0:
                ti.append(max_ts, off_max, True)
        oi.trim_to_valid_size()
        ti.trim_to_valid_size()
        self._offset_index, self._time_index = oi, ti
        self.index_dirty = True

    @property
    def mapped_indexes(self) -> int:
        """How many of the two indexes are open (mapped) now."""
        return (self._offset_index is not None) + (self._time_index is not None)

    def release_indexes(self) -> int:
        """Unmap both indexes of an inactive segment; returns how many were open.

        The next read maps them again. A reader still holding an index object it fetched
        before sees an empty index and walks the segment from its start (correct, slower).
        """
        if self.writable:
            return 0
        released = 0
        with self._index_lock:
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close()
                    released += 1
            self._offset_index = self._time_index = None
        return released

    def load_max_timestamp(self) -> None:
        """Largest timestamp from the time index's last entry (Kafka does the same).

        An inactive segment whose time index was not mapped is unmapped again afterwards:
        retention and ListOffsets ask this of every old segment, and keeping those
        mappings would defeat the lazy opening.
        """
        was_open = self._time_index is not None
        ts, off = self.time_index.last_entry()
        self.max_timestamp, self.shallow_offset_of_max_timestamp = ts, off
        if not was_open and not self.writable:
            with self._index_lock:
                idx, self._time_index = self._time_index, None
            if idx is not None:
                idx.close()

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (-1: none or empty; Kafka's
        ``getFirstBatchTimestamp``, for ``max.compaction.lag.ms``)."""
        try:
            hdr = os.pread(self.fd, HEADER.size, 0)
        except OSError:
            return -1
        return HEADER.unpack(hdr)[8] if len(hdr) == HEADER.size else -1

    def largest_timestamp(self) -> int:
        """For retention: the newest record timestamp, or the file mtime if none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.file.path).st_mtime * 1000)
        except OSError:
            return 0

    # --- writer side ---
    def append(self, buf: Any, size: int, info: Any) -> None:
        """Write ``buf`` at the end of the file (one pwrite) and maybe add index entries.

        The active segment always has both indexes open (``Log`` makes sure), so this
        uses them directly; ``size`` is published only once the bytes are in the file.

        Raises:
            LogDirError: the write failed (ENOSPC, EIO, ...): nothing changed — ``size``,
                the indexes and the timestamps are as before. Bytes a short write left
                past ``size`` are cut off when possible; if not, the next append writes
                over them (it writes at ``size``) and a recovery truncates them.
        """
        pos = self.size
        fd = self.fd
        try:
            n = os.pwrite(fd, buf, pos)
            while n < size:  # short writes happen only on errors like ENOSPC; finish or fail
                with memoryview(buf) as view:
                    n += os.pwrite(fd, view[n:size], pos + n)
        except OSError as exc:
            try:
                os.ftruncate(fd, pos)
            except OSError:
                pass  # the tail past `size` is overwritten or recovered, see above
            raise LogDirError(
                exc.errno, f"cannot append {size} bytes to {self.file.path} at position "
                f"{pos}: {exc.strerror}", path=self.file.path, position=pos,
            ) from exc
        self.size = pos + size
        max_ts = info.max_timestamp
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.shallow_offset_of_max_timestamp = info.shallow_offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.index_interval:
            oi, ti = self._offset_index, self._time_index
            oi.append(info.last_offset, pos)
            ti.append(self.max_timestamp, self.shallow_offset_of_max_timestamp)
            self.index_dirty = True
            self.bytes_since_last_index_entry = size
            # Keep one time-index slot for the final entry written when the segment seals.
            self.index_full = oi.is_full() or ti.entries + 1 >= ti.max_entries
        else:
            self.bytes_since_last_index_entry += size

    def seal(self) -> None:
        """The segment stops being active: final time-index entry, trim both indexes
        (and the file itself when it was preallocated)."""
        if self.config.preallocate:
            try:
                if os.fstat(self.file.fd).st_size != self.size:
                    os.ftruncate(self.file.fd, self.size)
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot trim {self.file.path}") from exc
        ti = self.time_index
        self.index_dirty = True
        if self.max_timestamp >= 0:
            ti.append(self.max_timestamp, self.shallow_offset_of_max_timestamp, True)
        ti.trim_to_valid_size()
        self.offset_index.trim_to_valid_size()
        self.writable = False

    def unseal(self) -> None:
        """Become active again (after a truncation or at load): regrow the indexes.

        An index mapped read-only while the segment was inactive is reopened read-write.
        """
        if not self.writable:
            self.writable = True
            with self._index_lock:
                for idx in (self._offset_index, self._time_index):
                    if idx is not None and not idx.writable:
                        idx.close()
                if self._offset_index is not None and not self._offset_index.writable:
                    self._offset_index = None
                if self._time_index is not None and not self._time_index.writable:
                    self._time_index = None
        oi, ti = self.offset_index, self.time_index
        self.index_dirty = True
        oi.resize(self.config.segment_index_bytes)
        ti.resize(self.config.segment_index_bytes)
        self.index_full = oi.is_full() or ti.entries + 1 >= ti.max_entries

    def read_next_offset(self) -> int:
        """Offset after the last batch: last index entry, then walk headers to the end."""
        off, pos = self.offset_index.lookup(2**63 - 1)
        nxt = self.base_offset
        end = self.size
        while True:
            found = scan.search_for_offset(self.file.fd, pos, end, -1)
            if found is None:
                return nxt
            p, sz, _base, last = found
            nxt = last + 1
            pos = p + sz

    def recover(self, crc: Callable[..., int]) -> tuple[int, int, str | None]:
        """Rebuild indexes from the data, truncating at the first invalid batch.

        Time index entries name the last offset of the first batch holding the largest
        timestamp so far (Kafka's ``batch.lastOffset()``), closed by the final entry.

        Returns (truncated_bytes, next_offset, error).
        """
        if not self.writable:
            # Rebuilding needs writable indexes; the caller seals the segment again.
            self.unseal()
        oi, ti = self.offset_index, self.time_index
        self.index_dirty = True
        oi.truncate()
        ti.truncate()
        oi.resize(self.config.segment_index_bytes)
        ti.resize(self.config.segment_index_bytes)
        end = self.size
        if end == 0:
            valid, nxt, max_ts, off_max, error = 0, self.base_offset, -1, self.base_offset, None
        else:
            with mmap.mmap(self.file.fd, end, access=mmap.ACCESS_READ) as mm:
                valid, _count, nxt, max_ts, off_max, error = scan.recover_scan(
                    mm, end, self.base_offset, self.config.index_interval_bytes, oi, ti, crc
                )
        truncated = end - valid
        if truncated:
            try:
                os.ftruncate(self.file.fd, valid)
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot truncate {self.file.path}") from exc
            self.size = valid
        if max_ts >= 0:
            # As Kafka's LogSegment.recover: the entry a clean close leaves (the largest
            # timestamp and its batch), so that the index's last entry is the segment's
            # largest timestamp, which a later open reads back (load_max_timestamp).
            ti.append(max_ts, off_max, True)
        self.max_timestamp, self.shallow_offset_of_max_timestamp = max_ts, off_max
        self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        return truncated, nxt, error

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns bytes removed."""
        _off, pos = self.offset_index.lookup(offset)
        found = scan.search_for_offset(self.file.fd, pos, self.size, offset)
        if found is None:
            return 0
        new_size, _sz, cut, _last = found
        removed = self.size - new_size
        # Cut the indexes at the first removed batch's base offset (<= offset): nothing
        # indexed at or after it survives.
        self.offset_index.truncate_to(cut)
        self.time_index.truncate_to(cut)
        self.index_dirty = True
        os.ftruncate(self.file.fd, new_size)
        self.size = new_size
        self.txn_index.truncate_to(cut)
        self.load_max_timestamp()
        self.bytes_since_last_index_entry = 0
        if new_size == 0:
            self.rolling_based_timestamp = None
        return removed

    def flush(self) -> None:
        """fsync the data and both index files (any thread; no lock needed).

        Raises:
            LogDirError: fsync failed (the data may not be durable).
        """
        file = self.file  # our own reference: the descriptor stays open until we are done
        try:
            if file.fd >= 0:
                os.fsync(file.fd)
            if self.index_dirty:
                self.index_dirty = False  # before: a change meanwhile sets it again
                fsync_path(self.path(INDEX_SUFFIX))
                fsync_path(self.path(TIME_INDEX_SUFFIX))
            self.txn_index.flush()
        except OSError as exc:
            self.index_dirty = True
            if self.deleted:
                return  # renamed away by retention meanwhile: nothing left to make durable
            raise LogDirError(exc.errno, f"cannot fsync {file.path}: {exc.strerror}",
                              path=file.path) from exc

    def close(self) -> None:
        """Trim (if active) and unmap the indexes; the file descriptor stays with any
        region still holding it and closes when the last holder goes."""
        if self.writable and not self.deleted:
            self.seal()
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()

    def release_file(self) -> None:
        """Drop the segment's hold on its descriptor (the log closed). Regions that hold
        it keep it open; the number is never used again here (-1 fails with EBADF)."""
        self.fd = -1
        self.file = SharedFd(-1, self.file.path)

    def rename_deleted(self) -> list[str]:
        """Rename every file of the segment to ``<name>.deleted``; returns the new paths."""
        self.deleted = True
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()
        out = []
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            src = self.path(suffix)
            if os.path.exists(src):
                os.rename(src, src + DELETED_SUFFIX)
                out.append(src + DELETED_SUFFIX)
        return out

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
