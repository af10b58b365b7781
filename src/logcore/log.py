"""Log: one partition's segmented commit log, laid out on disk exactly as Kafka lays it out.

A partition directory holds segments named by their base offset (20 digits, zero-padded)::

    00000000000000000000.log        record batches, appended strictly sequentially
    00000000000000000000.index      offset index (8-byte entries, mmapped, sparse)
    00000000000000000000.timeindex  time index (12-byte entries, mmapped, sparse)
    00000000000000000000.txnindex   aborted transactions whose ABORT marker is in the
                                    segment (34-byte entries; logcore.txn_index)
    00000000000000368769.log ...    the next segment, and so on; the last one is active
    00000000000000368769.snapshot   producers' state (epochs, last batches, open
                                    transactions) below that offset (written at every
                                    roll and at close; logcore.producer_state)
    leader-epoch-checkpoint         (leader_epoch, start_offset) pairs
    recovery-point-offset-checkpoint, log-start-offset-checkpoint
                                    Kafka keeps these two per log dir; a standalone Log
                                    keeps its own (one ``topic partition offset`` entry)
    .kafka_cleanshutdown            present only between a clean close and the next open

The moving parts follow Kafka's ``UnifiedLog`` / ``LocalLog`` / ``LogSegment`` /
``LogLoader``, one module each:

- :mod:`logcore.segment`: one ``.log`` file and its lazily mapped indexes;
- :mod:`logcore.loader`: opening, recovery above the recovery point, producer replay;
- :mod:`logcore.retention`: which old segments go;
- :mod:`logcore.segment_files`: renames, unlinks and directory fsyncs of retired and
  swapped segments (their crash ordering), under the log's file lock;
- :mod:`logcore.truncation`: ``truncate_to`` and ``truncate_fully_and_start_at``;
- :mod:`logcore.reads`, :mod:`logcore.durability`, :mod:`logcore.append` (checks);
- this module: the Log itself, its append path and rolls.

Append: ``validate_for_append`` checks the batches and assigns offsets in place, the
active segment rolls when full (size, age with jitter, index capacity, relative-offset
overflow), the bytes go to the file with one ``pwrite`` (the page cache: no fsync), and
an index entry is added about every ``index_interval_bytes``. Idempotent and
transactional producers' batches and transaction markers are checked against
:mod:`logcore.producer_state` before the write (:mod:`logcore.transactions`: markers,
the last stable offset, aborted transactions from the ``.txnindex`` files).

Read: binary search over a snapshot of the segment list, offset-index lookup, a header walk
to the batch holding the offset; a :class:`~logcore.region.FileRegion` on batch boundaries.

Durability (:mod:`logcore.durability`, flushes, the recovery point, the ``on_roll`` hook):
an append is in the page cache when it returns; after a crash the next open scans only
the segments from the checkpointed recovery point on.

Thread-safety: **one writer, many readers.** Mutating methods serialise on the append
lock (``_lock``), held only for memory work and the append's own ``pwrite``: no rename,
unlink, fsync or checkpoint write runs under it. Swaps, retention, truncations and close
do their file work under the log's file lock (:mod:`logcore.segment_files`: renames,
unlinks, directory fsyncs, crash ordering) and checkpoint lock, and take the append lock
only to publish the new segment list and offsets. ``read``, ``offset_for_timestamp`` and
the offset properties take no lock: they work on an immutable snapshot of the segment
list, each segment publishes its size only after its bytes are written and the log end
offset only after the index is updated, so a reader never sees a partial batch. A region
a reader holds stays readable even if its segment is deleted meanwhile.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Callable
from typing import Any

from . import truncation, validate_for_append
from .append import (
    DuplicateInfo,
    LogAppendInfo,
    TimestampOffset,
    follower_producer_items,
    record_follower_epochs,
    refuse_keyless,
    refuse_timestamps,
    validate_follower,
)
from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochCache,
    consume_clean_shutdown_marker,
    fsync_dir,
    write_clean_shutdown_marker,
)
from .clock import SYSTEM_CLOCK, Clock
from .compaction import LogCompaction
from .config import LogConfig
from .durability import LogDurability
from .errors import (
    LogcoreError,
    LogDirError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from .loader import (
    DirLock,
    RecoveryStats,
    items_from_buffer,
    load_producer_state,
    load_segments,
    meta_from_info,
)
from .producer_state import BatchMeta, MarkerMeta, ProducerStateManager
from .reads import LogReads
from .retention import deletable_prefix
from .rolling import ROLL_MARGIN_MS, replica_headers, roll_due
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)
from .segment_files import SegmentFiles
from .transactions import LogTransactions

__all__ = [
    "Log", "LogAppendInfo", "LogSegment", "RecoveryStats", "TimestampOffset", "filename_prefix",
]

_I32_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_TOPIC_PARTITION_RE = re.compile(r"^(.+)-(\d+)$")


class _SplitFollowerAppend(Exception):
    """Leaves the append lock: the follower append goes on batch by batch."""


class _View:
    """An immutable snapshot of the segment list (readers bisect it without a lock)."""

    __slots__ = ("bases", "segments")

    def __init__(self, segments: list[LogSegment]) -> None:
        self.segments = tuple(segments)
        self.bases = [s.base_offset for s in segments]


class Log(LogReads, LogDurability, LogCompaction, LogTransactions):
    """One partition's log in ``directory`` (created if missing, recovered if needed).

    Args:
        directory: the partition directory (``<topic>-<partition>`` for a broker).
        config: a :class:`LogConfig` (Kafka's defaults when None).
        clock: an object with ``time_ms() -> int`` (see :mod:`logcore.clock`); the system
            clock when None.
        on_roll: called as ``on_roll(new_base_offset)`` after a roll, on the thread that
            rolled, after the append lock is released (also when the append that rolled
            then failed). Meant to schedule ``flush_up_to(new_base_offset)`` elsewhere;
            it must not block. Also settable later as the ``on_roll`` attribute.

    Raises:
        LogDirError: the directory cannot be created, read or written.
        CorruptRecordError: a checkpoint file is malformed.

    Thread-safety: one writer and many concurrent readers (see the module docstring).
    """

    def __init__(
        self, directory: str | os.PathLike[str], config: LogConfig | None = None, *,
        clock: Clock | None = None, on_roll: Callable[[int], None] | None = None,
    ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self._config = config if config is not None else LogConfig()
        self.clock = clock if clock is not None else SYSTEM_CLOCK
        self.on_roll = on_roll
        self._lock = threading.RLock()
        # Flushes run one at a time, outside the append lock (see flush_up_to).
        self._flush_lock = threading.Lock()
        # Checkpoint files (and producer snapshots) are written under this lock only.
        self._checkpoint_lock = threading.RLock()
        self._closed = False
        # Renames, unlinks and directory fsyncs of segments, serialised by its own lock
        # (the outermost: file lock, checkpoint lock, append lock; see segment_files).
        self._files = SegmentFiles(self.directory)
        # Rolls whose producer snapshot and hook are still to run (outside the lock):
        # (new base offset, snapshot bytes, truncation count at the roll).
        self._rolls_pending: list[tuple[int, bytes, int]] = []
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.time_ms()
        # Bumped by every truncation: a flush that overlapped one must not advance the
        # recovery point over offsets that were cut and written again.
        self._truncations = 0
        self._checkpointed_rp = -1
        self._checkpointed_lso = -1
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
        self._dir_lock = DirLock(self.directory)
        self.leader_epoch_cache = LeaderEpochCache(
            os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT)
        )
        self._derive_from_config()
        #: Idempotent producers' epochs and last batches (duplicate / sequence checks).
        self.producer_state = ProducerStateManager(self.directory,
                                                   self._config.producer_id_expiration_ms)
        try:
            with self._lock:
                self._load()
                self._load_producer_state()
        except BaseException:
            # A failed open must not keep the directory locked until the garbage collector
            # finds this half-built object (the caller may retry, or another Log may).
            self._dir_lock.release()
            raise

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
        self._compact = cfg.compact
        # Flush by count or age only when configured (Kafka's default is never).
        self._flush_policy = cfg.flush_messages != _LONG_MAX or cfg.flush_ms != _LONG_MAX

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
            if hasattr(self, "_snapshot"):
                for seg in self._snapshot.segments:
                    seg.set_config(config)

    @property
    def _view(self) -> _View:
        return self._snapshot

    @_view.setter
    def _view(self, view: _View) -> None:
        # The writer's shortcut to the active segment changes with every new snapshot.
        self._snapshot = view
        self._active = view.segments[-1]

    def _set_view(self, segments: list[LogSegment]) -> None:
        """Publish a new segment list (caller holds the lock; the cleaner's swap)."""
        self._view = _View(segments)

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
    def last_flush_ms(self) -> int:
        """Clock time of the last flush that advanced the recovery point (or of the open)."""
        return self._last_flush_ms

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
    def mapped_indexes(self) -> int:
        """Index files mapped now, over all segments (two for the active one)."""
        return sum(s.mapped_indexes for s in self._view.segments)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        clean = consume_clean_shutdown_marker(self.directory)
        loaded = load_segments(self.directory, self._config, self.clock.time_ms(), clean)
        stats = loaded.stats
        #: What the open did (:class:`logcore.loader.RecoveryStats`): segments scanned...
        self.recovery_stats = stats
        self.recovered = not clean and stats.segments > 0
        self.recovery_truncated_bytes = stats.truncated_bytes
        self._view = _View(loaded.segments)
        self._log_end_offset = loaded.log_end_offset
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self._checkpointed_rp = stats.recovery_point
        self._checkpointed_lso = loaded.checkpointed_log_start_offset
        self.leader_epoch_cache.truncate_from_end(loaded.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(loaded.log_start_offset)
        self._rebuild_txn_from = loaded.rebuild_txn_from

    def _load_producer_state(self) -> None:
        rebuild, self._rebuild_txn_from = self._rebuild_txn_from, None
        load_producer_state(self.producer_state, self._view.segments, self._log_start_offset,
                            self._log_end_offset, self.clock.time_ms(), rebuild)

    def _producer_metas(self, buf: Any, info: Any) -> list[BatchMeta | MarkerMeta]:
        """Producer-state items (data batches, markers) of a validated leader append."""
        if info.batch_count == 1 and not info.is_control:
            meta = meta_from_info(info)
            return [] if meta is None else [meta]
        return items_from_buffer(buf, info.size_in_bytes)

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
            InvalidRecordError: leader path on a compacted log (``cleanup_policy``
                includes compact): a record has no key (Kafka: INVALID_RECORD). Nothing
                is written.
            InvalidProducerEpochError / OutOfOrderSequenceError: leader path, a batch of an
                idempotent producer breaks its epoch or sequence (nothing is written). A
                batch that repeats one of the producer's last five is not an error: the
                result has ``duplicate=True`` and the original offsets.
            InvalidTxnStateError: leader path, a non-transactional batch of a producer with
                an open transaction. TransactionCoordinatorFencedError: leader path, a
                transaction marker (see ``append_control``) from an older coordinator.
                Nothing is written. A marker (leader or replica path) that aborts a
                transaction with data adds its entry to the segment's ``.txnindex``.
            RecordTooLargeError: the set is larger than segment_bytes.
            LogDirError: the write failed (ENOSPC, EIO, ...; ``path`` and ``position``
                say where). The log is as before the call: log_end_offset, the segment's
                size and its indexes are unchanged, and the next append (once there is
                space) writes at the same position over any partial bytes; a crash
                before that leaves them past the last valid batch, where recovery cuts
                them off. Also raised, after the records were appended, when the fsync a
                ``flush_messages`` / ``flush_ms`` policy asked for fails.
            LogcoreError: the log is closed.
        """
        buf = records
        if type(buf) is bytes or (isinstance(buf, memoryview) and buf.readonly):
            buf = bytearray(buf)
        cfg = self.config
        clock = self.clock
        flush_to = -1
        split = None
        try:
            with self._lock:
                if self._closed:
                    raise LogcoreError(f"log {self.directory} is closed")
                lat = clock.time_ms() if self._log_append_time else None
                if self._compact and assign_offsets:
                    refuse_keyless(buf)
                info: Any
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
                            refuse_timestamps(buf, now, self._ts_before, self._ts_after)
                    producer_updates = None
                    if info.producer_id >= 0 or info.batch_count > 1 or info.is_control:
                        metas = self._producer_metas(buf, info)
                        if metas:
                            dup, producer_updates = self.producer_state.validate(metas)
                            if dup is not None:
                                return LogAppendInfo(
                                    DuplicateInfo(info, dup),
                                    dup.max_timestamp if lat is not None else -1,
                                    self._log_start_offset, False, True,
                                )
                else:
                    info = validate_follower(buf, self._log_end_offset)
                    producer_updates = None
                    if info.batch_count > 1 and (
                            info.size_in_bytes > cfg.segment_bytes
                            or info.last_offset - info.first_offset > _I32_MAX):
                        # Does not fit one segment (a fetch may span a cleaned log's
                        # gaps): appended batch by batch below, after the lock.
                        split = info
                        raise _SplitFollowerAppend
                    follower_items = (follower_producer_items(buf, info.size_in_bytes)
                                      if info.has_producer_state else None)
                size = info.size_in_bytes
                if size > cfg.segment_bytes:
                    raise RecordTooLargeError(
                        f"record set of {size} bytes exceeds segment_bytes {cfg.segment_bytes}",
                        size=size, limit=cfg.segment_bytes,
                    )
                if not assign_offsets:
                    # Kafka's maybeAssignEpochStartOffset per batch, before the write.
                    record_follower_epochs(info, self.leader_epoch_cache)
                if leader_epoch is not None and assign_offsets:
                    # Before the write: if the write fails, the entry still names the offset
                    # the next append of this epoch gets.
                    if leader_epoch != self.leader_epoch_cache.latest_epoch:
                        self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
                seg = self._active
                rolled = False
                ssize = seg.size
                if ssize and roll_due(seg, ssize, cfg.segment_bytes - size,
                                       info.max_timestamp, info.last_offset, clock, 0):
                    seg = self._roll(clock.time_ms(), info.first_offset)
                    rolled = True
                seg.append(buf, size, info)
                self._log_end_offset = info.last_offset + 1
                if producer_updates:
                    aborted = self.producer_state.commit(producer_updates, self._log_end_offset)
                    for txn in aborted:
                        seg.txn_index.append(txn)
                elif not assign_offsets:
                    ps = self.producer_state
                    if follower_items:
                        for item in follower_items:
                            txn = ps.apply(item)
                            if txn is not None:
                                seg.txn_index.append(txn)
                    ps.map_end_offset = self._log_end_offset
                if self._flush_policy:
                    self._unflushed_messages += info.record_count
                    now = clock.time_ms()
                    if (self._unflushed_messages >= cfg.flush_messages
                            or now - self._last_flush_ms >= cfg.flush_ms):
                        # Flushed below, after the lock is released: appends go on meanwhile.
                        flush_to = self._log_end_offset
                        self._unflushed_messages = 0
                result = LogAppendInfo(info, -1 if lat is None else lat, self._log_start_offset,
                                       rolled)
        except _SplitFollowerAppend:
            pass
        finally:
            if self._rolls_pending:
                self._after_roll()
        if split is not None:
            return self._append_follower_batches(buf, split)
        if flush_to >= 0:
            self.flush_up_to(flush_to)
        return result

    def _append_follower_batches(self, buf: Any, info: Any) -> LogAppendInfo:
        """A follower append too large (bytes or offset span) for one segment: each batch
        on its own, so that each can roll the segment it needs."""
        view = memoryview(buf)
        try:
            ends = info.batch_positions[1:] + [info.size_in_bytes]
            last: LogAppendInfo | None = None
            rolled = False
            for start, end in zip(info.batch_positions, ends, strict=True):
                last = self.append(view[start:end], assign_offsets=False)
                rolled = rolled or last.rolled
        finally:
            view.release()
        assert last is not None
        return LogAppendInfo(info, -1, last.log_start_offset, rolled)


    def append_needs_io(self, size: int, max_timestamp: int, last_offset_delta: int,
                        leader_epoch: int | None = None) -> bool:
        """Whether an append of one batch could do file work beyond its ``pwrite``: roll
        the segment (by size, age with its jitter, a full index, or an offset that no
        longer fits the segment; ``max_timestamp`` is the batch header's), write the
        leader-epoch file (a new ``leader_epoch``), or flush (a ``flush_messages`` /
        ``flush_ms`` policy). Errs on the side of True: the age is judged as if
        ``ROLL_MARGIN_MS`` more had passed.

        Lock-free and cheap (the broker asks it before each small append on its event
        loop, and hands the append to an I/O thread when True). A roll by another thread
        right after the answer is the only way it can be wrong, and then only for that
        race: the prediction reads the same active segment the next append would.
        """
        if self._flush_policy or self._closed:
            return True
        if leader_epoch is not None and leader_epoch != self.leader_epoch_cache.latest_epoch:
            return True
        seg = self._active
        ssize = seg.size
        if not ssize:
            return False
        if self._log_append_time:
            max_timestamp = self.clock.time_ms()
        last_offset = self._log_end_offset + last_offset_delta
        return roll_due(seg, ssize, self._config.segment_bytes - size, max_timestamp,
                         last_offset, self.clock, ROLL_MARGIN_MS)

    def replica_append_needs_io(self, records: Any) -> bool:
        """``append_needs_io`` for a replica append (``assign_offsets=False``) of fetched
        batches, from their headers (``rolling.replica_headers``): also True for a newer
        leader epoch (the epoch file), a control batch (``.txnindex``), or bad headers."""
        scan = replica_headers(records)
        if scan is None or scan[3] or len(records) > self._config.segment_bytes:
            return True  # (over a segment: appended batch by batch)
        last_offset, max_timestamp, epoch, _ = scan
        latest = self.leader_epoch_cache.latest_epoch
        return (epoch >= 0 and (latest is None or epoch > latest)) or self.append_needs_io(
            len(records), max_timestamp, last_offset - self._log_end_offset)

    def roll(self) -> None:
        """Roll a new active segment now (if the active one is not empty)."""
        try:
            with self._lock:
                self._check_open()
                if self._view.segments[-1].size:
                    self._roll(self.clock.time_ms())
        finally:
            if self._rolls_pending:
                self._after_roll()

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
                    os.unlink(stale)  # left by a roll that failed half-way (ENOSPC)
        if base == old.base_offset:
            return old  # nothing appended since the last roll
        new = LogSegment(self.directory, base, self.config, created_ms=now, writable=True,
                         create=True)
        new.offset_index  # noqa: B018 - create both index files with the segment
        new.time_index  # noqa: B018
        old.seal()
        self._view = _View(list(self._view.segments) + [new])
        # Kafka takes a producer snapshot at every roll: a reopen replays at most the
        # active segment. Encoded now, written by _after_roll once the lock is released;
        # then the owner flushes the segment below (complete now) in the background.
        self._rolls_pending.append(
            (base, self.producer_state.encode_snapshot(), self._truncations))
        return new

    def _after_roll(self) -> None:
        """Write the producer snapshot and run the roll hook of each roll since the last
        call (outside the append lock). A snapshot is skipped when a truncation came in
        between: the state it holds may no longer be the log's below its offset (a reopen
        then replays from an older snapshot)."""
        pending = self._rolls_pending
        while pending:
            try:
                base, data, generation = pending.pop(0)
            except IndexError:  # another thread took it
                break
            with self._checkpoint_lock:  # a truncation holds it while it changes the log
                if generation == self._truncations and not self._closed:
                    self.producer_state.write_snapshot(base, data, sync=False)
            hook = self.on_roll
            if hook is not None:
                hook(base)

    # ------------------------------------------------------------------ truncation
    def assign_leader_epoch(self, epoch: int) -> None:
        """A new leader: record that ``epoch`` starts at the log end offset (Kafka's
        ``maybeAssignEpochStartOffset`` on becoming leader), before any append in it."""
        with self._lock:
            self._check_open()
            if self.leader_epoch_cache.latest_epoch != epoch:
                self.leader_epoch_cache.assign(epoch, self._log_end_offset)

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding offsets >= ``offset`` (replica divergence).

        A batch that straddles ``offset`` is removed whole. log_end_offset becomes the
        offset after the last batch kept (or the active segment's base offset when none
        is left in it), so it may end up below ``offset`` (a straddling batch, or
        ``offset`` inside a gap left by compaction); it is what a reopen would compute.
        Below log_start_offset this is truncate_fully_and_start_at; at or past the log end,
        only the leader epochs starting there go (:mod:`logcore.truncation`).

        Returns:
            True if any record was removed.
        """
        return truncation.truncate_to(self, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        truncation.truncate_fully_and_start_at(self, offset)

    def delete_records_before(self, offset: int) -> int:
        """Advance log_start_offset to ``offset`` (DeleteRecords); returns the new value.

        Segments wholly below it are removed by the next ``apply_retention``. The new
        value is written to the checkpoint file before this returns (after the append
        lock is released), so an acknowledged deletion survives a crash; Kafka waits for
        its periodic checkpoint instead.

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
                self.leader_epoch_cache.truncate_from_start(offset, write=False)
            lso = self._log_start_offset
        self.checkpoint_log_start_offset()
        self.leader_epoch_cache.write_if_dirty()
        return lso

    # ------------------------------------------------------------------ retention
    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments (time, size, log start offset) and due ``.deleted`` files.

        Never deletes the active segment. Returns the number of segments removed. See
        :mod:`logcore.retention` for the rules. The append lock is held only to drop the
        segments from the list; their renames and unlinks, the producer snapshots' and
        the leader-epoch file follow without it.
        """
        with self._files.lock:
            self._check_open()
            now = self.clock.time_ms() if now_ms is None else now_ms
            # Under the file lock the list only grows at its end: judged on a snapshot
            # (this may map time indexes), the prefix is still the list's prefix below.
            count = deletable_prefix(self._view.segments, self._log_start_offset,
                                     self.config, now)
            with self._lock:
                self._check_open()
                segments = list(self._view.segments)
                doomed = segments[:count]
                if count:
                    remaining = segments[count:]
                    self._view = _View(remaining)
                    new_start = max(self._log_start_offset, remaining[0].base_offset)
                    if new_start != self._log_start_offset:
                        self._log_start_offset = new_start
                        self.leader_epoch_cache.truncate_from_start(new_start, write=False)
                self.producer_state.expire(now)
                floor = min(self._log_start_offset, self._view.segments[0].base_offset)
            self._files.retire(doomed, now, self.config.file_delete_delay_ms)
            self._files.delete_due(now)
            self.producer_state.delete_snapshots_before(floor)
            self.leader_epoch_cache.write_if_dirty()
            return count

    @property
    def pending_deletes(self) -> int:
        """Number of segments renamed ``.deleted`` and waiting for file_delete_delay_ms."""
        return len(self._files)

    def release_idle_indexes(self) -> int:
        """Unmap the indexes of inactive segments that no read used since the last call.

        Meant to be called periodically (a LogManager does): a segment read since the
        previous call keeps its mappings for one more period. Returns how many index
        mappings were released. Any thread.
        """
        released = 0
        with self._lock:
            if self._closed:
                return 0
            for seg in self._view.segments[:-1]:
                if seg.touched:
                    seg.touched = False
                elif seg.mapped_indexes:
                    released += seg.release_indexes()
        return released

    def close(self) -> None:
        """Clean shutdown: flush, trim the active indexes, checkpoint, leave the marker.

        The append lock is held only to mark the log closed (appends fail from then on);
        the fsyncs and file writes follow without it. Regions handed out earlier stay
        readable. Idempotent.
        """
        with self._files.lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                leo = self._log_end_offset
                segments = self._view.segments
                snapshot = self.producer_state.encode_snapshot()
            try:
                with self._flush_lock:  # a background flush finishes first
                    pass
                # Everything from the recovery point on is fsynced.
                for seg in segments:
                    seg.close()  # trims the active segment's indexes
                for i, seg in enumerate(segments):
                    if (i + 1 < len(segments)
                            and segments[i + 1].base_offset <= self._recovery_point):
                        continue
                    seg.flush()
                fsync_dir(self.directory)
                self._recovery_point = leo
                with self._checkpoint_lock:
                    self._write_checkpoints_now()
                    self.producer_state.write_snapshot(leo, snapshot, sync=True)
                self.leader_epoch_cache.write_if_dirty()
                for seg in segments:
                    seg.release_file()
                self._files.delete_due(_LONG_MAX)
                write_clean_shutdown_marker(self.directory)
            finally:
                # Without the marker (a failed fsync above) the next open recovers.
                self._dir_lock.release()

    def delete(self) -> None:
        """Close the log and remove its directory with every file in it."""
        with self._files.lock:
            with self._lock:
                segments = () if self._closed else self._view.segments
                self._closed = True
            for seg in segments:
                seg.deleted = True
                seg.close()
                seg.release_file()
            self._files.clear()
            self._dir_lock.release()
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Log({self.directory!r}, segments={self.num_segments}, "
            f"log_start_offset={self._log_start_offset}, log_end_offset={self._log_end_offset})"
        )
