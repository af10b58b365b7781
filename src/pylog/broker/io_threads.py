"""Disk work off the event loop: the broker's I/O thread pool (Kafka's ``num.io.threads``).

The event loop must never wait for a disk: appends that may (compressed batches to
decompress and validate, large writes, segment rolls, fsyncs under a ``flush.*`` policy),
reads of data that is not in the page cache and checkpoint writes run on these threads.
``logcore`` releases the GIL in its long loops (CRC, decompression, validation, copies), so
the loop keeps serving other connections meanwhile.

Ordering: ``run_ordered(key, ...)`` runs calls with the same key (a partition) one after
another in the order they were made, on whichever thread is free: appends to one
partition land in arrival order. A call whose caller is cancelled before its turn never
runs; one that has started finishes (a thread cannot be interrupted) and the next call
for its key waits for it.

Cold reads: ``is_cached(region)`` probes a ``FileRegion``'s pages with
``preadv(RWF_NOWAIT)`` (one byte every ``_PROBE_STEP`` bytes and the last one), which fails
with EAGAIN instead of reading from the disk; ``load(region)`` reads a cold region once on a
thread so that the ``sendfile`` the loop then makes copies from the page cache.

Small reads: ``read_cached(region)`` copies a region of at most ``COPY_MAX`` bytes with one
``preadv(RWF_NOWAIT)``, or returns None when any of it is not in the page cache. A small
fetch answer then leaves in one ``send`` with its header, where a ``FileRegion`` costs a
send for the header, a ``sendfile`` and a send for the rest of the response (three
syscalls and three TCP segments for a few hundred bytes).

Event-loop affinity: ``run``, ``run_ordered`` and ``busy`` run on the broker's loop;
``is_cached``, ``read_cached`` and ``load`` anywhere.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_RWF_NOWAIT = getattr(os, "RWF_NOWAIT", 0)
_PROBE_STEP = 256 * 1024
_LOAD_CHUNK = 1 << 20
# Regions up to this size are copied (read_cached) rather than sent with sendfile: a copy
# of 16 KiB costs a few microseconds, less than the two syscalls it saves.
COPY_MAX = 16 * 1024


class IoThreads:
    """A thread pool with per-key ordering.

    Args:
        threads: ``num.io.threads``.
    """

    def __init__(self, threads: int) -> None:
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=threads,
                                                              thread_name_prefix="pylog-io")
        self.threads = threads
        # key -> the future of the last call submitted for that key (done when it finished).
        self._tails: dict[Hashable, asyncio.Future[Any]] = {}
        # Seconds each I/O thread spent in calls of run/run_ordered, by thread id: each
        # thread adds to its own entry only (one dict store, atomic under the GIL), the
        # metrics' idle ratio reads the sum (busy_seconds).
        self._busy: dict[int, float] = {}

    def busy(self, key: Hashable) -> bool:
        """Whether a call for ``key`` is queued or running (then a caller that wants to
        keep the key's order must go through ``run_ordered`` too)."""
        return key in self._tails

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread, in no particular order."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._timed, fn, args)

    def _timed(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """On the I/O thread: ``fn(*args)``, its time added to this thread's busy seconds."""
        started = time.perf_counter()
        try:
            return fn(*args)
        finally:
            ident = threading.get_ident()
            self._busy[ident] = self._busy.get(ident, 0.0) + time.perf_counter() - started

    def busy_seconds(self) -> float:
        """Seconds all I/O threads spent in calls so far (any thread; a sum of floats)."""
        return sum(list(self._busy.values()))

    async def run_ordered(self, key: Hashable, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread after every earlier call for ``key`` has finished."""
        loop = asyncio.get_running_loop()
        prev = self._tails.get(key)
        mine: asyncio.Future[Any] = loop.create_future()  # the result, and "key is free"
        self._tails[key] = mine
        if prev is not None and not prev.done():
            try:
                await asyncio.wait((prev,))  # its outcome is its caller's, not ours
            except asyncio.CancelledError:
                # Never ran: the next call still waits for the one before us.
                prev.add_done_callback(lambda _: self._finish(key, mine, None, None))
                raise
        # One wake-up of the loop per call: the thread hands back the result and frees the
        # key in a single call_soon_threadsafe (asyncio.wrap_future would take two).
        try:
            cf = self.executor.submit(self._call, loop, key, mine, fn, args)
        except BaseException:
            self._finish(key, mine, None, None)
            raise
        try:
            return await asyncio.shield(mine)
        except asyncio.CancelledError:
            if cf.cancel():  # not started: it never will; free the key now
                self._finish(key, mine, None, None)
            # Started: the thread finishes it and frees the key; nobody will look at its
            # outcome, so mark an exception as seen (no "never retrieved" report).
            mine.add_done_callback(_consume)
            raise

    def _call(self, loop: asyncio.AbstractEventLoop, key: Hashable, fut: asyncio.Future[Any],
              fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """On the I/O thread: run, then deliver to the loop."""
        try:
            result, exc = self._timed(fn, args), None
        except BaseException as e:  # noqa: BLE001 - delivered to the awaiting caller
            result, exc = None, e
        try:
            loop.call_soon_threadsafe(self._finish, key, fut, result, exc)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _finish(self, key: Hashable, fut: asyncio.Future[Any], result: Any,
                exc: BaseException | None) -> None:
        if not fut.done():
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)
        if self._tails.get(key) is fut:
            del self._tails[key]

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def is_cached(region: Any) -> bool:
    """Whether the region's bytes are (most likely) in the page cache: probed without
    blocking. True when the probe is not available (no RWF_NOWAIT)."""
    size = region.size
    if not size or not _RWF_NOWAIT:
        return True
    fd = region.fileno
    start = region.position
    probe = bytearray(1)
    at = 0
    try:
        while True:
            if os.preadv(fd, [probe], start + at, _RWF_NOWAIT) != 1:
                return True  # short file: let sendfile report it
            if at == size - 1:
                return True
            at = min(at + _PROBE_STEP, size - 1)
    except BlockingIOError:
        return False
    except OSError:
        return True  # EOPNOTSUPP on some file systems: no way to tell, do not guess


def read_cached(region: Any) -> bytearray | None:
    """The bytes of a region of at most ``COPY_MAX`` bytes when all of them are in the page
    cache (one ``preadv(RWF_NOWAIT)``, which never waits for the disk), else None: cold or
    partly cached, no RWF_NOWAIT, a file shorter than the region (the caller's
    ``FileRegion`` path reports that), or a file system that refuses the flag."""
    size = region.size
    if not size or size > COPY_MAX or not _RWF_NOWAIT:
        return None
    buf = bytearray(size)
    try:
        n = os.preadv(region.fileno, [buf], region.position, _RWF_NOWAIT)
    except OSError:  # BlockingIOError (not cached), EOPNOTSUPP
        return None
    return buf if n == size else None


def load(region: Any) -> None:
    """Read the region once (on an I/O thread) so that its pages are in the page cache."""
    fd = region.fileno
    buf = bytearray(min(region.size, _LOAD_CHUNK))
    view = memoryview(buf)
    pos = region.position
    end = pos + region.size
    while pos < end:
        n = os.preadv(fd, [view[: min(len(buf), end - pos)]], pos)
        if n <= 0:
            return
        pos += n
