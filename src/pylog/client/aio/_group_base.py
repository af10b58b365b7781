"""The pieces of group membership below the protocol rounds: states, the subscription, and
finding the group coordinator.

``CoordinatorLink`` finds the coordinator with FindCoordinator (key type 0, the group id;
v4+ batches keys, older versions take one) sent to any broker, and keeps a connection of its
own to it, so that a JoinGroup parked for a whole rebalance never waits behind fetches (the
Java client opens a separate connection the same way). NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, a lost connection or a session without heartbeat answers make
the coordinator unknown; the next request looks it up again, with exponential backoff
between attempts (``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``, KIP-580).

Event-loop affinity: the consumer's loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import re
from typing import Any, NamedTuple, Protocol

from pylog import errors
from pylog.client.aio._cluster import Cluster
from pylog.client.aio._tasks import cancel_all, cancel_and_wait
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.client.records import TopicPartition
from pylog.net.connection import Connection
from pylog.protocol.messages import FindCoordinatorRequest

__all__ = ["Generation", "NO_GENERATION", "MemberState", "TRANSITIONS", "SubscriptionState",
           "ConsumerOwner", "CoordinatorLink", "COMMIT_FAILED", "cancel_tasks", "rebalancing"]

log = logging.getLogger("pylog.client.consumer")


COMMIT_FAILED = (
    "Commit cannot be completed since the group has already rebalanced and assigned the "
    "partitions to another member. The time between poll() calls was probably longer than "
    "max.poll.interval.ms: poll more often, lower max.poll.records or raise "
    "max.poll.interval.ms. The consumer rejoins on its next poll().")


def rebalancing(detail: str) -> errors.RebalanceInProgressError:
    return errors.RebalanceInProgressError(
        f"Offset commit cannot be completed since {detail}. Call poll() to complete the "
        "rebalance, then commit again.")


async def cancel_tasks(owner: Any, *names: str) -> None:
    """Cancel the tasks in ``owner``'s attributes ``names`` and wait for them to end (each
    cancelled again while it runs on: ``_tasks.cancel_and_wait``), setting each to None
    first (a membership's heartbeat and join/reconcile tasks, on leave and close)."""
    for name in names:
        task = getattr(owner, name)
        setattr(owner, name, None)
        await cancel_and_wait(task)


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol_name: str | None


NO_GENERATION = Generation(-1, "", None)


class MemberState(enum.Enum):
    UNJOINED = "unjoined"  # no generation; heartbeats stopped
    PREPARING_REBALANCE = "preparing-rebalance"  # JoinGroup sent
    COMPLETING_REBALANCE = "completing-rebalance"  # joined, SyncGroup sent; heartbeating
    STABLE = "stable"  # assignment received; heartbeating


TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.UNJOINED: frozenset({MemberState.PREPARING_REBALANCE}),
    MemberState.PREPARING_REBALANCE: frozenset({MemberState.COMPLETING_REBALANCE,
                                                MemberState.UNJOINED}),
    MemberState.COMPLETING_REBALANCE: frozenset({MemberState.STABLE, MemberState.UNJOINED,
                                                 MemberState.PREPARING_REBALANCE}),
    MemberState.STABLE: frozenset({MemberState.PREPARING_REBALANCE, MemberState.UNJOINED}),
}


class SubscriptionState:
    """What the consumer subscribed to (topics or a pattern) and the rebalance listener."""

    def __init__(self) -> None:
        self.topics: frozenset[str] = frozenset()  # explicit names, or the pattern's matches
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None  # a _Listener from consumer.py

    @property
    def active(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        return topic in self.topics


class ConsumerOwner(Protocol):
    """What the coordinator needs of the consumer core (``ConsumerCore``)."""

    def owned_partitions(self) -> list[TopicPartition]: ...

    def set_assignment(self, partitions: list[TopicPartition]) -> None: ...

    def mark_pending_revocation(self, partitions: list[TopicPartition]) -> None: ...

    def refresh_wanted_topics(self) -> None: ...

    def wake(self) -> None: ...

    async def commit_before_revocation(self, partitions: list[TopicPartition] | None,
                                       timeout: float) -> None: ...

    async def invoke_listener(self, kind: str, partitions: list[TopicPartition]) -> BaseException | None: ...


class CoordinatorLink:
    """Finds the group coordinator and holds the connection to it.

    Args:
        cluster: the consumer's metadata and broker connections.
        settings: resolved consumer settings (``group.id`` set).
        client_id: sent in request headers.
    """

    def __init__(self, cluster: Cluster, settings: dict[str, Any], client_id: str) -> None:
        self.cluster = cluster
        self.group_id: str = settings["group.id"]
        self.client_id = client_id
        self.request_timeout = settings["request.timeout.ms"] / 1000
        self.retry_backoff = settings["retry.backoff.ms"] / 1000
        self.retry_backoff_max = max(self.retry_backoff, settings["retry.backoff.max.ms"] / 1000)
        self.coordinator: tuple[int, str, int] | None = None
        self.coordinator_conn: Connection | None = None
        self._lookup: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.closed = False

    def _on_coordinator_found(self) -> None:
        """Hook: a coordinator was found (the membership restarts its session timer)."""

    def coordinator_unknown(self) -> bool:
        conn = self.coordinator_conn
        if self.coordinator is not None and (conn is None or conn.closed):
            self.mark_coordinator_unknown("its connection closed")
        return self.coordinator is None

    def mark_coordinator_unknown(self, cause: str) -> None:
        if self.coordinator is not None:
            log.info("group %s: coordinator %s:%d unavailable (%s); looking it up again",
                     self.group_id, self.coordinator[1], self.coordinator[2], cause)
            self.coordinator = None
            conn, self.coordinator_conn = self.coordinator_conn, None
            if conn is not None:
                task = asyncio.get_running_loop().create_task(conn.close())
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    def backoff(self, attempts: int) -> float:
        """Exponential backoff (KIP-580): retry.backoff.ms doubling to retry.backoff.max.ms,
        20 % jitter."""
        base = min(self.retry_backoff_max, self.retry_backoff * (2 ** min(attempts, 30)))
        return float(base * random.uniform(0.8, 1.2))

    async def ensure_coordinator(self, deadline: float | None) -> Connection:
        """The coordinator's connection, looking the coordinator up as long as it takes
        (until ``deadline``, loop time).

        Raises:
            KafkaTimeoutError: not found by the deadline.
            GroupAuthorizationFailedError: the broker refused (fatal).
        """
        loop = asyncio.get_running_loop()
        attempts = 0
        last: BaseException | None = None
        while True:
            if not self.coordinator_unknown():
                assert self.coordinator_conn is not None
                return self.coordinator_conn
            if self.closed:
                raise KafkaConnectionError("the consumer is closed")
            task = self._lookup
            if task is None or task.done():
                task = self._lookup = loop.create_task(self._find_coordinator())
            try:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                await asyncio.wait_for(asyncio.shield(task), left)
                continue
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"group coordinator of {self.group_id!r} not found in "
                                        "time" + (f" (last error: {last})" if last else "")) from None
            except (errors.GroupAuthorizationFailedError, errors.InvalidGroupIdError):
                raise
            except (errors.ApiError, KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
            pause = self.backoff(attempts)
            attempts += 1
            if deadline is not None and loop.time() + pause >= deadline:
                raise KafkaTimeoutError(f"group coordinator of {self.group_id!r} not found in "
                                        f"time (last error: {last})")
            await asyncio.sleep(pause)

    async def _find_coordinator(self) -> None:
        conn = await self.cluster.any_connection()
        R = FindCoordinatorRequest
        version = conn.version_for(R)
        if version >= 4:
            resp = await conn.send(R(key_type=0, coordinator_keys=[self.group_id]), version)
            if len(resp.coordinators) != 1:
                raise KafkaConnectionError(f"FindCoordinator answered {len(resp.coordinators)} "
                                           "coordinators for one group")
            c = resp.coordinators[0]
            code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            resp = await conn.send(R(key=self.group_id, key_type=0), version)
            code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if code:
            cls = errors.error_for_code(code) or errors.UnknownServerError
            raise cls(f"FindCoordinator for group {self.group_id!r}: {cls.name}")
        coord = await self.cluster.coordinator_connection(node_id, host, port)
        if self.closed:
            await coord.close()
            raise KafkaConnectionError("the consumer is closed")
        old, self.coordinator_conn = self.coordinator_conn, coord
        if old is not None:
            await old.close()
        self.coordinator = (node_id, host, port)
        self._on_coordinator_found()
        log.info("group %s: coordinator is broker %d at %s:%d", self.group_id, node_id, host, port)

    async def reconnect(self, deadline: float | None) -> Connection:
        """A new connection to the known coordinator in place of the current one, which is
        closed (what is in flight on it fails). ``deadline``: loop time.

        Raises:
            KafkaConnectionError, KafkaTimeoutError: no connection in time.
        """
        assert self.coordinator is not None
        node_id, host, port = self.coordinator
        loop = asyncio.get_running_loop()
        left = None if deadline is None else max(0.01, deadline - loop.time())
        try:
            conn = await asyncio.wait_for(self.cluster.coordinator_connection(node_id, host, port), left)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"no new connection to the coordinator of {self.group_id!r} "
                                    "in time") from None
        old, self.coordinator_conn = self.coordinator_conn, conn
        if old is not None:
            await old.close()
        return conn

    async def close_link(self) -> None:
        """Stop looking and close the coordinator connection."""
        self.closed = True
        await cancel_all([self._lookup, *self._background])
        conn, self.coordinator_conn = self.coordinator_conn, None
        self.coordinator = None
        if conn is not None:
            await conn.close()
