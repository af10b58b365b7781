"""Deadlines for the group coordinator, driven by an injected clock.

Each timer has a key (e.g. ``("heartbeat", group, member)``); scheduling a key again replaces
its deadline, cancelling removes it. The coordinator fires due timers one at a time in
deadline order, re-reading the table after each, because a callback may schedule or cancel
others (a member's expiry completes the join, which schedules heartbeats). A heap with lazy
deletion keeps ``next_deadline`` cheap.

Not thread-safe: owned by one coordinator.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable


class Timers:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def schedule(self, key: Hashable, deadline_ms: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, fn)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def has(self, key: Hashable) -> bool:
        return key in self._entries

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def clear(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def _live_top(self) -> tuple[int, int, Hashable] | None:
        # Drop heap entries whose key was cancelled or rescheduled since they were pushed.
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return deadline, seq, key
            heapq.heappop(self._heap)
        return None

    def next_deadline(self) -> int | None:
        top = self._live_top()
        return None if top is None else top[0]

    def pop_due(self, now_ms: int) -> Callable[[], None] | None:
        """Remove and return the callback of the earliest timer due at ``now_ms``, if any."""
        top = self._live_top()
        if top is None or top[0] > now_ms:
            return None
        heapq.heappop(self._heap)
        return self._entries.pop(top[2])[2]
