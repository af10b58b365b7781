"""LogCleaner: the threads that compact ``cleanup.policy=compact`` logs (Kafka's
``LogCleaner`` + ``LogCleanerManager``).

Each of ``threads`` cleaner threads owns a :class:`logcore.cleaner.Cleaner` (an offset
map of ``dedupe_buffer_size / threads`` bytes, Kafka's split) and loops: pick the
filthiest compacted log that no other thread is cleaning (its dirty ratio over
``min.cleanable.dirty.ratio``, or forced by ``max.compaction.lag.ms``;
:func:`logcore.cleaner.filthiest`), clean one round of it, and when nothing is cleanable
sleep ``backoff_ms`` (Kafka's ``log.cleaner.backoff.ms``, 15 s) or until ``wake()``.

The logs come from a callable (the LogManager's open partitions); ``upper_bound`` may
give each log's high watermark, above which nothing is cleaned. A log whose clean fails
(a corrupt batch, an I/O error) is marked uncleanable and skipped from then on, as
Kafka's ``markPartitionUncleanable``; a log closed meanwhile (topic deleted) is not an
error. ``pause(log)`` aborts a running clean of that log (it stops at its next batch or
swap: Kafka's ``abortAndPauseCleaning`` before a truncation or a deletion), waits for it
to stop and keeps the threads off the log until ``resume(log)``. After each pass a thread runs retention (``apply_retention``) on the compacted
logs no thread is cleaning (Kafka's ``deletableLogs``): segments below the log start
offset go, time and size retention apply to ``compact,delete`` logs, and the ``.deleted``
files of earlier swaps are unlinked once their ``file.delete.delay.ms`` passed; the owner
runs retention on the other logs.

I/O throttling: ``max_io_bytes_per_second`` is shared out evenly between the threads
(each Cleaner throttles its own reads and writes to rate / threads); Kafka shares one
throttler, which gives the same total.

Thread-safety: every method may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import logcore
from logcore.cleaner import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_IO_BUFFER_SIZE,
    DEFAULT_LOAD_FACTOR,
    Cleaner,
    CleaningAbortedError,
    CleanStats,
    filthiest,
)

#: How often a pause still waiting for a clean round is reported.
PAUSE_WARN_S = 10.0

log = logging.getLogger("pylog.log.cleaner")

DEFAULT_BACKOFF_MS = 15_000  # log.cleaner.backoff.ms
# Smallest read / write chunk given to a Cleaner. log.cleaner.io.buffer.size may be 0 in
# Kafka, whose cleaner grows its buffers to fit the batch at hand; logcore reads one chunk
# to see a batch header, then the whole batch whatever the chunk.
MIN_IO_BUFFER_SIZE = 4096


class LogCleaner:
    """Cleaner threads over the logs ``logs()`` returns.

    Args:
        logs: returns the open logs (any iterable of ``logcore.Log``); called each pass.
        threads: ``log.cleaner.threads`` (1); 0 starts no thread (tests call
            ``clean_once``).
        dedupe_buffer_size: ``log.cleaner.dedupe.buffer.size`` for all threads (128 MiB).
        load_factor: ``log.cleaner.io.buffer.load.factor`` (0.9).
        io_buffer_size: ``log.cleaner.io.buffer.size`` (512 KiB).
        max_io_bytes_per_second: ``log.cleaner.io.max.bytes.per.second`` (no limit).
        backoff_ms: ``log.cleaner.backoff.ms``: the sleep when nothing is cleanable.
        upper_bound: ``upper_bound(log)`` -> the log's high watermark (None: no bound).

    Raises:
        ValueError: threads < 0, or a buffer too small for one map per thread.
    """

    def __init__(
        self, logs: Callable[[], Iterable[Any]], *, threads: int = 1,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
        max_io_bytes_per_second: float = float("inf"),
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        upper_bound: Callable[[Any], int | None] | None = None,
    ) -> None:
        if threads < 0:
            raise ValueError(f"threads must be >= 0, got {threads}")
        self._logs = logs
        self._upper_bound = upper_bound
        self.backoff_s = backoff_ms / 1000
        n = max(threads, 1)
        per_thread = dedupe_buffer_size // n
        self._cleaners = [
            Cleaner(per_thread, load_factor=load_factor,
                    max_io_bytes_per_second=max_io_bytes_per_second / n,
                    io_buffer_size=max(io_buffer_size, MIN_IO_BUFFER_SIZE))
            for _ in range(n)
        ]
        self._free: list[Cleaner] = list(self._cleaners)
        self._n_threads = threads
        self._lock = threading.Condition()
        self._in_progress: set[Any] = set()
        # Logs whose running clean was asked to stop (by ``pause``).
        self._aborting: set[Any] = set()
        self._paused: dict[Any, int] = {}
        #: Logs whose clean failed (skipped from then on; Kafka's uncleanable partitions).
        self.uncleanable: set[Any] = set()
        #: Rounds completed, over all threads.
        self.rounds = 0
        self.last_stats: CleanStats | None = None
        #: time.monotonic() when the last round finished (None: none yet); for metrics.
        self.last_round_monotonic: float | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Start the cleaner threads (idempotent)."""
        with self._lock:
            if self._threads:
                return
            self._stop.clear()
            for i in range(self._n_threads):
                t = threading.Thread(target=self._run, name=f"kafka-log-cleaner-thread-{i}",
                                     daemon=True)
                self._threads.append(t)
                t.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads; a clean in progress finishes its current round first."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            threads, self._threads = self._threads, []
        for t in threads:
            t.join(timeout_s)

    def wake(self) -> None:
        """Make sleeping threads look for work now."""
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether cleaner threads run (they look after the compacted logs' retention)."""
        with self._lock:
            return bool(self._threads)

    def dead_threads(self) -> int:
        """Cleaner threads started and no longer alive while the cleaner runs (Kafka's
        DeadThreadCount; any thread)."""
        with self._lock:
            threads = list(self._threads)
        if self._stop.is_set():
            return 0
        return sum(1 for t in threads if not t.is_alive())

    def forget(self, plog: Any) -> None:
        """Drop what is kept about ``plog`` (closed for good: its topic was deleted)."""
        with self._lock:
            self.uncleanable.discard(plog)
            self._paused.pop(plog, None)

    # ------------------------------------------------------------------ pausing
    def pause(self, plog: Any, timeout_s: float | None = None) -> bool:
        """Abort a running clean of ``plog`` (Kafka's ``abortAndPauseCleaning``), wait until
        no thread cleans it, and keep them off it until ``resume``.

        Returns False if a running clean did not end within ``timeout_s`` (the log
        stays paused either way: call ``resume``)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        waited = 0.0
        with self._lock:
            self._paused[plog] = self._paused.get(plog, 0) + 1
            if plog in self._in_progress:
                self._aborting.add(plog)
            while plog in self._in_progress:
                step = PAUSE_WARN_S if deadline is None else min(PAUSE_WARN_S,
                                                                deadline - time.monotonic())
                if step <= 0:
                    return False
                if not self._lock.wait_for(lambda: plog not in self._in_progress, step):
                    waited += step
                    # A clean round that does not end holds up a truncation or a deletion
                    # (a follower, a topic deletion): never silently.
                    log.warning("log cleaner: pausing %s has waited %.0f s for its clean "
                                "round to end", plog.directory, waited)
        return True

    def resume(self, plog: Any) -> None:
        with self._lock:
            n = self._paused.get(plog, 0) - 1
            if n > 0:
                self._paused[plog] = n
            else:
                self._paused.pop(plog, None)

    @contextmanager
    def paused(self, plog: Any) -> Iterator[None]:
        """``with cleaner.paused(log):`` truncate or delete it safely."""
        self.pause(plog)
        try:
            yield
        finally:
            self.resume(plog)

    # ------------------------------------------------------------------ work
    def clean_once(self) -> CleanStats | None:
        """Pick the filthiest cleanable log and clean one round of it, on this thread.

        Returns the round's stats, or None when no log needed cleaning.
        """
        with self._lock:
            if not self._free:
                return None
            busy = set(self._in_progress) | set(self._paused) | self.uncleanable
            candidates = [lg for lg in self._logs() if lg not in busy]
        bounds = None
        if self._upper_bound is not None:
            bounds = {}
            for lg in candidates:
                b = self._upper_bound(lg)
                if b is not None:
                    bounds[lg] = b
        try:
            pick = filthiest(candidates, upper_bounds=bounds)
        except logcore.LogcoreError as exc:  # a log closed while measured
            log.debug("measuring logs to clean: %s", exc)
            return None
        if pick is None:
            return None
        target = pick.log
        with self._lock:
            if target in self._in_progress or target in self._paused or not self._free:
                return None
            self._in_progress.add(target)
            cleaner = self._free.pop()
        try:
            stats = cleaner.clean(target, upper_bound=None if bounds is None else bounds.get(target),
                                  should_abort=lambda: target in self._aborting)
        except CleaningAbortedError:
            log.info("log cleaner: the clean of %s was aborted (paused for a truncation or a "
                     "deletion)", target.directory)
            return None
        except logcore.LogcoreError as exc:
            if target.closed:
                return None
            self._mark_uncleanable(target, exc)
            return None
        except OSError as exc:
            if target.closed:  # deleted meanwhile: its files went with it
                return None
            self._mark_uncleanable(target, exc)
            return None
        finally:
            with self._lock:
                self._in_progress.discard(target)
                self._aborting.discard(target)
                self._free.append(cleaner)
                self._lock.notify_all()
        if stats is not None:
            with self._lock:
                self.rounds += 1
                self.last_stats = stats
                self.last_round_monotonic = time.monotonic()
            log.info("cleaned %s: offsets [%d, %d), %d -> %d bytes in %.3f s",
                     target.directory, stats.first_dirty_offset, stats.end_offset,
                     stats.bytes_read, stats.bytes_written, stats.elapsed_s)
        return stats

    def _mark_uncleanable(self, target: Any, exc: BaseException) -> None:
        log.error("log cleaner: %s cannot be cleaned, skipped from now on: %s",
                  target.directory, exc)
        with self._lock:
            self.uncleanable.add(target)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention of the compacted logs that no thread cleans, none paused or
        uncleanable (Kafka's ``deletableLogs`` then ``deleteOldSegments``). Returns the
        number of segments removed."""
        with self._lock:
            busy = set(self._in_progress) | set(self._paused) | self.uncleanable
            mine = [lg for lg in self._logs()
                    if lg not in busy and not lg.closed and lg.config.compact]
            self._in_progress.update(mine)
        removed = 0
        try:
            for lg in mine:
                try:
                    removed += lg.apply_retention(now_ms)
                except logcore.LogcoreError as exc:
                    if not lg.closed:
                        log.error("retention of %s failed: %s", lg.directory, exc)
        finally:
            with self._lock:
                self._in_progress.difference_update(mine)
                self._aborting.difference_update(mine)  # retention is not aborted: it ended
                self._lock.notify_all()
        return removed

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.clean_once()
                self.delete_old_segments()
            except Exception:  # a bug must not kill the thread silently
                log.exception("log cleaner thread failed; backing off")
                stats = None
            if stats is None and not self._stop.is_set():
                self._wake.wait(self.backoff_s)
                self._wake.clear()
