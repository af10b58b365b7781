"""Share sessions (KIP-932; Kafka's ``ShareSessionCache``): what a share consumer fetches
from this broker, keyed by (group id, member id).

The share session epoch of ShareFetch and ShareAcknowledge::

     0   open a session (a full request: its partitions are the session's); an existing
         session of the member is replaced. Acknowledgements are not allowed with it.
    -1   close the session after this request (final acknowledgements; no fetching): the
         member's acquired records are released.
    >0   the session's next epoch; the request adds partitions (and may forget some).
         No session: SHARE_SESSION_NOT_FOUND; another epoch: INVALID_SHARE_SESSION_EPOCH.

The cache is bounded (``max_sessions``): opening a session beyond it evicts the least
recently used one (its member then gets SHARE_SESSION_NOT_FOUND and opens a new one).
A member that leaves its share group keeps its session until it closes it (a closing
consumer sends its last acknowledgements with epoch -1 alongside its leave heartbeat).

Not thread-safe: the broker's event loop owns the cache.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable

from pylog.errors import InvalidShareSessionEpochError, ShareSessionNotFoundError

__all__ = ["ShareSession", "ShareSessionCache", "INITIAL_EPOCH", "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    # Kafka's ShareRequestMetadata.nextEpoch: wraps to 1 after Integer.MAX_VALUE.
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


class ShareSession:
    __slots__ = ("group_id", "member_id", "epoch", "partitions")

    def __init__(self, group_id: str, member_id: str) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = 1  # the epoch the next request must carry
        # Insertion-ordered set of the session's partitions.
        self.partitions: dict[TopicIdPartition, None] = {}

    def add(self, parts: Iterable[TopicIdPartition]) -> None:
        for p in parts:
            self.partitions[p] = None

    def forget(self, parts: Iterable[TopicIdPartition]) -> None:
        for p in parts:
            self.partitions.pop(p, None)


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str) -> tuple[ShareSession, ShareSession | None]:
        """A new session for the member (epoch 0); returns it and the session it replaced
        or evicted (whose member's records the caller releases), if any."""
        key = (group_id, member_id)
        old = self._sessions.pop(key, None)
        if old is None and len(self._sessions) >= self.max_sessions:
            _k, old = self._sessions.popitem(last=False)
        session = self._sessions[key] = ShareSession(group_id, member_id)
        return session, old

    def use(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with a positive ``epoch`` continues; its epoch moves on.

        Raises:
            ShareSessionNotFoundError: no session for the member.
            InvalidShareSessionEpochError: ``epoch`` is not the one expected.
        """
        key = (group_id, member_id)
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionNotFoundError(
                f"The share session for member {member_id} of group {group_id} was not found.")
        if session.epoch != epoch:
            raise InvalidShareSessionEpochError(
                f"The share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = next_epoch(epoch)
        self._sessions.move_to_end(key)
        return session

    def check_final(self, group_id: str, member_id: str) -> ShareSession:
        """The session a closing request (epoch -1) ends.

        Raises:
            ShareSessionNotFoundError: no session for the member.
        """
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionNotFoundError(
                f"The share session for member {member_id} of group {group_id} was not found.")
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def remove_group(self, group_id: str) -> None:
        for key in [k for k in self._sessions if k[0] == group_id]:
            del self._sessions[key]
