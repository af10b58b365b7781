"""Truncating a Log: ``truncate_to`` (replica divergence) and ``truncate_fully_and_start_at``.

Kafka's ``UnifiedLog.truncateTo`` / ``truncateFullyAndStartAt``. The cut itself (the
active segment's file and indexes, the segment list, the offsets, the producer state)
happens under the append lock; the file work around it does not:

1. before the cut, the recovery-point checkpoint is lowered to the base offset of the
   segment that will hold the new log end (a checkpoint above the new log end would let
   a crash skip the recovery of what is appended next); it is a safe value whatever
   appends do meanwhile, because they only add segments above the cut;
2. the cut, and the new segment list is published;
3. the dropped segments are renamed ``.deleted`` (:mod:`logcore.segment_files`), both
   checkpoints are written with their exact values, then the leader-epoch file.

Thread-safety: the file lock, then the checkpoint lock are held throughout (no swap,
retention pass or periodic checkpoint interleaves); the append lock only for step 2.
Functions of the Log (``Log.truncate_to`` calls them), not a public API.
"""

from __future__ import annotations

import bisect
from typing import Any

from .segment import LogSegment


def truncate_to(log: Any, offset: int) -> bool:
    """``Log.truncate_to``: returns True if any record was removed. With nothing to cut
    (``offset`` at or past the log end) the leader-epoch cache still drops the epochs that
    start at the log end."""
    if offset < 0:
        raise ValueError(f"cannot truncate to negative offset {offset}")
    with log._files.lock, log._checkpoint_lock:
        with log._lock:
            log._check_open()
            cut = offset < log._log_end_offset
            if not cut:
                # No record goes, but an epoch that starts at the log end does: a broker
                # that became leader (the epoch starts at its log end) and appended
                # nothing before losing the leadership would otherwise name that epoch
                # as its last in every fetch, and its new leader would answer with the
                # same divergence for ever (Kafka's truncateTo does the same).
                log.leader_epoch_cache.truncate_from_end(log._log_end_offset, write=False)
            full = cut and offset < log._log_start_offset
            if cut and not full:
                # Under the file lock only appends change the list, at its end: the
                # segment that keeps the new log end is this one whatever they do.
                view = log._view
                floor = view.segments[max(bisect.bisect_right(view.bases, offset - 1) - 1, 0)]
        if not cut:
            log.leader_epoch_cache.write_if_dirty()
            return False
        if full:
            truncate_fully_and_start_at(log, offset)
            return True
        log._write_recovery_checkpoint(min(log._recovery_point, floor.base_offset))
        with log._lock:
            segments = list(log._view.segments)
            keep = [s for s in segments if s.base_offset < offset] or segments[:1]
            drop = segments[len(keep) :]
            active = keep[-1]
            for seg in drop:
                seg.deleted = True
            if not active.writable:
                active.unseal()
            active.truncate_to(offset)
            log._set_view(keep)
            log._log_end_offset = active.read_next_offset()
            if log._log_start_offset > log._log_end_offset:
                # The batch holding the log start offset straddled the cut and went whole.
                log._log_start_offset = log._log_end_offset
            log._truncations += 1
            log._recovery_point = min(log._recovery_point, log._log_end_offset)
            log.leader_epoch_cache.truncate_from_end(log._log_end_offset, write=False)
            log._load_producer_state()
        _files_after_cut(log, drop)
        return True


def truncate_fully_and_start_at(log: Any, offset: int) -> None:
    """``Log.truncate_fully_and_start_at``: every segment goes, the log restarts empty."""
    if offset < 0:
        raise ValueError(f"cannot start a log at negative offset {offset}")
    with log._files.lock, log._checkpoint_lock:
        log._check_open()
        log._write_recovery_checkpoint(min(log._recovery_point, offset))
        with log._lock:
            log._check_open()
            old = list(log._view.segments)
            for seg in old:
                seg.deleted = True
            # The new segment takes the file names of an old one with the same base offset
            # (a restart at 0 of a log that starts at 0): that one is renamed .deleted
            # first, under the append lock. A full truncation is a follower's (an offset
            # out of range, StopReplica with delete), which no produce append meets.
            clash = [seg for seg in old if seg.base_offset == offset]
            if clash:
                log._files.retire(clash, log.clock.time_ms(), log.config.file_delete_delay_ms)
                old = [seg for seg in old if seg.base_offset != offset]
            new = LogSegment(
                log.directory,
                offset,
                log.config,
                created_ms=log.clock.time_ms(),
                writable=True,
                create=True,
            )
            new.offset_index  # noqa: B018 - create both index files with the segment
            new.time_index  # noqa: B018
            log._set_view([new])
            log._log_end_offset = offset
            log._log_start_offset = offset
            log._recovery_point = offset
            log._truncations += 1
            log.leader_epoch_cache.clear(write=False)
            log.producer_state.clear(offset)
        _files_after_cut(log, old)
        log.producer_state.delete_snapshots(lambda _off: True)


def _files_after_cut(log: Any, dropped: list[LogSegment]) -> None:
    """Step 3: after the new list is published, under the file and checkpoint locks."""
    now = log.clock.time_ms()
    log._files.retire(dropped, now, log.config.file_delete_delay_ms)
    log._files.delete_due(now)
    log._write_checkpoints_now()
    log.leader_epoch_cache.write_if_dirty()
