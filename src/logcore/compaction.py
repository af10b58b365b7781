"""What a Log offers its cleaner (Kafka's ``UnifiedLog`` / ``LocalLog`` for compaction).

:mod:`logcore.cleaner` decides what to keep; this mixin of :class:`logcore.log.Log`
answers where the cleanable section lies and swaps cleaned segments in:

- ``first_dirty_offset``: where the last clean stopped (the ``cleaner-offset-checkpoint``
  file, Kafka's format: ``topic partition offset``; Kafka keeps one per log dir, a
  standalone Log keeps its own next to its segments, as with the recovery point);
- ``first_uncleanable_offset``: never the active segment, nothing at or above an
  ``upper_bound`` the owner gives (the high watermark) or the last stable offset (an
  open transaction's data is not known to be committed or aborted yet), nothing in a
  segment with a record newer than ``min_compaction_lag_ms``;
- ``replace_segments``: Kafka's ``LocalLog.replaceSegments``, crash-safe:
  (1) the cleaner wrote ``<base>.log.cleaned`` and its indexes (fsynced);
  (2) ``.cleaned`` -> ``.swap``; (3) the old segments -> ``.deleted`` (unlinked after
  ``file_delete_delay_ms``); (4) ``.swap`` -> final names; (5) the new segment list is
  published. A crash in between is settled by the next open
  (:func:`logcore.loader.remove_temp_files_and_complete_swaps`): before (2) the
  ``.cleaned`` files go and the old segments stay; from (2) on the swap completes.
  The renames live in :mod:`logcore.segment_files`.

Thread-safety: ``replace_segments`` does the renames and directory fsyncs under the log's
file lock only (other swaps, retention and truncations wait; appends and reads do not),
and holds the append lock just to check the segments and to publish the new list. Reads
keep the segment list they started with, whose files stay open after the renames.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .checkpoint import read_offset_checkpoint, write_offset_checkpoint
from .config import LogConfig
from .errors import LogcoreError
from .segment import LogSegment
from .segment_files import SegmentFiles

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"

#: Test hook: called with "cleaned" (a group's .cleaned files written), "swap" (they
#: are renamed .swap), "deleted" (the old segments renamed) before the next step. A crash test raises from it to leave that state.
phase_hook: Callable[[str], None] | None = None


class LogCompaction:
    """Mixin of :class:`logcore.log.Log`: the cleaner's side of the log."""

    directory: str
    clock: Any
    _lock: threading.RLock
    _checkpoint_lock: threading.RLock
    _closed: bool
    _log_start_offset: int
    _log_end_offset: int
    _topic_partition: tuple[str, int]
    _files: SegmentFiles
    _snapshot: Any
    producer_state: Any

    @property
    def config(self) -> LogConfig:  # pragma: no cover - Log defines it
        raise NotImplementedError

    def _set_view(self, segments: list[LogSegment]) -> None:  # pragma: no cover - Log
        raise NotImplementedError

    # ------------------------------------------------------------------ checkpoint
    def _cleaner_checkpoint_path(self) -> str:
        return os.path.join(self.directory, CLEANER_CHECKPOINT)

    @property
    def first_dirty_offset(self) -> int:
        """The first offset the cleaner has not cleaned (the checkpoint, kept within
        [log_start_offset, log_end_offset]: a stale checkpoint means start over)."""
        entries = read_offset_checkpoint(self._cleaner_checkpoint_path())
        offset = next(iter(entries.values())) if entries else -1
        if offset < self._log_start_offset or offset > self._log_end_offset:
            return self._log_start_offset
        return offset

    def checkpoint_cleaned(self, offset: int) -> None:
        """Record that everything below ``offset`` is clean (written atomically, fsynced)."""
        with self._checkpoint_lock:
            write_offset_checkpoint(self._cleaner_checkpoint_path(),
                                    {self._topic_partition: offset})

    # ------------------------------------------------------------------ bounds
    def first_uncleanable_offset(self, now_ms: int | None = None,
                                 upper_bound: int | None = None) -> int:
        """Kafka's ``LogCleanerManager.cleanableOffsets``: the first offset the cleaner
        must not touch: the active segment's base, ``upper_bound`` (the owner's high
        watermark), or the base of the first dirty segment holding a record newer than
        ``min_compaction_lag_ms``, whichever is lowest."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        segments = self._snapshot.segments
        upper = segments[-1].base_offset
        if upper_bound is not None:
            upper = min(upper, upper_bound)
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is not None:
            upper = min(upper, first_unstable)
        lag = self.config.min_compaction_lag_ms
        if lag > 0:
            first_dirty = self.first_dirty_offset
            for i, seg in enumerate(segments[:-1]):
                if segments[i + 1].base_offset <= first_dirty:
                    continue
                if seg.base_offset >= upper:
                    break
                if not seg.size:
                    continue  # a segment the cleaner emptied protects nothing
                if seg.max_timestamp < 0:
                    seg.load_max_timestamp()
                if seg.largest_timestamp() > now - lag:
                    upper = min(upper, seg.base_offset)
                    break
        return upper

    def dirty_segments_due(self, now_ms: int | None = None) -> bool:
        """Kafka's ``max.compaction.lag.ms`` rule: the first dirty segment's first record
        is older than the max lag, so the log must be cleaned whatever its dirty ratio."""
        lag = self.config.max_compaction_lag_ms
        if lag >= 2**63 - 1:
            return False
        now = self.clock.time_ms() if now_ms is None else now_ms
        first_dirty = self.first_dirty_offset
        segments = self._snapshot.segments
        for i, seg in enumerate(segments[:-1]):
            if segments[i + 1].base_offset <= first_dirty or not seg.size:
                continue
            first_ts = seg.first_batch_timestamp()
            return 0 <= first_ts < now - lag
        return False

    # ------------------------------------------------------------------ swap
    def replace_segments(self, old: list[LogSegment], base: int) -> bool:
        """Swap the cleaned segment ``<base>.*.cleaned`` in for the segments ``old``.

        Returns False (and removes the ``.cleaned`` files) when ``old`` is no longer a
        run of the log's segments (retention or a truncation removed some meanwhile).

        Raises:
            LogcoreError: the log is closed. LogDirError / OSError: a rename failed; the
            files are then in one of the states a reopen settles.
        """
        d = self.directory
        files = self._files
        with files.lock:
            # Under the file lock the segment list changes only at its end (appends and
            # rolls): a run of old segments found here stays a run until the publish.
            with self._lock:
                if self._closed:
                    raise LogcoreError(f"log {d} is closed")
                i = _find_run(self._snapshot.segments, old)
            if i < 0 or old[0].base_offset != base:
                files.discard_cleaned(base)
                return False
            now = self.clock.time_ms()
            files.swap_files(base, old, now, self.config.file_delete_delay_ms, phase_hook)
            new = LogSegment(d, base, self.config, created_ms=old[-1].created_ms,
                             writable=False, create=False)
            with self._lock:
                segments = list(self._snapshot.segments)
                i = _find_run(segments, old)
                self._set_view(segments[:i] + [new] + segments[i + len(old):])
            files.delete_due(now)
            return True


def _find_run(segments: Sequence[LogSegment], old: Sequence[LogSegment]) -> int:
    """Where ``old`` starts as a run of inactive segments in ``segments`` (-1: it is not)."""
    for k, s in enumerate(segments):
        if s is old[0]:
            if (list(segments[k:k + len(old)]) == list(old)
                    and k + len(old) < len(segments)):
                return k
            return -1
    return -1
