"""Retention: which old segments go, and the delayed deletion of their files.

Kafka's ``UnifiedLog.deleteOldSegments``: a non-active segment is deletable when

(a) the next segment starts at or below the log start offset (DeleteRecords, or a log
    start offset that retention itself advanced),
(b) its newest record is older than ``retention.ms`` (the time index's last entry, or the
    file's mtime when the segment holds no timestamp), or
(c) the log without it is still at least ``retention.bytes``;

each rule deletes a prefix of the segment list, and the longest prefix wins. Deleted
segments are renamed ``<name>.deleted`` at once and unlinked ``file.delete.delay.ms``
later, so a reader that found the segment just before keeps reading it meanwhile (its
descriptor stays open in any case; see :mod:`logcore.region`).

Thread-safety: called by the Log under its lock.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .config import LogConfig
from .errors import LogDirError
from .segment import LogSegment


def deletable_prefix(segments: Sequence[LogSegment], log_start_offset: int, config: LogConfig,
                     now: int) -> int:
    """How many segments from the oldest retention deletes (never the active one)."""
    candidates = segments[:-1]
    # (a) log start offset breach: the next segment starts at or below it.
    n_lso = 0
    while n_lso < len(candidates) and segments[n_lso + 1].base_offset <= log_start_offset:
        n_lso += 1
    # (b) time: newest record older than retention_ms; (b) and (c) only when the
    # cleanup policy includes delete (a compact-only log keeps every segment).
    n_time = 0
    if config.retention_ms >= 0 and config.delete:
        while n_time < len(candidates):
            seg = candidates[n_time]
            if seg.max_timestamp < 0:
                seg.load_max_timestamp()
            if now - seg.largest_timestamp() > config.retention_ms:
                n_time += 1
            else:
                break
    # (c) size: drop oldest while what remains is still >= retention_bytes.
    n_size = 0
    if config.retention_bytes >= 0 and config.delete:
        total = sum(s.size for s in segments)
        while (n_size < len(candidates)
               and total - candidates[n_size].size >= config.retention_bytes):
            total -= candidates[n_size].size
            n_size += 1
    return max(n_lso, n_time, n_size)


class DeleteQueue:
    """Segments renamed ``.deleted``, waiting for ``file.delete.delay.ms``."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, list[str]]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, seg: LogSegment, now: int, delay_ms: int) -> None:
        """Rename the segment's files now; unlink them at ``now + delay_ms``."""
        try:
            paths = seg.rename_deleted()
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot rename segment {seg.base_offset}",
                              path=seg.path(".log")) from exc
        self._pending.append((now + delay_ms, paths))
        if delay_ms == 0:
            self.delete_due(now)

    def delete_due(self, now: int) -> None:
        keep = []
        for due, paths in self._pending:
            if due <= now:
                for p in paths:
                    try:
                        os.unlink(p)
                    except FileNotFoundError:
                        pass
            else:
                keep.append((due, paths))
        self._pending = keep

    def clear(self) -> None:
        self._pending = []
