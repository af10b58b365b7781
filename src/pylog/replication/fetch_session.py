"""The follower's side of an incremental fetch session (KIP-227; Kafka's
``FetchSessionHandler``), one per ``ReplicaFetcher`` (one leader).

A follower fetching many partitions from one leader sends them all once, in a *full* fetch
with ``session_epoch`` 0; the leader answers with a session id. Each later fetch is
*incremental* (that id, epochs 1, 2, ...): it names only the partitions whose fetch
position changed since the last request that carried them (fetch offset, leader epoch,
last fetched epoch, log start offset, max bytes) and, under ``forgotten_topics_data``, the
partitions this fetcher stopped fetching. The leader reads the others from the session
(and still counts each as fetched by this follower at its cached offset: the ISR and the
high watermark see an idle, caught-up follower as caught up), and answers only the
partitions with something new. With thousands of idle partitions neither side handles
them on every round.

States (``next_request`` reads, ``on_response`` / ``on_failure`` move them)::

    state      request metadata               after an answer without error
    NONE       session_id 0, epoch 0 (full)   id X in the answer: OPEN(X, 1); id 0: NONE
    OPEN       session_id X, epoch N (incr.)  id X: OPEN(X, N+1); id 0 (closed): NONE
    RESTART    session_id X, epoch 0 (full)   as NONE (the leader drops X, may open another)

- FETCH_SESSION_ID_NOT_FOUND (the leader evicted the session, or restarted): NONE, and
  the round's answer is not applied (it has no partitions); the next fetch is full.
- INVALID_FETCH_SESSION_EPOCH (a request lost in flight, or answered twice) and any failure
  of the round itself (a connection error, a timeout; ``on_failure``): RESTART: the next
  fetch is full and closes the old session on the leader (Kafka's
  ``nextCloseExistingAttemptNew``).
- The leader may refuse to open a session (its cache is full of other followers' sessions,
  or ``max.incremental.fetch.session.cache.slots`` is 0): every fetch is then full and asks
  again, as Kafka's followers do.

Sans-IO: no clock, no socket. Owned by its fetcher's task on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from pylog import errors

__all__ = ["FollowerFetchSession", "NextRequest"]

_INT32_MAX = 2**31 - 1
_ID_NOT_FOUND = errors.FetchSessionIdNotFoundError.code
_INVALID_EPOCH = errors.InvalidFetchSessionEpochError.code

Key = tuple[str, int]


def _position(fp: Any) -> tuple[int, int, int, int, int]:
    """What a FetchPartition tells the leader; a change means the partition is sent."""
    return (fp.fetch_offset, fp.current_leader_epoch, fp.last_fetched_epoch, fp.log_start_offset,
            fp.partition_max_bytes)


class NextRequest(NamedTuple):
    """What the next Fetch carries: its session metadata, the partitions to name (all of
    them when ``full``) and the partitions to forget, by topic."""

    session_id: int
    epoch: int
    full: bool
    send: list[tuple[Key, Any]]
    forgotten: dict[str, list[int]]


class FollowerFetchSession:
    """See the module docstring. ``session_id`` 0: no session (NONE); ``epoch`` 0: the next
    fetch is full (NONE or RESTART)."""

    __slots__ = ("session_id", "epoch", "_sent", "_pending")

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0
        # What the leader's session holds: each partition's position as last sent.
        self._sent: dict[Key, tuple[int, int, int, int, int]] = {}
        self._pending: dict[Key, tuple[int, int, int, int, int]] | None = None

    @property
    def open(self) -> bool:
        """Whether the next fetch is incremental."""
        return self.session_id != 0 and self.epoch != 0

    def next_request(self, wanted: Mapping[Key, Any]) -> NextRequest:
        """The next fetch for ``wanted`` (key -> FetchPartition, in the order to send)."""
        positions = {key: _position(fp) for key, fp in wanted.items()}
        self._pending = positions
        if not self.open:
            return NextRequest(self.session_id, 0, True, list(wanted.items()), {})
        sent = self._sent
        send = [(key, fp) for key, fp in wanted.items() if sent.get(key) != positions[key]]
        forgotten: dict[str, list[int]] = {}
        for key in sent:
            if key not in positions:
                forgotten.setdefault(key[0], []).append(key[1])
        return NextRequest(self.session_id, self.epoch, False, send, forgotten)

    def on_response(self, error_code: int, session_id: int) -> bool:
        """The leader answered the request ``next_request`` built. Returns whether its
        partitions are to be applied (False for a session error: the round starts over)."""
        pending, self._pending = self._pending, None
        if error_code == _ID_NOT_FOUND:
            self._reset(0)
            return False
        if error_code == _INVALID_EPOCH:
            self._reset(self.session_id)
            return False
        if error_code:
            self._reset(self.session_id)  # the round failed: start over in full
            return True
        if session_id == 0:
            self._reset(0)  # no session made, or the leader closed ours
            return True
        if self.open:
            self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1
        else:
            self.session_id, self.epoch = session_id, 1
        self._sent = pending if pending is not None else {}
        return True

    def on_failure(self) -> None:
        """The round got no answer (a connection error, a timeout): whatever the leader
        did with it, the next fetch is full and closes the session it may hold."""
        self._pending = None
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id, self.epoch, self._sent = session_id, 0, {}
