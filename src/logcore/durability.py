"""The durability side of a Log: flushes up to an offset, and checkpoint files.

Kafka's model (``UnifiedLog.flush``, ``LogManager``'s checkpoint tasks): an append is in
the page cache when it returns. The **recovery point** is the offset below which
everything is fsynced. ``flush_up_to`` fsyncs the segments between it and a target offset
*without* holding the append lock (appends and reads go on while the disk works) and then
advances it; flushes run one at a time. The recovery point and the log start offset reach
their checkpoint files only through ``checkpoint_recovery_point`` /
``checkpoint_log_start_offset`` (a LogManager calls them every
``log.flush.offset.checkpoint.interval.ms`` / ``log.flush.start.offset.checkpoint.interval.ms``),
``flush()``, ``close()``, DeleteRecords, and at once after a truncation (a checkpoint above
the new log end would let a crash skip the recovery of what is appended next).
After a roll (outside the append lock) the roll's producer snapshot is written and the
log's ``on_roll`` hook gets the new base offset (a LogManager schedules ``flush_up_to(base)``
on a background thread, as Kafka's ``UnifiedLog.roll`` does); a ``flush_messages`` /
``flush_ms`` policy flushes from the appending thread after the append lock is released.

Thread-safety: every method here may run on any thread (a scheduler's). Lock order: the
file lock (:mod:`logcore.segment_files`), then the checkpoint lock, then the append lock;
the flush lock, then the append lock. No checkpoint file is written and no fsync runs
under the append lock.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    fsync_dir,
    write_offset_checkpoint,
)
from .clock import Clock
from .errors import LogcoreError
from .segment import filename_prefix, fsync_path


class LogDurability:
    """Mixin of :class:`logcore.log.Log`: flushes and checkpoints."""

    directory: str
    clock: Clock
    _lock: threading.RLock
    _flush_lock: threading.Lock
    _checkpoint_lock: threading.RLock
    _closed: bool
    _log_end_offset: int
    _log_start_offset: int
    _recovery_point: int
    _checkpointed_rp: int
    _checkpointed_lso: int
    _truncations: int
    _last_flush_ms: int
    _unflushed_messages: int
    _topic_partition: tuple[str, int]
    _view: Any
    #: Called with the seconds each flush's fsyncs took (any thread: the flushing one), or
    #: None. The broker's flush-time histogram (pylog.log.LogManager) is hooked here.
    on_flush: Callable[[float], None] | None = None

    def flush_up_to(self, offset: int) -> bool:
        """fsync every segment holding offsets in [recovery_point, offset) and advance the
        recovery point to ``offset`` (capped at the log end). Kafka's ``UnifiedLog.flush``.

        The fsyncs run without the append lock, so appends (and reads) go on meanwhile;
        flushes run one at a time. The directory is fsynced too when a segment file was
        created since the last flush. The new recovery point is not written to its
        checkpoint file here (see ``checkpoint_recovery_point``).

        Returns:
            True if the recovery point advanced; False if there was nothing to flush, the
            log is closed, or a truncation happened meanwhile.

        Raises:
            LogDirError: an fsync failed (the recovery point stays where it was).
        """
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return False
                offset = min(offset, self._log_end_offset)
                start = self._recovery_point
                if offset <= start:
                    return False
                generation = self._truncations
                segments = self._view.segments
            todo = [seg for i, seg in enumerate(segments)
                    if seg.base_offset < offset
                    and (i + 1 == len(segments) or segments[i + 1].base_offset > start)]
            started = time.perf_counter()
            for seg in todo:
                seg.flush()
            # The producer snapshot a roll wrote at ``offset`` (Kafka flushes it with the
            # rolled segment, in the same background task).
            fsync_path(os.path.join(self.directory, filename_prefix(offset) + ".snapshot"))
            if any(seg.base_offset >= start for seg in todo) or len(todo) > 1:
                fsync_dir(self.directory)
            if self.on_flush is not None:
                self.on_flush(time.perf_counter() - started)
            with self._lock:
                if self._closed or generation != self._truncations:
                    return False
                if offset > self._recovery_point:
                    self._recovery_point = offset
                self._last_flush_ms = self.clock.time_ms()
                return True

    def flush(self) -> None:
        """fsync everything appended so far, advance the recovery point to the log end
        offset and write it to the checkpoint file.

        Raises:
            LogDirError: an fsync or the checkpoint write failed.
            LogcoreError: the log is closed.
        """
        if self._closed:
            raise LogcoreError(f"log {self.directory} is closed")
        self.flush_up_to(self._log_end_offset)
        self._unflushed_messages = 0
        self.checkpoint_recovery_point()

    def checkpoint_recovery_point(self) -> bool:
        """Write the recovery point to ``recovery-point-offset-checkpoint`` if it changed
        since the last write (Kafka's periodic ``checkpointLogRecoveryOffsets``).

        Returns True if the file was written. Any thread; does not take the append lock.
        """
        with self._checkpoint_lock:
            rp = self._recovery_point
            if self._closed or rp == self._checkpointed_rp:
                return False
            write_offset_checkpoint(os.path.join(self.directory, RECOVERY_POINT_CHECKPOINT),
                                    {self._topic_partition: rp})
            self._checkpointed_rp = rp
            return True

    def checkpoint_log_start_offset(self) -> bool:
        """Write the log start offset to ``log-start-offset-checkpoint`` if it changed
        since the last write (Kafka's periodic ``checkpointLogStartOffsets``).

        Returns True if the file was written. Any thread; does not take the append lock.
        """
        with self._checkpoint_lock:
            lso = self._log_start_offset
            if self._closed or lso == self._checkpointed_lso:
                return False
            write_offset_checkpoint(os.path.join(self.directory, LOG_START_OFFSET_CHECKPOINT),
                                    {self._topic_partition: lso})
            self._checkpointed_lso = lso
            return True

    def _write_recovery_checkpoint(self, rp: int) -> None:
        """Write ``rp`` as the recovery point (a truncation, before it cuts). Caller holds
        the checkpoint lock, not the append lock."""
        write_offset_checkpoint(os.path.join(self.directory, RECOVERY_POINT_CHECKPOINT),
                                {self._topic_partition: rp})
        self._checkpointed_rp = rp

    def _write_checkpoints_now(self) -> None:
        """Both checkpoints (truncation and close). Caller holds the checkpoint lock, not
        the append lock."""
        rp, lso = self._recovery_point, self._log_start_offset
        self._write_recovery_checkpoint(rp)
        write_offset_checkpoint(os.path.join(self.directory, LOG_START_OFFSET_CHECKPOINT),
                                {self._topic_partition: lso})
        self._checkpointed_lso = lso
