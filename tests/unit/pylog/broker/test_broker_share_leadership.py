"""Share partitions follow their topic partition's leadership (in process, LeaderAndIsr
applied by hand to the replica manager, the share coordinator local): a new leader epoch of
a leadership that goes on keeps the share partition and its locks; a broker that becomes a
follower answers NOT_LEADER_OR_FOLLOWER; when it leads again the share partition is read
back from the share coordinator: acknowledged records are not delivered again, the others
are, with their delivery counts going on, and the old leader epoch is fenced."""

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
from pylog.protocol.messages import ProduceRequest, ShareAcknowledgeRequest, ShareFetchRequest
from pylog.replication import PartitionInfo

T0 = 1_700_000_000_000
ME, OTHER = 0, 7
F, A = ShareFetchRequest, ShareAcknowledgeRequest
NOT_LEADER = errors.NotLeaderOrFollowerError.code


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "auto.create.topics.enable": "false"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


async def call(broker: Broker, api_key: int, version: int, body: Any) -> Any:
    ctx = handlers.RequestContext(broker, api_key, version, 1, "test", "127.0.0.1:1")
    return await asyncio.wait_for(handlers.dispatch(ctx, body), 10)


async def lead(broker: Broker, leader: int, epoch: int) -> None:
    info = PartitionInfo("t", 0, leader, epoch, (leader,), epoch, (ME, OTHER))
    result = await broker.replicas.become_leader_or_follower(1, 1, -1, [info], {OTHER: ("127.0.0.1", 1)})
    assert result[("t", 0)] == 0


def fetch(tid: Any, member: str, epoch: int, acks: tuple[tuple[int, int, int], ...] = ()) -> Any:
    return F(group_id="g", member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
             max_bytes=1 << 20, max_records=100, batch_size=100,
             topics=[F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(
                 partition_index=0, acknowledgement_batches=[
                     F.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=[t]) for a, b, t in acks])])],
             forgotten_topics_data=[])


def ack(tid: Any, member: str, epoch: int, first: int, last: int) -> Any:
    return A(group_id="g", member_id=member, share_session_epoch=epoch, topics=[A.AcknowledgeTopic(
        topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[1])])])])


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def codes(resp: Any) -> list[int]:
    return [p.error_code for t in resp.responses for p in t.partitions]


def test_share_partitions_follow_the_leadership(broker: Broker) -> None:
    async def go() -> None:
        await broker.share.start()
        try:
            topic = broker.log_manager.create_topic("t", 1)
            tid = topic.topic_id
            await lead(broker, ME, 1)
            b = logcore.BatchBuilder()
            for i in range(5):
                b.append(b"v%d" % i, timestamp_ms=T0)
            R = ProduceRequest
            resp = await call(broker, 0, 9, R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
                R.TopicProduceData(name="t", partition_data=[R.PartitionProduceData(index=0, records=b.build())])]))
            assert resp.responses[0].partition_responses[0].error_code == 0
            broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
            # The group coordinator's InitializeShareGroupState (Kafka 4.1) comes first.
            code = await broker.share.persister.initialize(("g", tid, 0), 1, -1)
            assert code.error_code == 0

            assert acquired(await call(broker, 78, 1, fetch(tid, "m1", 0))) == [(0, 4, 1)]
            assert codes(await call(broker, 79, 1, ack(tid, "m1", 1, 0, 1))) == [0]
            # The ISR changed: epoch 2, same leader. The share partition and m1's locks stay.
            await lead(broker, ME, 2)
            assert codes(await call(broker, 79, 1, ack(tid, "m1", 2, 2, 2))) == [0]
            # A follower now: its share partitions went.
            await lead(broker, OTHER, 3)
            assert codes(await call(broker, 78, 1, fetch(tid, "m1", 3))) == [NOT_LEADER]
            assert not broker.share.partitions
            # Leading again (epoch 4): the state is read back from the share coordinator.
            await lead(broker, ME, 4)
            r = await call(broker, 78, 1, fetch(tid, "m2", 0))
            assert acquired(r) == [(3, 4, 2)]  # 0-2 were accepted; 3-4 delivered a second time
            # m1's old lock on offset 3 did not survive the leader change.
            r = await call(broker, 79, 1, ack(tid, "m1", 4, 3, 3))
            assert codes(r) == [errors.InvalidRecordStateError.code]
            # The coordinator holds leader epoch 4: a write of epoch 2 (the old leadership) is fenced.
            store = broker.share.state
            key = ("g", tid, 0)
            assert store.saved(key).leader_epoch == 4
            stale = await store.write_state(key, 0, 2, 0, [])
            assert stale.error_code == errors.FencedLeaderEpochError.code
            assert store.saved(key).start_offset == 3
        finally:
            await broker.share.shutdown()
            await broker.replicas.shutdown()

    asyncio.run(go())
