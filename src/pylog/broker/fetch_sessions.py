"""Incremental fetch sessions (KIP-227): the broker's session cache.

A client that fetches many partitions sends them all once (a *full* fetch with
``session_epoch`` 0); the broker keeps them in a session and answers with its id. Later
fetches (``session_epoch`` 1, 2, ...) name only the partitions whose fetch position changed
and those to forget (``forgotten_topics_data``); the answer holds only the partitions with
something new: records, an error, or a new high watermark, last stable offset or log start
offset. Neither side re-sends thousands of idle partitions on every fetch.

Request metadata, as Kafka's ``FetchMetadata``:

- ``session_id`` 0, epoch -1: a sessionless full fetch (Fetch before v7, replica fetchers
  and clients that do not use sessions); the answer's ``session_id`` is 0.
- epoch 0: a full fetch that asks for a new session (closing ``session_id`` if it names
  one); the answer carries the new id, or 0 when the cache has no room.
- ``session_id`` X, epoch -1: close X, then a sessionless full fetch.
- ``session_id`` X, epoch N > 0: incremental. An unknown X is FETCH_SESSION_ID_NOT_FOUND
  and an epoch other than the one expected INVALID_FETCH_SESSION_EPOCH; the client then
  starts over with a full fetch.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions (0 turns
sessions off). When it is full, a new session may take the place of one unused for
``EVICTION_MS`` (Kafka's 120 s); else a follower's session (privileged) takes the place of
the smallest client session, and a client session the place of a smaller client session
(Kafka's ``FetchSessionCache.tryEvict``); otherwise no session is made.

Partitions keep the order they were added in; when an incremental answer fills the
response's ``max_bytes``, the partitions it carried move to the end, so that those the
size left out come first next time (Kafka's round robin).

Sans-IO, with an injected clock; owned by the broker's event loop (not thread-safe).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EVICTION_MS", "FINAL_EPOCH", "INITIAL_EPOCH", "CachedPartition", "FetchSession",
           "FetchSessionCache", "next_epoch"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: How long a session must sit unused before any new session may evict it (Kafka's
#: MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS).
EVICTION_MS = 120_000
_INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1, 2, ... wrapping from int32 max back to 1."""
    return 1 if epoch >= _INT32_MAX or epoch < 1 else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the client's last fetch position (the request's
    FetchPartition), and what the last answer that carried it said."""

    fetch: Any
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2
    # The leader's log end when the partition was last looked at in full: with the three
    # above unchanged, the last stable offset cannot have moved (the Fetch handler's check).
    log_end_offset: int = -2

    def changed(self, hw: int, lso: int, start: int) -> bool:
        return hw != self.high_watermark or lso != self.last_stable_offset \
            or start != self.log_start_offset

    def remember(self, hw: int, lso: int, start: int) -> None:
        self.high_watermark, self.last_stable_offset, self.log_start_offset = hw, lso, start


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's (replica fetcher) session
    epoch: int  # the epoch the next incremental fetch must carry
    created_ms: int
    last_used_ms: int
    partitions: dict[tuple[str, int], CachedPartition] = field(default_factory=dict)
    _runs: list[tuple[str, list[Any]]] | None = None  # fetch_topics(), until the order changes

    def update(self, topics: Iterable[Any], forgotten: Iterable[Any]) -> None:
        """An incremental request: add or update its partitions, drop the forgotten."""
        parts = self.partitions
        if topics or forgotten:
            self._runs = None
        for ft in topics:
            for fp in ft.partitions:
                cached = parts.get((ft.topic, fp.partition))
                if cached is None:
                    parts[(ft.topic, fp.partition)] = CachedPartition(fp)
                else:
                    cached.fetch = fp
        for ft in forgotten:
            for index in ft.partitions:
                parts.pop((ft.topic, index), None)

    def fetch_topics(self) -> list[tuple[str, list[Any]]]:
        """The session's partitions as (topic, [FetchPartition]) runs, in session order
        (kept until a request or a reordering changes them)."""
        if self._runs is not None:
            return self._runs
        out: list[tuple[str, list[Any]]] = []
        for (topic, _index), cached in self.partitions.items():
            if out and out[-1][0] == topic:
                out[-1][1].append(cached.fetch)
            else:
                out.append((topic, [cached.fetch]))
        self._runs = out
        return out

    def move_to_end(self, keys: Iterable[tuple[str, int]]) -> None:
        parts = self.partitions
        self._runs = None
        for key in keys:
            cached = parts.pop(key, None)
            if cached is not None:
                parts[key] = cached


class FetchSessionCache:
    def __init__(self, max_slots: int, clock: Any, eviction_ms: int = EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max(int(max_slots), 0)
        self.eviction_ms = eviction_ms
        self._clock = clock
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[FetchSession]:
        return iter(list(self._sessions.values()))

    def _now_ms(self) -> int:
        return int(self._clock.monotonic() * 1000)

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used_ms = self._now_ms()
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def create(self, privileged: bool, partitions: dict[tuple[str, int], CachedPartition]
               ) -> FetchSession | None:
        """A new session over ``partitions``, or None when sessions are off or the cache
        has no room that this session may take."""
        if self.max_slots == 0 or not partitions:
            return None
        now = self._now_ms()
        if len(self._sessions) >= self.max_slots and not self._evict(privileged, len(partitions),
                                                                      now):
            return None
        session_id = self._rng.randint(1, _INT32_MAX)
        while session_id in self._sessions:
            session_id = self._rng.randint(1, _INT32_MAX)
        session = FetchSession(session_id, privileged, next_epoch(INITIAL_EPOCH), now, now,
                               partitions)
        self._sessions[session_id] = session
        return session

    def _evict(self, privileged: bool, size: int, now: int) -> bool:
        sessions = self._sessions.values()
        stale = min(sessions, key=lambda s: s.last_used_ms)
        if stale.last_used_ms < now - self.eviction_ms:
            victim = stale
        else:
            clients = [s for s in sessions if not s.privileged]
            if not clients:
                return False
            victim = min(clients, key=lambda s: (len(s.partitions), s.last_used_ms))
            if not privileged and len(victim.partitions) >= size:
                return False
        del self._sessions[victim.id]
        self.evictions += 1
        return True
