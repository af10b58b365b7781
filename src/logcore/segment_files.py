"""The file side of removing and replacing segments: renames, unlinks, directory fsyncs.

A Log changes its segment list in memory under its append lock (a pointer swap that
readers and appends see at once) and leaves the files to this module, which works
*without* that lock: a rename, an unlink or an fsync may wait for a slow disk for tens of
milliseconds, and an append (on the broker's event loop, for a small one) must never
wait behind it. The file operations of one log are serialised among themselves by
``SegmentFiles.lock``: two swaps, or a swap and a retention pass or a truncation, never
interleave their renames.

Crash ordering (what :func:`logcore.loader.remove_temp_files_and_complete_swaps` settles
at the next open):

- **retire** (retention, truncation, the old segments of a swap): every file of a segment
  is renamed ``<name>.deleted`` (the loader deletes what it finds so named), then unlinked
  ``file.delete.delay.ms`` later by ``delete_due``. A crash before the rename leaves a
  segment the in-memory list had already dropped: retention finds it again; a truncated
  one is above the log end offset the checkpoint written before the truncation allows,
  and recovery scans and cuts it.
- **swap** (Kafka's ``LocalLog.replaceSegments``): (1) the cleaner wrote
  ``<base>.*.cleaned`` (fsynced); (2) ``.cleaned`` -> ``.swap``, directory fsync;
  (3) the old segments -> ``.deleted``, directory fsync; (4) ``.swap`` -> final names,
  directory fsync; (5) the Log publishes the new segment list. Before (2) completes the
  loader drops the ``.cleaned`` files and keeps the old segments; from (2) on it completes
  the swap. The unlinks of (3) run only after (5): a reader still on the old list maps
  the ``.deleted`` files meanwhile.

Readers (:mod:`logcore.reads`) are lock-free: a segment is marked ``deleted`` before its
first rename, so a reader of an older list opens ``<name>.deleted``; one that finds the
files gone re-reads the newer list, which was published before the unlink.

Thread-safety: every method needs ``lock`` held by the caller (an RLock: a truncation
below the log start restarts the log within the same hold). Lock order in a Log: this
lock, then the checkpoint lock, then the append lock; none of them is held here across
another Log's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from .checkpoint import fsync_dir
from .errors import LogDirError
from .segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)

# The files of one cleaned segment, indexes first: a crash that leaves the .log
# still .cleaned makes the loader drop the whole set. The .txnindex exists only when the
# cleaned segment keeps an ABORT marker with data.
CLEANED_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)


def cleaned_path(directory: str, base: int, suffix: str) -> str:
    return os.path.join(directory, filename_prefix(base) + suffix + CLEANED_SUFFIX)


class SegmentFiles:
    """One log directory's segment file operations and its ``.deleted`` queue."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        #: Serialises the file operations of one log (outermost of a Log's locks).
        self.lock = threading.RLock()
        self._pending: list[tuple[int, list[str]]] = []

    def __len__(self) -> int:
        """Segments renamed ``.deleted`` whose unlink is still to come."""
        return len(self._pending)

    # ------------------------------------------------------------------ retire
    def retire(self, segments: Sequence[LogSegment], now: int, delay_ms: int) -> None:
        """Rename every file of ``segments`` to ``<name>.deleted`` now; ``delete_due``
        unlinks them once ``delay_ms`` has passed (the caller runs it after publishing
        the segment list without them).

        Raises:
            LogDirError: a rename failed (the segments already renamed stay queued).
        """
        for seg in segments:
            seg.deleted = True  # before any rename: readers switch to the .deleted names
        for seg in segments:
            try:
                paths = seg.rename_deleted()
            except OSError as exc:
                raise LogDirError(
                    exc.errno, f"cannot rename segment {seg.base_offset}", path=seg.path(LOG_SUFFIX)
                ) from exc
            self._pending.append((now + delay_ms, paths))

    def delete_due(self, now: int) -> None:
        """Unlink the ``.deleted`` files whose delay has passed."""
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

    # ------------------------------------------------------------------ swap
    def discard_cleaned(self, base: int) -> None:
        """Remove the ``.cleaned`` files of ``base`` (a swap that no longer applies)."""
        for suffix in CLEANED_SUFFIXES:
            try:
                os.unlink(cleaned_path(self.directory, base, suffix))
            except FileNotFoundError:
                pass

    def swap_files(
        self,
        base: int,
        old: Sequence[LogSegment],
        now: int,
        delay_ms: int,
        hook: Callable[[str], None] | None = None,
    ) -> None:
        """Steps (2)-(4) of a swap (module docstring): afterwards the cleaned segment's
        files have their final names and ``old`` is queued for deletion. The caller then
        opens the new segment, publishes the list and runs ``delete_due``.

        Args:
            hook: called with "swap" after (2) and "deleted" after (3) (crash tests).
        """
        d = self.directory
        for suffix in CLEANED_SUFFIXES:
            src = cleaned_path(d, base, suffix)
            if suffix == TXN_INDEX_SUFFIX and not os.path.exists(src):
                continue
            os.rename(src, src[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX)
        fsync_dir(d)
        if hook is not None:
            hook("swap")
        self.retire(old, now, delay_ms)
        fsync_dir(d)
        if hook is not None:
            hook("deleted")
        for suffix in CLEANED_SUFFIXES:
            final = os.path.join(d, filename_prefix(base) + suffix)
            if suffix == TXN_INDEX_SUFFIX and not os.path.exists(final + SWAP_SUFFIX):
                continue
            os.rename(final + SWAP_SUFFIX, final)
        fsync_dir(d)


__all__ = ["CLEANED_SUFFIXES", "SegmentFiles", "cleaned_path"]
