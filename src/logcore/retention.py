"""Retention: which old segments go, and the delayed deletion of their files.

Kafka's ``UnifiedLog.deleteOldSegments``: a non-active segment is deletable when

(a) the next segment starts at or below the log start offset (DeleteRecords, or a log
    start offset that retention itself advanced),
(b) its newest record is older than ``retention.ms`` (the time index's last entry, or the
    file's mtime when the segment holds no timestamp), or
(c) the log without it is still at least ``retention.bytes``;

each rule deletes a prefix of the segment list, and the longest prefix wins. Deleted
segments are renamed ``<name>.deleted`` right after the Log drops them from its list and
unlinked ``file.delete.delay.ms`` later (:mod:`logcore.segment_files`, without the append
lock), so a reader that found the segment just before keeps reading it meanwhile (its
descriptor stays open in any case; see :mod:`logcore.region`).

Thread-safety: ``deletable_prefix`` reads segment metadata (it may map a time index) on a
snapshot of the segment list; the Log calls it without its append lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import LogConfig
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
