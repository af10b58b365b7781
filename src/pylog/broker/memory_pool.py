"""The broker-wide pool of request memory (``queued.max.request.bytes``).

Every request frame is charged to the pool from the moment its 4-byte size prefix has been
read (before its buffer is allocated) until its request is done (response written, or
handled when no response is due). A connection whose frame does not fit waits for memory
without reading from its socket: it is *muted*, as Kafka's selector mutes a channel when
its ``MemoryPool`` is exhausted, and the peer's bytes stay in the kernel's buffers. TCP
flow control then slows the peer down.

Rules (``try_acquire``):

- a frame fits when the bytes in use plus its size stay within the capacity;
- a frame also fits when nothing is in use at all, so that one frame of
  ``socket.request.max.bytes`` is always admissible, whatever the capacity: memory in use
  never exceeds ``max(capacity, largest frame)``;
- waiters are granted in arrival order on each release, every one that fits: a small
  request of another client is not held behind a large frame that does not fit yet. (A
  large frame can therefore wait while smaller ones keep the pool busy; it gets in at the
  latest when the pool drains, which a steady stream of small requests lets happen.)

Connections also count the receive buffer they keep for their next large frame
(``hold_spare``); that memory is reclaimed before any request waits for it.

A capacity of 0 or less means unlimited (Kafka's ``MemoryPool.NONE`` for
``queued.max.request.bytes=-1``).

Event-loop affinity: every method runs on the broker's loop.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Hashable


class MemoryPool:
    """Bytes of request frames being read or queued, broker-wide.

    Args:
        capacity: ``queued.max.request.bytes``; <= 0 for unlimited.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        # The most ever in use (a gauge for tests and logs).
        self.peak = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        # Memory kept for reuse, counted but reclaimable: owner -> (bytes, drop callback).
        self._spares: dict[Hashable, tuple[int, Callable[[], None]]] = {}

    @property
    def waiting(self) -> int:
        """Connections muted for lack of memory."""
        return sum(1 for _, fut in self._waiters if not fut.done())

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes if they fit now (see the module docstring)."""
        if self.capacity > 0 and self.in_use and self.in_use + n > self.capacity:
            if not self._spares:
                return False
            self._reclaim()  # kept buffers give way to requests
            if self.in_use and self.in_use + n > self.capacity:
                return False
        self.in_use += n
        if self.in_use > self.peak:
            self.peak = self.in_use
        return True

    def hold_spare(self, owner: Hashable, n: int, drop: Callable[[], None]) -> bool:
        """Count ``n`` bytes that ``owner`` keeps for reuse (a receive buffer), replacing
        what it counted before; 0 forgets it. Kept memory never costs a request: it is
        refused while anyone waits or when it does not fit, and reclaimed (``drop`` is
        called) when a request does not fit otherwise. Returns False when refused (the
        owner must then let the memory go)."""
        old = self._spares.pop(owner, None)
        if old is not None:
            self.in_use -= old[0]
        if n <= 0:
            if old is not None and self._waiters:
                self._grant()
            return True
        if self.capacity > 0 and (self.in_use + n > self.capacity or self.waiting):
            if old is not None and self._waiters:
                self._grant()
            return False
        self._spares[owner] = (n, drop)
        self.in_use += n
        self.peak = max(self.peak, self.in_use)
        return True

    def _reclaim(self) -> None:
        for n, drop in self._spares.values():
            self.in_use -= n
            drop()
        self._spares.clear()

    async def acquire(self, n: int) -> None:
        """Take ``n`` bytes, waiting until they fit. Cancellation leaves nothing taken."""
        # Waiters left after the last release do not fit; a newcomer that fits goes ahead
        # of them (the rule release applies too).
        if self.try_acquire(n):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(n)  # granted, but the waiter went away before it ran
            else:
                try:
                    self._waiters.remove(entry)
                except ValueError:
                    pass
            raise

    def release(self, n: int) -> None:
        """Give back ``n`` bytes and wake the waiters that fit now."""
        self.in_use -= n
        if self.in_use < 0:
            raise AssertionError(f"memory pool released {-self.in_use} bytes more than taken")
        if self._waiters:
            self._grant()

    def _grant(self) -> None:
        kept: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        for entry in self._waiters:
            n, fut = entry
            if fut.done():
                continue
            if self.try_acquire(n):
                fut.set_result(None)
            else:
                kept.append(entry)
        self._waiters = kept
