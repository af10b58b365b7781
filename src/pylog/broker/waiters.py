"""Per-partition append notifications for Fetch long polls (no polling loops).

A fetch that has less than ``min_bytes`` registers one future on every partition it reads
and awaits it with its remaining ``max_wait_ms``; an append to any of those partitions
resolves the future at once. Kafka's equivalent is the delayed-fetch purgatory keyed by
partition (``DelayedFetch``, ``DelayedOperationPurgatory``).

Event-loop affinity: all methods run on the broker's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class PartitionWaiters:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[bool]]] = {}
        # Appends are numbered; _last[key] is the number of the last one to ``key``. A fetch
        # notes ``sequence`` before it reads and passes it to ``wait``: an append that
        # landed while the fetch was reading (its reads may await an I/O thread) then
        # counts as a wake-up instead of being missed.
        self.sequence = 0
        self._last: dict[Hashable, int] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every fetch waiting on ``key`` (called after each append)."""
        self.sequence += 1
        self._last[key] = self.sequence
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)

    def notify_all(self) -> None:
        for key in list(self._waiters):
            self.notify(key)

    async def wait(self, keys: Iterable[Hashable], timeout: float, since: int | None = None) -> bool:
        """Wait until one of ``keys`` is appended to, or ``timeout`` seconds pass.

        Args:
            since: a ``sequence`` value noted before the caller read the partitions: an
                append to one of ``keys`` after it returns True at once.

        Returns True when woken by an append, False on timeout.
        """
        keys = list(keys)
        if since is not None:
            last = self._last
            if any(last.get(key, 0) > since for key in keys):
                return True
        if timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        handle = loop.call_later(timeout, _expire, fut)
        try:
            return await fut
        finally:
            handle.cancel()
            for key in keys:
                s = self._waiters.get(key)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[key]

    def __len__(self) -> int:
        return sum(len(s) for s in self._waiters.values())


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
