"""A follower's ``ReplicaFetcher`` against a real leader broker in the same process (the
leader's Fetch handler answers, without sockets), through an incremental fetch session
(KIP-227): what each round names, replication kept exact, the ISR kept by fetches that
name nothing, and the session lost on the leader (evicted, a wrong epoch) recovered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.messages import ProduceRequest
from pylog.replication import PartitionInfo
from pylog.replication.fetcher import ReplicaFetcher

T0 = 1_700_000_000_000
FOLLOWER, LEADER = 0, 7
REPLICAS = (FOLLOWER, LEADER)
ADDRESSES = {FOLLOWER: ("127.0.0.1", 1), LEADER: ("127.0.0.1", 1)}
PARTITIONS = 4
LAG_MS = 10_000


def _broker(tmp_path: Any, node_id: int) -> Broker:
    config = BrokerConfig({"log.dirs": str(tmp_path / f"b{node_id}"), "broker.id": str(node_id),
                           "auto.create.topics.enable": "false", "replica.fetch.wait.max.ms": "0",
                           "replica.lag.time.max.ms": str(LAG_MS)})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    return b


@pytest.fixture
def brokers(tmp_path):
    pair = _broker(tmp_path, FOLLOWER), _broker(tmp_path, LEADER)
    yield pair
    for b in pair:
        b.log_manager.shutdown()
        b.io.shutdown()


class _Handlers:
    """The fetcher's connection: requests go to the leader's handlers, and are kept."""

    closed = False

    def __init__(self, leader: Broker) -> None:
        self.leader = leader
        self.requests: list[Any] = []
        self.responses: list[Any] = []

    def version_for(self, _request_type: Any) -> int:
        return 12

    async def send(self, request: Any, version: int) -> Any:
        self.requests.append(request)
        ctx = handlers.RequestContext(self.leader, 1, version, 1, "fetcher", "127.0.0.1:1")
        response = await handlers.dispatch(ctx, request)
        for topic in response.responses:  # the bytes a socket would carry (sendfile)
            for pd in topic.partitions:
                if pd.records is not None and not isinstance(pd.records, (bytes, bytearray)):
                    pd.records = pd.records.read()
        self.responses.append(response)
        return response

    async def close(self) -> None:
        self.closed = True


async def _roles(leader: Broker, follower: Broker) -> None:
    infos = [PartitionInfo("t", i, LEADER, 0, REPLICAS, 0, REPLICAS) for i in range(PARTITIONS)]
    for b in (leader, follower):
        result = await b.replicas.become_leader_or_follower(1, 1, -1, infos, ADDRESSES)
        assert set(result.values()) == {0}


async def _produce(b: Broker, partition: int, n: int) -> None:
    builder = logcore.BatchBuilder()
    for i in range(n):
        builder.append(b"v%d" % i, timestamp_ms=T0)
    R = ProduceRequest
    body = R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.PartitionProduceData(index=partition,
                                                         records=bytearray(builder.build()))])])
    resp = await handlers.dispatch(handlers.RequestContext(b, 0, 9, 1, "p", "127.0.0.1:1"), body)
    assert resp.responses[0].partition_responses[0].error_code == 0


def _named(request: Any) -> list[int]:
    return sorted(fp.partition for ft in request.topics for fp in ft.partitions)


def _ends(b: Broker) -> list[int]:
    return [b.log_manager.get_partition("t", i).log.log_end_offset for i in range(PARTITIONS)]


def _fetcher(follower: Broker, leader: Broker) -> tuple[ReplicaFetcher, _Handlers]:
    # A fetcher of our own (the manager's cannot reach 127.0.0.1:1 and stays idle).
    fetcher = ReplicaFetcher(follower.replicas, LEADER, 99)
    conn = fetcher._conn = _Handlers(leader)
    for i in range(PARTITIONS):
        fetcher.keys.add(("t", i))
    return fetcher, conn


async def _round(fetcher: ReplicaFetcher) -> None:
    await fetcher._fetch_once(sorted(fetcher.keys))


def _run(leader: Broker, follower: Broker, scenario: Any) -> None:
    async def go() -> None:
        try:
            await _roles(leader, follower)
            await scenario()
        finally:
            await follower.replicas.shutdown()
            await leader.replicas.shutdown()
    asyncio.run(asyncio.wait_for(go(), 30))


def test_incremental_fetches_name_only_moved_partitions_and_replicate_exactly(brokers) -> None:
    follower, leader = brokers

    async def scenario() -> None:
        fetcher, conn = _fetcher(follower, leader)
        await _produce(leader, 0, 3)
        await _produce(leader, 2, 5)
        await _round(fetcher)  # full: names all, opens the session, gets p0 and p2
        first = conn.requests[-1]
        assert (first.session_id, first.session_epoch, _named(first)) == (0, 0, [0, 1, 2, 3])
        session_id = conn.responses[-1].session_id
        assert session_id != 0 and fetcher.session.session_id == session_id
        assert _ends(follower) == [3, 0, 5, 0]
        await _round(fetcher)  # p0 and p2 moved: only they are named
        assert (conn.requests[-1].session_epoch, _named(conn.requests[-1])) == (1, [0, 2])
        await _round(fetcher)  # nothing moved: nothing named, nothing answered
        assert (conn.requests[-1].session_epoch, _named(conn.requests[-1])) == (2, [])
        assert conn.responses[-1].responses == []
        # Records on a partition the request did not name come from the session's offsets.
        await _produce(leader, 1, 4)
        await _round(fetcher)
        assert _named(conn.requests[-1]) == []
        assert _ends(follower) == _ends(leader) == [3, 4, 5, 0]
        await _round(fetcher)
        assert _named(conn.requests[-1]) == [1]
        # A partition this fetcher stops fetching is forgotten by the leader's session.
        fetcher.remove(("t", 3))
        await _round(fetcher)
        assert [(f.topic, list(f.partitions)) for f in conn.requests[-1].forgotten_topics_data] == [("t", [3])]
        assert sorted(leader.fetch_sessions.get(session_id).partitions) == [("t", 0), ("t", 1), ("t", 2)]
        for i in range(3):
            assert (follower.log_manager.get_partition("t", i).log.read(0, 1 << 20).read()
                    == leader.log_manager.get_partition("t", i).log.read(0, 1 << 20).read())
        # The follower's high watermark followed the leader's through the session.
        for i in range(3):
            assert follower.replicas.partitions[("t", i)].high_watermark == _ends(leader)[i]
    _run(leader, follower, scenario)


def test_a_caught_up_follower_that_names_nothing_stays_in_the_isr(brokers) -> None:
    """The leader counts every partition of the session as fetched at its cached offset:
    an idle, caught-up follower is not dropped from the ISR; one that stops fetching while
    the leader appends is, and its fetches through the session bring it back (the first
    names nothing and gets the records from the session's offset, the next names the
    partition at its new end)."""
    follower, leader = brokers
    clock = leader.clock
    assert isinstance(clock, ManualClock)

    async def scenario() -> None:
        fetcher, conn = _fetcher(follower, leader)
        await _produce(leader, 0, 3)
        for _ in range(3):
            await _round(fetcher)
        state = leader.replicas.partitions[("t", 0)]
        for _ in range(3):
            clock.advance(LAG_MS * 0.6)
            await _round(fetcher)
            assert _named(conn.requests[-1]) == []
            leader.replicas.maybe_shrink_isr()
            await asyncio.sleep(0.01)
            assert state.isr == REPLICAS
        await _produce(leader, 0, 3)  # the follower stops fetching
        clock.advance(LAG_MS * 1.5)
        leader.replicas.maybe_shrink_isr()
        for _ in range(10):
            await asyncio.sleep(0.01)
        assert state.isr == (LEADER,)
        await _round(fetcher)
        assert _named(conn.requests[-1]) == [] and _ends(follower)[0] == 6
        await _round(fetcher)
        assert _named(conn.requests[-1]) == [0]
        for _ in range(10):
            await asyncio.sleep(0.01)
        assert sorted(state.isr) == sorted(REPLICAS)
    _run(leader, follower, scenario)


def test_a_session_evicted_on_the_leader_is_replaced_and_replication_goes_on(brokers) -> None:
    follower, leader = brokers

    async def scenario() -> None:
        fetcher, conn = _fetcher(follower, leader)
        await _produce(leader, 0, 3)
        await _round(fetcher)
        await _round(fetcher)
        old = fetcher.session.session_id
        assert leader.fetch_sessions.remove(old) is not None  # evicted
        await _produce(leader, 1, 2)
        await _round(fetcher)
        assert conn.responses[-1].error_code == errors.FetchSessionIdNotFoundError.code
        assert fetcher.session_resets == 1 and fetcher.session.session_id == 0
        await _round(fetcher)  # full, a new session
        request = conn.requests[-1]
        assert (request.session_id, request.session_epoch, _named(request)) == (0, 0, [0, 1, 2, 3])
        assert fetcher.session.session_id not in (0, old)
        assert _ends(follower) == _ends(leader) == [3, 2, 0, 0]
        # A wrong epoch (a round the leader answered but the follower lost) is recovered too.
        fetcher.session.epoch += 5
        await _produce(leader, 2, 1)
        await _round(fetcher)
        assert conn.responses[-1].error_code == errors.InvalidFetchSessionEpochError.code
        stale = fetcher.session.session_id
        await _round(fetcher)
        request = conn.requests[-1]  # full, closing the old session on the leader
        assert (request.session_id, request.session_epoch, _named(request)) == (stale, 0, [0, 1, 2, 3])
        await _round(fetcher)
        assert _ends(follower) == _ends(leader) == [3, 2, 1, 0]
        assert len(leader.fetch_sessions) == 1  # the old session was closed, not leaked
    _run(leader, follower, scenario)


def test_a_session_the_leaders_cache_evicts_is_recovered(brokers) -> None:
    """One slot: a second fetcher's new session evicts the first's, unused for longer
    than the eviction time (the cache's own rule); the first gets
    FETCH_SESSION_ID_NOT_FOUND, fetches in full, finds no room (the other session is
    fresh and a follower's) and goes on with full fetches that ask again."""
    from pylog.broker.fetch_sessions import FetchSessionCache

    follower, leader = brokers
    clock = leader.clock
    assert isinstance(clock, ManualClock)

    async def scenario() -> None:
        leader.fetch_sessions = FetchSessionCache(1, clock, eviction_ms=1000)
        first, conn = _fetcher(follower, leader)
        await _produce(leader, 0, 3)
        await _round(first)
        held = first.session.session_id
        assert held != 0
        clock.advance(2000)
        second, _conn2 = _fetcher(follower, leader)
        second.keys = {("t", 3)}
        await _round(second)
        assert second.session.session_id not in (0, held)
        assert leader.fetch_sessions.evictions == 1 and leader.fetch_sessions.get(held) is None
        await _produce(leader, 1, 2)
        await _round(first)
        assert conn.responses[-1].error_code == errors.FetchSessionIdNotFoundError.code
        for _ in range(3):
            await _round(first)
            assert (conn.requests[-1].session_id, conn.requests[-1].session_epoch) == (0, 0)
            assert _named(conn.requests[-1]) == [0, 1, 2, 3]
        assert first.session.session_id == 0
        assert _ends(follower) == _ends(leader) == [3, 2, 0, 0]
    _run(leader, follower, scenario)
