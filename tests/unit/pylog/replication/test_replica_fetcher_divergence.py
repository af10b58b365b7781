"""A follower's fetcher against a real leader broker in the same process (its Fetch handler
answers the follower's requests, without sockets): the diverging-epoch exchange of
Fetch v12 from the follower's side, as ``ReplicaFetcher`` runs it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import logcore
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


def _broker(tmp_path: Any, node_id: int) -> Broker:
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path / f"b{node_id}"),
            "broker.id": str(node_id),
            "auto.create.topics.enable": "false",
            "replica.fetch.wait.max.ms": "10",
        }
    )
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
    """The fetcher's connection to the leader: its requests go to the leader broker's
    request handlers."""

    closed = False

    def __init__(self, leader: Broker) -> None:
        self.leader = leader

    def version_for(self, _request_type: Any) -> int:
        return 12

    async def send(self, request: Any, version: int) -> Any:
        ctx = handlers.RequestContext(self.leader, 1, version, 1, "fetcher", "127.0.0.1:1")
        response = await handlers.dispatch(ctx, request)
        for topic in response.responses:  # the bytes a socket would carry (sendfile)
            for pd in topic.partitions:
                if pd.records is not None and not isinstance(pd.records, (bytes, bytearray)):
                    pd.records = pd.records.read()
        return response

    async def close(self) -> None:
        self.closed = True


async def _role(b: Broker, leader: int, epoch: int, partition_epoch: int) -> None:
    info = PartitionInfo("t", 0, leader, epoch, REPLICAS, partition_epoch, REPLICAS)
    result = await b.replicas.become_leader_or_follower(1, 1, -1, [info], ADDRESSES)
    assert result[("t", 0)] == 0


async def _produce(b: Broker, n: int) -> None:
    builder = logcore.BatchBuilder()
    for i in range(n):
        builder.append(b"v%d" % i, timestamp_ms=T0)
    R = ProduceRequest
    body = R(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            R.TopicProduceData(
                name="t",
                partition_data=[
                    R.PartitionProduceData(index=0, records=bytearray(builder.build()))
                ],
            )
        ],
    )
    resp = await handlers.dispatch(handlers.RequestContext(b, 0, 9, 1, "p", "127.0.0.1:1"), body)
    assert resp.responses[0].partition_responses[0].error_code == 0


async def _fetch_rounds(follower: Broker, leader: Broker, rounds: int) -> None:
    # A fetcher of our own (the manager's cannot reach 127.0.0.1:1 and stays idle).
    fetcher = ReplicaFetcher(follower.replicas, LEADER, 99)
    fetcher._conn = _Handlers(leader)
    fetcher.keys.add(("t", 0))
    for _ in range(rounds):
        await fetcher._fetch_once([("t", 0)])


def test_a_follower_that_led_an_epoch_without_appending_catches_up(brokers) -> None:
    """Issue 19's stuck __transaction_state replica: the follower became leader in epoch 1
    at its log end and appended nothing before the other broker led epoch 2. Its fetches
    named epoch 1; the leader answered diverging (epoch 0 ends at 3), a truncation to 3
    removed nothing and kept epoch 1, and every later fetch got the same answer: the
    follower stayed at 3 for good, logging nothing. Now the truncation drops the empty
    epoch and the next fetch takes the records."""
    follower, leader = brokers

    async def scenario() -> None:
        try:
            await _role(leader, LEADER, 0, 0)
            await _role(follower, LEADER, 0, 0)
            await _produce(leader, 3)
            await _fetch_rounds(follower, leader, 1)
            flog = follower.log_manager.get_partition("t", 0).log
            assert flog.log_end_offset == 3
            await _role(follower, FOLLOWER, 1, 1)  # leads epoch 1 at 3, appends nothing
            assert flog.leader_epoch_cache.entries == [(0, 0), (1, 3)]
            await _role(leader, LEADER, 2, 2)
            await _role(follower, LEADER, 2, 2)
            await _produce(leader, 4)
            await _fetch_rounds(follower, leader, 3)
            llog = leader.log_manager.get_partition("t", 0).log
            assert flog.log_end_offset == llog.log_end_offset == 7
            assert flog.leader_epoch_cache.entries == llog.leader_epoch_cache.entries
            # The leader saw the follower's fetch at its log end: back in sync.
            state = leader.replicas.partitions[("t", 0)]
            assert state.leader is not None and state.leader.high_watermark == 7
        finally:
            await follower.replicas.shutdown()
            await leader.replicas.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 20))
