"""Closing a group member while its heartbeat loop wakes up: the race behind a
``Consumer.close()`` that hung with its event loop idle.

The heartbeat loop waits with ``asyncio.wait_for(wakeup.wait(), t)`` between beats (and
``wait_for(shield(answer), t)`` for each answer). On Python 3.11 a cancel that lands after
that wait completed, before the loop resumed, is swallowed (``pylog.client.aio._tasks``):
close's "cancel the heartbeat task, await it" then waited for a loop that went on beating
for ever. Here the wake-up and the close are lined up turn by turn, for each of 0 to 3
turns between them, with a stub coordinator connection (no network); close must return
and leave the group, for the classic protocol and for KIP-848's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pylog.client.aio._cluster import Cluster
from pylog.client.aio._consumer_membership import ConsumerMembership
from pylog.client.aio._consumer_membership import MemberState as M848
from pylog.client.aio._coordinator import ConsumerCoordinator
from pylog.client.aio._group_base import Generation, MemberState, SubscriptionState
from pylog.client.config import CONSUMER, resolve
from pylog.client.records import TopicPartition
from pylog.protocol.messages import ConsumerGroupHeartbeatResponse, LeaveGroupResponse

TURNS = range(4)
# A guard against the hang (not a speed assertion: the close ends within a few loop
# turns, or, with the race, never).
HANG_GUARD = 15.0


class StubConnection:
    """Answers each request with the next canned response."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.sent: list[Any] = []
        self.closed = False

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        return int(cls.VALID_VERSIONS[1])

    async def send(self, body: Any, version: int | None = None, *, timeout: float | None = None) -> Any:
        self.sent.append(body)
        return self.responses.pop(0)

    async def close(self) -> None:
        self.closed = True


class Owner:
    def __init__(self) -> None:
        self.assignment: list[TopicPartition] = []

    def owned_partitions(self) -> list[TopicPartition]:
        return list(self.assignment)

    def set_assignment(self, partitions: list[TopicPartition]) -> None:
        self.assignment = list(partitions)

    def mark_pending_revocation(self, partitions: list[TopicPartition]) -> None:
        pass

    def wake(self) -> None:
        pass

    def refresh_wanted_topics(self) -> None:
        pass

    async def invoke_listener(self, kind: str, partitions: list[TopicPartition]) -> BaseException | None:
        return None


def _parts(protocol: str) -> tuple[dict[str, Any], Cluster, SubscriptionState]:
    s = resolve(CONSUMER, {"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                           "group.protocol": protocol}, {})
    cluster = Cluster([("127.0.0.1", 1)], client_id="c", request_timeout=1, connect_timeout=1,
                      metadata_max_age=1e12)
    cluster._need_update = False
    sub = SubscriptionState()
    sub.topics = frozenset({"t"})
    return s, cluster, sub


def classic_member(conn: StubConnection) -> ConsumerCoordinator:
    """A stable classic member between two heartbeats."""
    s, cluster, sub = _parts("classic")
    c = ConsumerCoordinator(cluster, s, "c", sub, Owner())  # type: ignore[arg-type]
    c.coordinator, c.coordinator_conn = (0, "127.0.0.1", 1), conn  # type: ignore[assignment]
    for state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE,
                  MemberState.STABLE):
        c._set_state(state)
    c.generation = Generation(3, "member-1", "range")
    c.rejoin_needed = False
    c.next_heartbeat = asyncio.get_running_loop().time() + 60
    return c


def consumer_protocol_member(conn: StubConnection) -> ConsumerMembership:
    """A KIP-848 member in the group, sleeping until its next heartbeat."""
    s, cluster, sub = _parts("consumer")
    m = ConsumerMembership(cluster, s, "c", sub, Owner())  # type: ignore[arg-type]
    m.coordinator, m.coordinator_conn = (0, "127.0.0.1", 1), conn  # type: ignore[assignment]
    m._join()
    m.member_epoch = 2
    m._set_state(M848.RECONCILING)
    m._set_state(M848.ACKNOWLEDGING)
    m._set_state(M848.STABLE)
    m.next_heartbeat = asyncio.get_running_loop().time() + 60
    return m


async def _close_as_the_heartbeat_wakes(member: Any, turns: int) -> None:
    loop = asyncio.get_running_loop()
    member._heartbeat_task = loop.create_task(member._heartbeat_loop())
    for _ in range(5):  # into its wait for the next beat
        await asyncio.sleep(0)
    assert not member._heartbeat_task.done()
    member._wakeup.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    heartbeat = member._heartbeat_task
    # asyncio.wait, not wait_for: the guard must not cancel the close (the old close
    # swallowed its own cancel too, and then returned as if it had finished).
    closing = loop.create_task(member.close(loop.time() + 5))
    done, _ = await asyncio.wait({closing}, timeout=HANG_GUARD)
    assert closing in done, "close() did not return: it waits for a heartbeat loop that runs on"
    closing.result()
    assert heartbeat.done()


@pytest.mark.parametrize("turns", TURNS)
def test_classic_close_returns_when_the_heartbeat_loop_wakes_as_it_is_cancelled(turns: int) -> None:
    async def go() -> None:
        conn = StubConnection(LeaveGroupResponse(error_code=0))
        c = classic_member(conn)
        await _close_as_the_heartbeat_wakes(c, turns)
        assert [type(r).__name__ for r in conn.sent] == ["LeaveGroupRequest"]
        assert conn.closed and c.closed and c.state is MemberState.UNJOINED

    asyncio.run(go())


@pytest.mark.parametrize("turns", TURNS)
def test_consumer_protocol_close_returns_when_the_heartbeat_loop_wakes_as_it_is_cancelled(
        turns: int) -> None:
    async def go() -> None:
        conn = StubConnection(ConsumerGroupHeartbeatResponse(member_epoch=-1))
        m = consumer_protocol_member(conn)
        await _close_as_the_heartbeat_wakes(m, turns)
        [leave] = conn.sent
        assert leave.member_epoch == -1
        assert conn.closed and m.closed and m.state is M848.UNSUBSCRIBED

    asyncio.run(go())
