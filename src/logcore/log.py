"""Log: one partition's segmented commit log, laid out on disk exactly as Kafka lays it out.

A partition directory holds segments named by their base offset (20 digits, zero-padded)::

    00000000000000000000.log        record batches, appended strictly sequentially
    00000000000000000000.index      offset index (8-byte entries, mmapped, sparse)
    00000000000000000000.timeindex  time index (12-byte entries, mmapped, sparse)
    00000000000000368769.log ...    the next segment, and so on; the last one is active
    00000000000000368769.snapshot   idempotent producers' state below that offset (written
                                    at every roll and at close; logcore.producer_state)
    leader-epoch-checkpoint         (leader_epoch, start_offset) pairs
    recovery-point-offset-checkpoint, log-start-offset-checkpoint
                                    Kafka keeps these two per log dir; a standalone Log
                                    keeps its own (one ``topic partition offset`` entry)
    .kafka_cleanshutdown            present only between a clean close and the next open

The moving parts follow Kafka's ``UnifiedLog`` / ``LocalLog`` / ``LogSegment`` /
``LogLoader`` (docs/formats.md, docs/operations.md):

- append: ``validate_for_append`` checks the batches and assigns offsets in place, the
  active segment rolls when full (size, age with jitter, index capacity, relative-offset
  overflow), the bytes go to the file with one ``pwrite``, and an index entry is added
  about every ``index_interval_bytes``;
- read: binary search over an immutable snapshot of the segment list, offset-index
  lookup, then a batch-header walk to the first batch holding the offset; the answer is a
  :class:`~logcore.region.FileRegion` on batch boundaries, sent later with ``sendfile``;
- open: after a clean close, O(segments); otherwise every segment from the recovery point
  on is scanned (lengths, CRC, increasing offsets), its indexes rebuilt, the log
  truncated at the first invalid byte and later segments deleted;
- idempotent producers: a batch with a producer id is checked against the producer state
  (:mod:`logcore.producer_state`) after validation and before the write; a retried batch
  writes nothing and reports the offsets it got the first time;
- retention: whole non-active segments by age, total size, or the log start offset;
  deleted segments are renamed ``.deleted`` and unlinked ``file_delete_delay_ms`` later.

Thread-safety: **one writer, many readers.** Mutating methods (append, roll, truncate_*,
delete_records_before, flush, apply_retention, close, delete) serialise on the log's
lock, so several writer threads are safe but gain nothing. ``read``,
``offset_for_timestamp`` and the offset properties take no lock: they work on an
immutable snapshot of the segment list, and each segment publishes its size only after
its bytes are written, and the log end offset only after the index is updated, so a
reader never sees a partial batch. A region a reader holds stays readable even if
retention deletes its segment meanwhile.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import os
import random
import re
import shutil
import struct
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from . import IMPLEMENTATION, RecordBatch, crc32c, iter_batches, validate_for_append
from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LeaderEpochCache,
    consume_clean_shutdown_marker,
    fsync_dir,
    read_offset_checkpoint,
    write_clean_shutdown_marker,
    write_offset_checkpoint,
)
from .clock import SYSTEM_CLOCK, Clock
from .config import LogConfig
from .errors import (
    CorruptRecordError,
    InvalidTimestampError,
    LogcoreError,
    LogDirError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from .producer_state import BatchMeta, ProducerStateManager
from .region import FileRegion, SharedFd

if IMPLEMENTATION == "python":
    from ._ref import segment as _scan
    from ._ref.index import OffsetIndex, TimeIndex
else:
    from . import _segment as _scan  # type: ignore[no-redef]
    from ._index import OffsetIndex, TimeIndex  # type: ignore[no-redef,assignment]

_bisect_right = bisect.bisect_right
_locate = _scan.locate

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
LOCK_FILE = ".lock"
_I32_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP: a record without a timestamp is not judged
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte RecordBatch v2 header
_ATTR_CONTROL = 0x20
_NAME_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)$")
_TOPIC_PARTITION_RE = re.compile(r"^(.+)-(\d+)$")


def filename_prefix(offset: int) -> str:
    """Kafka's ``filenamePrefixFromOffset``: the offset as 20 zero-padded digits."""
    return f"{offset:020d}"


class TimestampOffset(NamedTuple):
    """Answer of ``offset_for_timestamp``: the first record at or after a time."""

    offset: int
    timestamp: int


class LogAppendInfo:
    """What ``Log.append`` did: the codec's AppendInfo fields plus the log's view.

    Every attribute of :class:`logcore.AppendInfo` (first_offset, last_offset,
    record_count, max_timestamp, offset_of_max_timestamp, min_timestamp, size_in_bytes,
    batch_count, producer_id, producer_epoch, first_sequence, last_sequence,
    is_transactional, is_control, timestamp_type) is available, plus:

    Attributes:
        log_append_time_ms: the LogAppendTime stamped, or -1 for CreateTime topics.
        log_start_offset: the log start offset after the append.
        rolled: True if the append rolled a new segment.
        duplicate: True if an idempotent producer's batch repeated one the log already
            holds: nothing was written, and first_offset / last_offset are those of the
            batch written earlier.
    """

    __slots__ = ("_info", "log_append_time_ms", "log_start_offset", "rolled", "duplicate")

    def __init__(self, info: Any, log_append_time_ms: int, log_start_offset: int, rolled: bool,
                 duplicate: bool = False):
        self._info = info
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.rolled = rolled
        self.duplicate = duplicate

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._info, name)

    def __repr__(self) -> str:
        return (
            f"LogAppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
            f"record_count={self.record_count}, size_in_bytes={self.size_in_bytes}, "
            f"log_append_time_ms={self.log_append_time_ms}, rolled={self.rolled}"
            f"{', duplicate=True' if self.duplicate else ''})"
        )


class _DuplicateInfo:
    """The incoming batch's AppendInfo, with the offsets of the batch it repeats."""

    def __init__(self, info: Any, original: BatchMeta) -> None:
        self._info = info
        self.first_offset = original.first_offset
        self.last_offset = original.last_offset
        self.offset_of_max_timestamp = original.last_offset
        self.record_count = original.last_offset - original.first_offset + 1

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._info, name)


def _last_sequence(base_sequence: int, delta: int) -> int:
    # DefaultRecordBatch.incrementSequence: sequences wrap from Integer.MAX_VALUE to 0.
    if base_sequence < 0:
        return -1
    if base_sequence > _I32_MAX - delta:
        return delta - (_I32_MAX - base_sequence) - 1
    return base_sequence + delta


def _meta_from_header(f: tuple[Any, ...]) -> BatchMeta | None:
    """Producer-state metadata of a batch from its unpacked header (None: no producer)."""
    if f[9] < 0 or f[5] & _ATTR_CONTROL:
        return None
    return BatchMeta(f[9], f[10], f[11], _last_sequence(f[11], f[6]), f[0], f[0] + f[6], f[8])


def _meta_from_info(i: Any) -> BatchMeta | None:
    """The same from one batch's AppendInfo."""
    if i.producer_id < 0 or i.is_control:
        return None
    return BatchMeta(i.producer_id, i.producer_epoch, i.first_sequence, i.last_sequence,
                     i.first_offset, i.last_offset, i.max_timestamp)


class _MergedInfo:
    """AppendInfo-shaped summary of several per-batch infos (the replica append path)."""

    def __init__(self, infos: list[Any]) -> None:
        first, last = infos[0], infos[-1]
        self.infos = infos
        self.first_offset = first.first_offset
        self.last_offset = last.last_offset
        self.record_count = sum(i.record_count for i in infos)
        best = max(infos, key=lambda i: i.max_timestamp)
        best = next(i for i in infos if i.max_timestamp == best.max_timestamp)
        self.max_timestamp = best.max_timestamp
        self.offset_of_max_timestamp = best.offset_of_max_timestamp
        self.min_timestamp = min(i.min_timestamp for i in infos)
        self.size_in_bytes = sum(i.size_in_bytes for i in infos)
        self.batch_count = sum(i.batch_count for i in infos)
        self.producer_id = first.producer_id
        self.producer_epoch = first.producer_epoch
        self.first_sequence = first.first_sequence
        self.last_sequence = last.last_sequence
        self.is_transactional = first.is_transactional
        self.is_control = first.is_control
        self.timestamp_type = first.timestamp_type


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
        "writable",
        "max_timestamp",
        "offset_of_max_timestamp",
        "bytes_since_last_index_entry",
        "created_ms",
        "rolling_based_timestamp",
        "roll_jitter_ms",
        "roll_after_ms",
        "index_full",
        "index_interval",
        "fd",
        "deleted",
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
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self.created_ms = created_ms
        self.rolling_based_timestamp: int | None = None
        jitter = config.segment_jitter_ms
        self.roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter else 0
        self.roll_after_ms = config.segment_ms - self.roll_jitter_ms
        # Set when either index has no room left for another entry pair (a roll is due).
        self.index_full = False

    def path(self, suffix: str) -> str:
        return os.path.join(self.directory, filename_prefix(self.base_offset) + suffix)

    def set_config(self, config: LogConfig) -> None:
        """A changed log config: the roll deadline and index cadence follow it."""
        self.config = config
        self.index_interval = config.index_interval_bytes
        self.roll_jitter_ms = min(self.roll_jitter_ms, max(config.segment_ms - 1, 0))
        self.roll_after_ms = config.segment_ms - self.roll_jitter_ms

    # --- indexes (opened lazily for old segments, as Kafka's LazyIndex) ---
    @property
    def offset_index(self) -> Any:
        idx = self._offset_index
        if idx is None:
            idx = self._offset_index = OffsetIndex(
                self.path(INDEX_SUFFIX), self.base_offset,
                self.config.segment_index_bytes if self.writable else -1, True,
            )
        return idx

    @property
    def time_index(self) -> Any:
        idx = self._time_index
        if idx is None:
            idx = self._time_index = TimeIndex(
                self.path(TIME_INDEX_SUFFIX), self.base_offset,
                self.config.segment_index_bytes if self.writable else -1, True,
            )
        return idx

    def load_max_timestamp(self) -> None:
        """Largest timestamp from the time index's last entry (Kafka does the same)."""
        ts, off = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, off

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
        """
        pos = self.size
        fd = self.fd
        try:
            n = os.pwrite(fd, buf, pos)
            while n < size:  # short writes happen only on errors like ENOSPC; finish or fail
                with memoryview(buf) as view:
                    n += os.pwrite(fd, view[n:], pos + n)
        except OSError as exc:
            try:
                os.ftruncate(fd, pos)
            except OSError:
                pass
            raise LogDirError(
                exc.errno, f"cannot append to {self.file.path}: {exc.strerror}"
            ) from exc
        self.size = pos + size
        max_ts = info.max_timestamp
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = info.offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.index_interval:
            oi, ti = self._offset_index, self._time_index
            oi.append(info.last_offset, pos)
            ti.append(self.max_timestamp, self.offset_of_max_timestamp)
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
        if self.max_timestamp >= 0:
            ti.append(self.max_timestamp, self.offset_of_max_timestamp, True)
        ti.trim_to_valid_size()
        self.offset_index.trim_to_valid_size()
        self.writable = False

    def unseal(self) -> None:
        """Become active again (after a truncation or at load): regrow the indexes."""
        self.writable = True
        oi, ti = self.offset_index, self.time_index
        oi.resize(self.config.segment_index_bytes)
        ti.resize(self.config.segment_index_bytes)
        self.index_full = oi.is_full() or ti.entries + 1 >= ti.max_entries

    def read_next_offset(self) -> int:
        """Offset after the last batch: last index entry, then walk headers to the end."""
        off, pos = self.offset_index.lookup(2**63 - 1)
        nxt = self.base_offset
        end = self.size
        while True:
            found = _scan.search_for_offset(self.file.fd, pos, end, -1)
            if found is None:
                return nxt
            p, sz, _base, last = found
            nxt = last + 1
            pos = p + sz

    def recover(self, crc: Callable[..., int]) -> tuple[int, int, str | None]:
        """Rebuild indexes from the data, truncating at the first invalid batch.

        Returns (truncated_bytes, next_offset, error).
        """
        oi, ti = self.offset_index, self.time_index
        oi.truncate()
        ti.truncate()
        oi.resize(self.config.segment_index_bytes)
        ti.resize(self.config.segment_index_bytes)
        end = self.size
        if end == 0:
            valid, nxt, max_ts, off_max, error = 0, self.base_offset, -1, self.base_offset, None
        else:
            import mmap

            with mmap.mmap(self.file.fd, end, access=mmap.ACCESS_READ) as mm:
                valid, _count, nxt, max_ts, off_max, error = _scan.recover_scan(
                    mm, end, self.base_offset, self.config.index_interval_bytes, oi, ti, crc
                )
        truncated = end - valid
        if truncated:
            try:
                os.ftruncate(self.file.fd, valid)
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot truncate {self.file.path}") from exc
            self.size = valid
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, off_max
        self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        return truncated, nxt, error

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns bytes removed."""
        _off, pos = self.offset_index.lookup(offset)
        found = _scan.search_for_offset(self.file.fd, pos, self.size, offset)
        if found is None:
            return 0
        new_size, _sz, cut, _last = found
        removed = self.size - new_size
        # Cut the indexes at the first removed batch's base offset (<= offset): nothing
        # indexed at or after it survives.
        self.offset_index.truncate_to(cut)
        self.time_index.truncate_to(cut)
        os.ftruncate(self.file.fd, new_size)
        self.size = new_size
        self.load_max_timestamp()
        self.bytes_since_last_index_entry = 0
        if new_size == 0:
            self.rolling_based_timestamp = None
        return removed

    def flush(self) -> None:
        try:
            os.fsync(self.file.fd)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot fsync {self.file.path}") from exc
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()

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


class _DirLock:
    """An exclusive ``flock`` on ``<directory>/.lock``, released by ``release()`` or when
    the holder is garbage (a crashed or abandoned Log never keeps a directory locked
    past its process)."""

    __slots__ = ("fd",)

    def __init__(self, directory: str) -> None:
        self.fd = -1
        path = os.path.join(directory, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot open {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise LogDirError(
                exc.errno, f"log directory {directory} is in use by another Log "
                f"(this process or another one holds {path})"
            ) from exc
        self.fd = fd

    def release(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)  # closing the descriptor drops the flock

    def __del__(self) -> None:
        self.release()


class _View:
    """An immutable snapshot of the segment list (readers bisect it without a lock)."""

    __slots__ = ("bases", "segments")

    def __init__(self, segments: list[LogSegment]) -> None:
        self.segments = tuple(segments)
        self.bases = [s.base_offset for s in segments]


class Log:
    """One partition's log in ``directory`` (created if missing, recovered if needed).

    Args:
        directory: the partition directory (``<topic>-<partition>`` for a broker).
        config: a :class:`LogConfig` (Kafka's defaults when None).
        clock: an object with ``time_ms() -> int`` (see :mod:`logcore.clock`); the system
            clock when None.

    Raises:
        LogDirError: the directory cannot be created, read or written.
        CorruptRecordError: a checkpoint file is malformed.

    Thread-safety: one writer and many concurrent readers (see the module docstring).
    """

    def __init__(
        self, directory: str | os.PathLike[str], config: LogConfig | None = None, *,
        clock: Clock | None = None,
    ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self._config = config if config is not None else LogConfig()
        self.clock = clock if clock is not None else SYSTEM_CLOCK
        self._lock = threading.RLock()
        self._closed = False
        self._pending_deletes: list[tuple[int, list[str]]] = []
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.time_ms()
        name = os.path.basename(self.directory)
        m = _TOPIC_PARTITION_RE.match(name)
        topic, partition = (m.group(1), int(m.group(2))) if m else (name, 0)
        self._topic_partition = ("".join("_" if c.isspace() else c for c in topic) or "_", partition)
        #: True when the last open found no clean-shutdown marker and scanned segments.
        self.recovered = False
        #: Bytes cut off by the last recovery (0 after a clean open).
        self.recovery_truncated_bytes = 0
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot create log dir {self.directory}") from exc
        # One Log per directory, across processes too (Kafka locks its log dirs the same
        # way): two writers would interleave appends and corrupt the segments.
        self._dir_lock = _DirLock(self.directory)
        self.leader_epoch_cache = LeaderEpochCache(
            os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT)
        )
        self._derive_from_config()
        #: Idempotent producers' epochs and last batches (duplicate / sequence checks).
        self.producer_state = ProducerStateManager(self.directory,
                                                   self._config.producer_id_expiration_ms)
        with self._lock:
            self._load()
            self._load_producer_state()

    def _derive_from_config(self) -> None:
        cfg = self._config
        self._log_append_time = cfg.message_timestamp_type == "LogAppendTime"
        # KIP-937 window of CreateTime records (leader appends only); a topic that left
        # both bounds at Long.MAX_VALUE pays nothing for it.
        self._ts_before = cfg.message_timestamp_before_max_ms
        self._ts_after = cfg.message_timestamp_after_max_ms
        self._check_timestamps = not self._log_append_time and (
            self._ts_before != _LONG_MAX or self._ts_after != _LONG_MAX
        )
        # Flush by count or age only when configured (Kafka's default is never).
        self._flush_policy = cfg.flush_messages != 2**63 - 1 or cfg.flush_ms != 2**63 - 1

    @property
    def config(self) -> LogConfig:
        """The log's settings; assign (or call update_config) to change them live."""
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self.update_config(config)

    def update_config(self, config: LogConfig) -> None:
        """Apply a changed config to the running log (AlterConfigs / IncrementalAlterConfigs).

        Takes effect for the next append, roll, retention pass and flush. As in Kafka,
        existing index files keep their size (a new ``segment_index_bytes`` applies to new
        segments) and each segment keeps its roll jitter.
        """
        if not isinstance(config, LogConfig):
            raise TypeError(f"expected a LogConfig, got {type(config).__name__}")
        with self._lock:
            self._config = config
            self._derive_from_config()
            self.producer_state.expiration_ms = config.producer_id_expiration_ms
            if hasattr(self, "_Log__view"):
                for seg in self.__view.segments:
                    seg.set_config(config)

    @property
    def _view(self) -> _View:
        return self.__view

    @_view.setter
    def _view(self, view: _View) -> None:
        # The writer's shortcut to the active segment changes with every new snapshot.
        self.__view = view
        self._active = view.segments[-1]

    # ------------------------------------------------------------------ properties
    @property
    def log_start_offset(self) -> int:
        """First offset a read may ask for (advanced by retention and DeleteRecords)."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record will get."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below this are known to be fsynced (recovery starts here)."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._view.segments)

    @property
    def num_segments(self) -> int:
        return len(self._view.segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._view.bases)

    @property
    def active_segment(self) -> LogSegment:
        return self._view.segments[-1]

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        clean = consume_clean_shutdown_marker(self.directory)
        self._remove_temp_files_and_complete_swaps()
        now = self.clock.time_ms()
        segments: list[LogSegment] = []
        bases = set()
        names = sorted(os.listdir(self.directory))
        for name in names:
            m = _NAME_RE.match(name)
            if m and m.group(2) == LOG_SUFFIX:
                bases.add(int(m.group(1)))
        for name in names:  # orphan indexes (no .log next to them) go, as in Kafka
            m = _NAME_RE.match(name)
            if m and m.group(2) in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if int(m.group(1)) not in bases:
                    os.unlink(os.path.join(self.directory, name))
        for base in sorted(bases):
            seg = LogSegment(self.directory, base, self.config, created_ms=now, writable=False,
                             create=False)
            segments.append(seg)

        rp_file = read_offset_checkpoint(os.path.join(self.directory, RECOVERY_POINT_CHECKPOINT))
        lso_file = read_offset_checkpoint(os.path.join(self.directory, LOG_START_OFFSET_CHECKPOINT))
        recovery_point = next(iter(rp_file.values())) if rp_file else 0
        log_start = next(iter(lso_file.values())) if lso_file else None

        # After an unclean stop every segment from the one holding the recovery point on
        # is scanned; the ones wholly below it were flushed before the crash.
        first_unflushed = len(segments)
        if not clean:
            first_unflushed = 0
            while (first_unflushed + 1 < len(segments)
                   and segments[first_unflushed + 1].base_offset <= recovery_point):
                first_unflushed += 1

        # Corrupt or missing indexes are rebuilt (Kafka's loadSegmentFiles + sanityCheck);
        # segments about to be scanned get new indexes anyway.
        for seg in segments[:first_unflushed]:
            if not self._indexes_sane(seg):
                truncated, _n, _e = seg.recover(crc32c)
                seg.seal()
                self.recovery_truncated_bytes += truncated

        next_offset = None
        if not clean and segments:
            self.recovered = True
            for i, seg in enumerate(segments):
                if i < first_unflushed:
                    continue
                truncated, nxt, _error = seg.recover(crc32c)
                next_offset = nxt
                self.recovery_truncated_bytes += truncated
                if truncated:
                    for later in segments[i + 1 :]:
                        self._delete_segment_files_now(later)
                    segments = segments[: i + 1]
                    break
                if i + 1 < len(segments):
                    seg.seal()
            recovery_point = min(recovery_point, next_offset if next_offset is not None else 0)

        if not segments:
            start = log_start if log_start is not None else 0
            segments.append(LogSegment(self.directory, start, self.config, created_ms=now,
                                       writable=True, create=True))
        active = segments[-1]
        active.writable = True
        active.unseal()
        if next_offset is None or self.recovered is False:
            next_offset = active.read_next_offset()
        active.load_max_timestamp()
        if active.size:
            # Kafka loads the first batch's timestamp lazily for time-based rolls.
            hdr = os.pread(active.file.fd, _HEADER.size, 0)
            if len(hdr) == _HEADER.size:
                active.rolling_based_timestamp = _HEADER.unpack(hdr)[8]
        # Segments wholly below the log start offset go (after DeleteRecords before a crash).
        first_base = segments[0].base_offset
        if log_start is None or log_start < first_base:
            log_start = first_base
        log_start = min(log_start, next_offset)
        while len(segments) > 1 and segments[1].base_offset <= log_start:
            self._delete_segment_files_now(segments.pop(0))

        self._view = _View(segments)
        self._log_end_offset = next_offset
        self._log_start_offset = log_start
        self._recovery_point = next_offset if clean else min(recovery_point, next_offset)
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self.leader_epoch_cache.truncate_from_start(log_start)

    def _load_producer_state(self) -> None:
        """Newest valid snapshot at or below the log end, then replay the batches after it."""
        ps = self.producer_state
        snap = ps.load_latest_snapshot(self._log_end_offset)
        if snap < 0:
            # No snapshot (a log written before they existed): as Kafka, replay the last two
            # segments only; every later roll and close leaves one.
            segments = self._view.segments
            snap = segments[-2].base_offset if len(segments) > 1 else segments[0].base_offset
        start = max(snap, self._log_start_offset)
        ps.map_end_offset = start
        self._replay_producer_state(start)
        ps.map_end_offset = self._log_end_offset
        ps.expire(self.clock.time_ms())

    def _replay_producer_state(self, start: int) -> None:
        """Feed every batch whose last offset is >= ``start`` to the producer state (batch
        headers only, read with pread; the segments were validated by the open)."""
        ps = self.producer_state
        segments = self._view.segments
        hsize = _HEADER.size
        for i, seg in enumerate(segments):
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
                continue
            _off, pos = seg.offset_index.lookup(start) if start > seg.base_offset else (0, 0)
            fd, end = seg.fd, seg.size
            while pos + hsize <= end:
                hdr = os.pread(fd, hsize, pos)
                if len(hdr) < hsize:
                    break
                f = _HEADER.unpack(hdr)
                size = 12 + f[1]
                if f[1] < 49 or pos + size > end:
                    break
                if f[0] + f[6] >= start:
                    meta = _meta_from_header(f)
                    if meta is not None:
                        ps.apply(meta)
                pos += size

    def _reload_producer_state(self) -> None:
        """After a truncation: forget what is past the log end and rebuild."""
        self._load_producer_state()

    def _producer_metas(self, buf: Any, info: Any) -> list[BatchMeta]:
        """Producer-state metadata of the batches of a validated leader append."""
        if info.batch_count == 1:
            meta = _meta_from_info(info)
            return [] if meta is None else [meta]
        out = []
        pos, n = 0, info.size_in_bytes
        while pos + _HEADER.size <= n:
            f = _HEADER.unpack_from(buf, pos)
            meta = _meta_from_header(f)
            if meta is not None:
                out.append(meta)
            pos += 12 + f[1]
        return out

    def _indexes_sane(self, seg: LogSegment) -> bool:
        if not os.path.exists(seg.path(INDEX_SUFFIX)) or not os.path.exists(
            seg.path(TIME_INDEX_SUFFIX)
        ):
            return False
        try:
            seg.offset_index.sanity_check(seg.size)
            seg.time_index.sanity_check(seg.size)
        except CorruptRecordError:
            seg.offset_index.truncate()
            seg.time_index.truncate()
            return False
        return True

    def _remove_temp_files_and_complete_swaps(self) -> None:
        """Kafka's ``removeTempFilesAndCollectSwapFiles`` + swap completion (LogLoader, first step)."""
        d = self.directory
        cleaned: list[int] = []
        swaps: list[str] = []
        for name in os.listdir(d):
            path = os.path.join(d, name)
            if name.endswith(DELETED_SUFFIX) or name.endswith(TMP_SUFFIX):
                os.unlink(path)
            elif name.endswith(CLEANED_SUFFIX):
                m = _NAME_RE.match(name[: -len(CLEANED_SUFFIX)])
                if m:
                    cleaned.append(int(m.group(1)))
                os.unlink(path)
            elif name.endswith(SWAP_SUFFIX):
                swaps.append(name)
        min_cleaned = min(cleaned) if cleaned else None
        for name in sorted(swaps):
            path = os.path.join(d, name)
            m = _NAME_RE.match(name[: -len(SWAP_SUFFIX)])
            if m is None:
                os.unlink(path)
                continue
            base = int(m.group(1))
            if (min_cleaned is not None and base >= min_cleaned) or m.group(2) != LOG_SUFFIX:
                # Part of an incomplete split (KAFKA-6264), or a swap index that is rebuilt.
                os.unlink(path)
                continue
            # A complete swap: it replaces the segments in its offset range.
            end = self._swap_end_offset(path, base)
            for other in os.listdir(d):
                mo = _NAME_RE.match(other)
                if mo and base <= int(mo.group(1)) < end:
                    os.unlink(os.path.join(d, other))
            os.rename(path, path[: -len(SWAP_SUFFIX)])
        for name in os.listdir(d):
            if name.endswith(SWAP_SUFFIX):
                os.unlink(os.path.join(d, name))

    @staticmethod
    def _swap_end_offset(path: str, base: int) -> int:
        fd = os.open(path, os.O_RDONLY)
        try:
            end = os.fstat(fd).st_size
            pos, nxt = 0, base
            while True:
                found = _scan.search_for_offset(fd, pos, end, -1)
                if found is None:
                    return nxt
                pos = found[0] + found[1]
                nxt = found[3] + 1
        finally:
            os.close(fd)

    def _delete_segment_files_now(self, seg: LogSegment) -> None:
        for path in seg.rename_deleted():
            os.unlink(path)

    # ------------------------------------------------------------------ append
    def append(
        self, records: Any, *, assign_offsets: bool = True, leader_epoch: int | None = None
    ) -> LogAppendInfo:
        """Validate ``records`` (one or more batches), assign offsets, and append them.

        Args:
            records: the batches. A bytearray, writable memoryview or mmap is validated
                and rewritten in place (offsets, leader epoch, LogAppendTime); read-only
                bytes are copied into a bytearray first.
            assign_offsets: False for a replica: the batches keep their offsets, which
                must increase and start at or after log_end_offset.
            leader_epoch: stamped into every batch (leader path) and recorded in the
                leader-epoch cache. A replica records the epochs found in the batches.

        Returns:
            A :class:`LogAppendInfo`.

        Raises:
            CorruptRecordError / RecordTooLargeError / TypeError: from validate_for_append
                (nothing is written); also for non-increasing replica offsets.
            InvalidTimestampError: leader path (``assign_offsets=True``) on a CreateTime
                log: a record's timestamp is more than ``message_timestamp_before_max_ms``
                older or ``message_timestamp_after_max_ms`` newer than the clock (Kafka's
                LogValidator; records without a timestamp, -1, are not judged). Nothing
                is written and log_end_offset is unchanged; a writable buffer passed in
                has had its offsets assigned already. LogAppendTime logs and replica
                appends are not checked.
            InvalidProducerEpochError / OutOfOrderSequenceError: leader path, a batch of an
                idempotent producer breaks its epoch or sequence (nothing is written). A
                batch that repeats one of the producer's last five is not an error: the
                result has ``duplicate=True`` and the original offsets.
            RecordTooLargeError: the set is larger than segment_bytes.
            LogDirError: the write failed (the segment is cut back to its old size).
            LogcoreError: the log is closed.
        """
        buf = records
        if type(buf) is bytes or (isinstance(buf, memoryview) and buf.readonly):
            buf = bytearray(buf)
        cfg = self.config
        clock = self.clock
        with self._lock:
            if self._closed:
                raise LogcoreError(f"log {self.directory} is closed")
            lat = clock.time_ms() if self._log_append_time else None
            if assign_offsets:
                info = validate_for_append(
                    buf, next_offset=self._log_end_offset,
                    max_message_bytes=cfg.max_message_bytes, log_append_time_ms=lat,
                    partition_leader_epoch=leader_epoch,
                )
                if self._check_timestamps:
                    # One comparison per bound on the happy path: validate_for_append
                    # already found the smallest and largest record timestamps.
                    now = clock.time_ms()
                    if (now - info.min_timestamp > self._ts_before
                            or info.max_timestamp - now > self._ts_after):
                        self._refuse_timestamps(buf, now)
                producer_updates = None
                if info.producer_id >= 0 or info.batch_count > 1:
                    metas = self._producer_metas(buf, info)
                    if metas:
                        dup, producer_updates = self.producer_state.validate(metas)
                        if dup is not None:
                            return LogAppendInfo(
                                _DuplicateInfo(info, dup),
                                dup.max_timestamp if lat is not None else -1,
                                self._log_start_offset, False, True,
                            )
            else:
                info = self._validate_replica(buf, lat)
                producer_updates = None
            size = info.size_in_bytes
            if size > cfg.segment_bytes:
                raise RecordTooLargeError(
                    f"record set of {size} bytes exceeds segment_bytes {cfg.segment_bytes}",
                    size=size, limit=cfg.segment_bytes,
                )
            seg = self._active
            rolled = False
            ssize = seg.size
            if ssize:
                # Kafka's LogSegment.shouldRoll, inlined (hot path): full
                # by size or index, too old (the incoming batch's timestamp against the
                # first batch's, or the wall clock when that has none), or an offset that
                # does not fit relative to the base offset.
                rolling = seg.rolling_based_timestamp
                if rolling is not None and rolling >= 0:
                    waited = info.max_timestamp - rolling
                else:
                    waited = clock.time_ms() - seg.created_ms
                if (ssize > cfg.segment_bytes - size or seg.index_full
                        or waited > seg.roll_after_ms
                        or info.last_offset - seg.base_offset > _I32_MAX):
                    seg = self._roll(clock.time_ms(), info.first_offset)
                    rolled = True
            seg.append(buf, size, info)
            self._log_end_offset = info.last_offset + 1
            if producer_updates:
                self.producer_state.commit(producer_updates, self._log_end_offset)
            elif not assign_offsets:
                ps = self.producer_state
                for i in getattr(info, "infos", (info,)):
                    meta = _meta_from_info(i)
                    if meta is not None:
                        ps.apply(meta)
                ps.map_end_offset = self._log_end_offset
            if leader_epoch is not None and assign_offsets:
                if leader_epoch != self.leader_epoch_cache.latest_epoch:
                    self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
            if self._flush_policy:
                self._unflushed_messages += info.record_count
                now = clock.time_ms()
                if (self._unflushed_messages >= cfg.flush_messages
                        or now - self._last_flush_ms >= cfg.flush_ms):
                    self._flush_locked(now)
            return LogAppendInfo(info, -1 if lat is None else lat, self._log_start_offset,
                                 rolled)

    def _refuse_timestamps(self, buf: Any, now: int) -> None:
        """The error path of the timestamp check: find the records outside the window.

        Walks every record (slow, only here). Returns without raising when the only
        records out of the window carry no timestamp (-1), which Kafka does not judge.
        """
        before, after = self._ts_before, self._ts_after
        low, high = now - before, now + after
        violations: list[tuple[int, int]] = []
        index = 0
        for batch in iter_batches(buf):
            for rec in batch:
                ts = rec.timestamp
                if ts != _NO_TIMESTAMP and (ts < low or ts > high):
                    violations.append((index, ts))
                index += 1
        if not violations:
            return
        first_index, first_ts = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise InvalidTimestampError(
            f"timestamp {first_ts} of record {first_index}{more} is out of range: it should be "
            f"within [{low}, {high}] (clock {now}, message.timestamp.before.max.ms {before}, "
            f"message.timestamp.after.max.ms {after})",
            timestamp=first_ts, low=low, high=high, violations=tuple(violations),
        )

    def _validate_replica(self, buf: Any, lat: int | None) -> Any:
        """Replica path: check each batch in place, keep its offsets, require them increasing."""
        view = memoryview(buf)
        try:
            if view.readonly:
                raise TypeError("append needs a writable buffer")
            infos: list[Any] = []
            pos = 0
            expected = self._log_end_offset
            n = len(view)
            if n == 0:
                raise CorruptRecordError("empty record set", batch_index=0, position=0)
            epochs = []
            while pos < n:
                if n - pos < _HEADER.size:
                    raise CorruptRecordError(
                        f"truncated batch at position {pos}", batch_index=len(infos), position=pos
                    )
                base, length, epoch = struct.unpack_from(">qii", view, pos)
                size = 12 + length
                if base < expected:
                    raise CorruptRecordError(
                        f"replica batch {len(infos)} at position {pos} has base offset {base}, "
                        f"expected >= {expected} (offsets must increase)",
                        batch_index=len(infos), position=pos,
                    )
                if length < 49 or size > n - pos:
                    raise CorruptRecordError(
                        f"batch {len(infos)} at position {pos} declares {size} bytes",
                        batch_index=len(infos), position=pos,
                    )
                info = validate_for_append(
                    view[pos : pos + size], next_offset=base,
                    max_message_bytes=self.config.max_message_bytes,
                )
                infos.append(info)
                epochs.append((epoch, base))
                expected = info.last_offset + 1
                pos += size
        finally:
            view.release()
        for epoch, base in epochs:
            if epoch >= 0 and (self.leader_epoch_cache.latest_epoch is None
                               or epoch > self.leader_epoch_cache.latest_epoch):
                self.leader_epoch_cache.assign(epoch, base)
        return infos[0] if len(infos) == 1 else _MergedInfo(infos)

    def roll(self) -> None:
        """Roll a new active segment now (if the active one is not empty)."""
        with self._lock:
            self._check_open()
            if self._view.segments[-1].size:
                self._roll(self.clock.time_ms())

    def _roll(self, now: int, first_offset: int = -1) -> LogSegment:
        old = self._view.segments[-1]
        # A replica's append may start past the log end (a compacted leader, or an
        # offset that no longer fits the old segment): the new segment starts there.
        base = max(self._log_end_offset, first_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = os.path.join(self.directory, filename_prefix(base) + suffix)
            if os.path.exists(stale):
                if suffix == LOG_SUFFIX and os.path.getsize(stale) and base != old.base_offset:
                    raise LogDirError(f"segment {stale} already exists and is not empty")
                if base != old.base_offset:
                    os.unlink(stale)
        if base == old.base_offset:
            return old  # nothing appended since the last roll
        new = LogSegment(self.directory, base, self.config, created_ms=now, writable=True,
                         create=True)
        new.offset_index  # noqa: B018 - create both index files with the segment
        new.time_index  # noqa: B018
        old.seal()
        self._view = _View(list(self._view.segments) + [new])
        # Kafka takes a producer snapshot at every roll: a reopen replays at most the
        # active segment.
        self.producer_state.take_snapshot(base, sync=False)
        return new

    # ------------------------------------------------------------------ read
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
        view = self.__view
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
            idx = seg._offset_index
            if idx is None:
                idx = seg.offset_index
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

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """First record whose timestamp is >= ``timestamp_ms`` (ListOffsets by time).

        Special values as in ListOffsets: -2 earliest (log_start_offset), -1 latest
        (log_end_offset), -3 the record with the largest timestamp. Those return
        timestamp -1 for earliest/latest.

        Returns:
            (offset, timestamp) or None if every record is older.
        """
        self._check_open()
        view = self.__view
        lso = self._log_start_offset
        if timestamp_ms == -2:
            return TimestampOffset(lso, -1)
        if timestamp_ms == -1:
            return TimestampOffset(self._log_end_offset, -1)
        if timestamp_ms == -3:
            best: TimestampOffset | None = None
            for seg in view.segments:
                if seg.max_timestamp < 0 and not seg.writable:
                    seg.load_max_timestamp()
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.timestamp):
                    best = TimestampOffset(seg.offset_of_max_timestamp, seg.max_timestamp)
            return best
        for i, seg in enumerate(view.segments):
            if i + 1 < len(view.segments) and view.segments[i + 1].base_offset <= lso:
                continue
            if not seg.writable and seg.max_timestamp < 0:
                seg.load_max_timestamp()
            if seg.max_timestamp < timestamp_ms and seg.max_timestamp >= 0:
                continue
            _ts, idx_offset = seg.time_index.lookup(timestamp_ms)
            start_offset = max(idx_offset, lso)
            _o, pos = seg.offset_index.lookup(start_offset)
            found = self._search_timestamp(seg, pos, timestamp_ms, start_offset)
            if found is not None:
                return found
        return None

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

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding offsets >= ``offset`` (replica divergence).

        A batch that straddles ``offset`` is removed whole. log_end_offset becomes the
        offset after the last batch kept (or the active segment's base offset when none
        is left in it), so it may end up below ``offset`` (a straddling batch, or
        ``offset`` inside a gap left by compaction); it is what a reopen would compute.
        Below log_start_offset this is truncate_fully_and_start_at.

        Returns:
            True if anything was removed.
        """
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._log_end_offset:
                return False
            if offset < self._log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            segments = list(self._view.segments)
            keep = [s for s in segments if s.base_offset < offset] or segments[:1]
            drop = segments[len(keep):]
            active = keep[-1]
            for seg in drop:
                seg.deleted = True
            if not active.writable:
                active.unseal()
            active.truncate_to(offset)
            self._view = _View(keep)
            self._log_end_offset = active.read_next_offset()
            if self._log_start_offset > self._log_end_offset:
                # The batch holding the log start offset straddled the cut and went whole.
                self._log_start_offset = self._log_end_offset
                self._write_log_start_offset()
            for seg in drop:
                self._schedule_delete(seg)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            self._reload_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        with self._lock:
            self._check_open()
            old = list(self._view.segments)
            for seg in old:
                seg.deleted = True
                self._schedule_delete(seg)
            new = LogSegment(self.directory, offset, self.config,
                             created_ms=self.clock.time_ms(), writable=True, create=True)
            new.offset_index  # noqa: B018
            new.time_index  # noqa: B018
            self._view = _View([new])
            self._log_end_offset = offset
            self._log_start_offset = offset
            self._recovery_point = offset
            self.leader_epoch_cache.clear()
            self._write_log_start_offset()
            self.producer_state.delete_snapshots(lambda _off: True)
            self.producer_state.clear(offset)

    def delete_records_before(self, offset: int) -> int:
        """Advance log_start_offset to ``offset`` (DeleteRecords); returns the new value.

        Segments wholly below it are removed by the next ``apply_retention``.

        Raises:
            OffsetOutOfRangeError: offset > log_end_offset.
        """
        with self._lock:
            self._check_open()
            if offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: log end offset is "
                    f"{self._log_end_offset}", offset=offset,
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self._log_end_offset,
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self.leader_epoch_cache.truncate_from_start(offset)
                self._write_log_start_offset()
            return self._log_start_offset

    # ------------------------------------------------------------------ retention
    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments (time, size, log start offset) and due ``.deleted`` files.

        Never deletes the active segment. Returns the number of segments removed.
        """
        with self._lock:
            self._check_open()
            now = self.clock.time_ms() if now_ms is None else now_ms
            cfg = self.config
            segments = list(self._view.segments)
            deletable: list[LogSegment] = []
            candidates = segments[:-1]
            # (a) log start offset breach: the next segment starts at or below it.
            i = 0
            while i < len(candidates) and segments[i + 1].base_offset <= self._log_start_offset:
                i += 1
            n_lso = i
            # (b) time: newest record older than retention_ms.
            n_time = 0
            if cfg.retention_ms >= 0:
                while n_time < len(candidates):
                    seg = candidates[n_time]
                    if seg.max_timestamp < 0:
                        seg.load_max_timestamp()
                    if now - seg.largest_timestamp() > cfg.retention_ms:
                        n_time += 1
                    else:
                        break
            # (c) size: drop oldest while what remains is still >= retention_bytes.
            n_size = 0
            if cfg.retention_bytes >= 0:
                total = sum(s.size for s in segments)
                while n_size < len(candidates) and total - candidates[n_size].size >= cfg.retention_bytes:
                    total -= candidates[n_size].size
                    n_size += 1
            count = max(n_lso, n_time, n_size)
            deletable = candidates[:count]
            if deletable:
                remaining = segments[count:]
                self._view = _View(remaining)
                new_start = max(self._log_start_offset, remaining[0].base_offset)
                if new_start != self._log_start_offset:
                    self._log_start_offset = new_start
                    self.leader_epoch_cache.truncate_from_start(new_start)
                    self._write_log_start_offset()
                for seg in deletable:
                    self._schedule_delete(seg, now)
            self.producer_state.delete_snapshots_before(
                min(self._log_start_offset, self._view.segments[0].base_offset))
            self.producer_state.expire(now)
            self._delete_due_files(now)
            return len(deletable)

    def _schedule_delete(self, seg: LogSegment, now: int | None = None) -> None:
        now = self.clock.time_ms() if now is None else now
        try:
            paths = seg.rename_deleted()
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot rename segment {seg.base_offset}") from exc
        self._pending_deletes.append((now + self.config.file_delete_delay_ms, paths))
        if self.config.file_delete_delay_ms == 0:
            self._delete_due_files(now)

    def _delete_due_files(self, now: int) -> None:
        keep = []
        for due, paths in self._pending_deletes:
            if due <= now:
                for p in paths:
                    try:
                        os.unlink(p)
                    except FileNotFoundError:
                        pass
            else:
                keep.append((due, paths))
        self._pending_deletes = keep

    @property
    def pending_deletes(self) -> int:
        """Number of segments renamed ``.deleted`` and waiting for file_delete_delay_ms."""
        return len(self._pending_deletes)

    # ------------------------------------------------------------------ durability
    def flush(self) -> None:
        """fsync every segment from the recovery point on, then advance the recovery point
        to the log end offset and checkpoint it."""
        with self._lock:
            self._check_open()
            self._flush_locked(self.clock.time_ms())

    def _flush_locked(self, now: int) -> None:
        leo = self._log_end_offset
        view = self._view
        if leo > self._recovery_point:
            for i, seg in enumerate(view.segments):
                upper = view.segments[i + 1].base_offset if i + 1 < len(view.segments) else None
                if upper is not None and upper <= self._recovery_point:
                    continue
                seg.flush()
            fsync_dir(self.directory)
            self._recovery_point = leo
        self._write_recovery_point()
        self._unflushed_messages = 0
        self._last_flush_ms = now

    def _write_recovery_point(self) -> None:
        write_offset_checkpoint(os.path.join(self.directory, RECOVERY_POINT_CHECKPOINT),
                                {self._topic_partition: self._recovery_point})

    def _write_log_start_offset(self) -> None:
        write_offset_checkpoint(os.path.join(self.directory, LOG_START_OFFSET_CHECKPOINT),
                                {self._topic_partition: self._log_start_offset})

    def close(self) -> None:
        """Clean shutdown: flush, trim the active indexes, checkpoint, leave the marker.

        Regions handed out earlier stay readable. Idempotent.
        """
        with self._lock:
            if self._closed:
                return
            self._flush_locked(self.clock.time_ms())
            self._write_log_start_offset()
            self.producer_state.take_snapshot(self._log_end_offset, sync=True)
            for seg in self._view.segments:
                seg.close()
                seg.release_file()
            self._delete_due_files(2**63 - 1)
            write_clean_shutdown_marker(self.directory)
            self._closed = True
            self._dir_lock.release()

    def delete(self) -> None:
        """Close the log and remove its directory with every file in it."""
        with self._lock:
            if not self._closed:
                for seg in self._view.segments:
                    seg.deleted = True
                    seg.close()
                    seg.release_file()
                self._closed = True
            self._pending_deletes = []
            self._dir_lock.release()
            shutil.rmtree(self.directory, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise LogcoreError(f"log {self.directory} is closed")

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Log({self.directory!r}, segments={self.num_segments}, "
            f"log_start_offset={self._log_start_offset}, log_end_offset={self._log_end_offset})"
        )
