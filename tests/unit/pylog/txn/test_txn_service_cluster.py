"""The transaction service in cluster mode, in-process: LeaderAndIsr applied to the replica
manager directly makes this broker lead (then follow) a ``__transaction_state`` partition;
the coordinator loads it with the leader epoch as its coordinator epoch, writes the markers of
its own partition in-process and sends the other's to a fake channel, and resigns when the
partition moves. The cluster runtime is a stand-in holding a ``MetadataCache`` and a fake
ZooKeeper producer id store; no sockets are needed (the follower's fetcher only retries)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker.server import Broker
from pylog.cluster import zk_data as z
from pylog.config import BrokerConfig
from pylog.controller.metadata_cache import BrokerInfo, MetadataCache, PartitionMeta
from pylog.log.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from pylog.protocol.messages import WriteTxnMarkersResponse
from pylog.replication import PartitionInfo
from pylog.txn.markers import MarkerChannels

T0 = 1_700_000_000_000
ME, OTHER = 0, 1
TXN = TRANSACTION_STATE_TOPIC_NAME


class FakeCluster:
    def __init__(self) -> None:
        self.metadata = MetadataCache()
        self.metadata.brokers = {b: BrokerInfo(b, "127.0.0.1", 1, None) for b in (ME, OTHER)}
        self.metadata.partitions = {
            TXN: {0: PartitionMeta(ME, 5, (ME,), (ME,), (), 0)},
            "d": {0: PartitionMeta(ME, 0, (ME,), (ME,), (), 0),
                  1: PartitionMeta(OTHER, 0, (OTHER,), (OTHER,), (), 0)},
        }
        self.last_block: z.ProducerIdBlock | None = None
        self.store = self

    def claim_producer_id_block(self, broker_id: int) -> z.ProducerIdBlock:
        self.last_block = z.ProducerIdBlock.next_after(self.last_block, broker_id)
        return self.last_block

    async def zk(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    async def topic_config(self, topic: str) -> dict[str, str]:
        return {}


class FakeChannel:
    """Answers every WriteTxnMarkers with NONE for each partition, recording it."""

    def __init__(self, sent: list[Any], *args: Any) -> None:
        self.host, self.port = args[1], args[2]
        self.sent = sent

    def enqueue(self, builder: Any, on_response: Any, version: Any = None) -> None:
        body = builder(None)
        self.sent.append(body)
        R = WriteTxnMarkersResponse
        resp = R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=0)
                for p in t.partition_indexes]) for t in m.topics]) for m in body.markers])
        asyncio.get_running_loop().call_soon(on_response, resp)

    async def close(self) -> None:
        pass


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "auto.create.topics.enable": "false",
                           "transaction.state.log.num.partitions": "1"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.cluster = FakeCluster()
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


async def _lead(broker: Broker, leader: int, epoch: int) -> None:
    info = PartitionInfo(TXN, 0, leader, epoch, (leader,), epoch, (ME, OTHER))
    result = await broker.replicas.become_leader_or_follower(
        1, 1, -1, [info], {OTHER: ("127.0.0.1", 1)})
    assert result[(TXN, 0)] == 0


async def _until(pred: Any, what: str) -> None:
    for _ in range(500):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_coordinator_follows_leadership_and_sends_remote_markers(broker) -> None:
    sent: list[Any] = []

    async def scenario() -> None:
        txns = broker.txns
        txns._channels = MarkerChannels("test", lambda *a: FakeChannel(sent, *a))
        await broker.log_manager.create_topic_async(broker.executor, "d", 2, 1, {})
        assert await txns.ensure_topic() is None  # never created here in cluster mode
        assert (await txns.init_producer_id("tx", 60000, None)).error_code == \
            errors.NotCoordinatorError.code
        await _lead(broker, ME, 5)
        # d-0 is led here too (its marker is written locally; a partition with no role
        # here refuses markers, as the controller's LeaderAndIsr gives every replica one).
        d0 = PartitionInfo("d", 0, ME, 0, (ME,), 0, (ME,))
        assert (await broker.replicas.become_leader_or_follower(1, 1, -1, [d0], {}))[("d", 0)] == 0
        assert txns.coordinator.coordinator_epoch_of(0) == 5
        await _until(lambda: not txns.coordinator.is_loading(0), "the load")
        init = await txns.init_producer_id("tx", 60000, None)
        assert (init.error_code, init.producer_id) == (0, 0)  # the first ZooKeeper block
        pid, epoch = init.producer_id, init.producer_epoch
        assert await txns.add_partitions("tx", pid, epoch, [("d", 0), ("d", 1)]) == 0
        assert await txns.end_txn("tx", pid, epoch, True) == 0
        await _until(lambda: txns.coordinator.metadata("tx").state.kafka_name == "CompleteCommit",
                     "the completion")
        # d-1 is led by the other broker: one WriteTxnMarkers to it, in coordinator epoch 5.
        [req] = sent
        [m] = req.markers
        assert (m.producer_id, m.transaction_result, m.coordinator_epoch) == (pid, True, 5)
        assert [(t.name, t.partition_indexes) for t in m.topics] == [("d", [1])]
        # d-0 is led here: its marker is in the local log.
        plog = broker.log_manager.get_partition("d", 0).log
        [batch] = list(logcore.iter_batches(plog.read(0, 1 << 20).read()))
        assert batch.is_control and batch.producer_id == pid
        # The partition moves to the other broker: this one resigns.
        await _lead(broker, OTHER, 6)
        await _until(lambda: txns.coordinator.hosted() == [], "the resignation")
        assert await txns.add_partitions("tx", pid, epoch, [("d", 0)]) == errors.NotCoordinatorError.code
        # KIP-890 verification of an id coordinated elsewhere is asked of that broker (here
        # the metadata still names this broker while it no longer hosts the partition).
        assert await txns.txn_verify("tx", pid, epoch, "d", 0) == \
            errors.CoordinatorLoadInProgressError.code
        await txns.shutdown()

    async def go() -> None:
        try:
            await asyncio.wait_for(scenario(), 20)
        finally:
            await broker.replicas.shutdown()
    asyncio.run(go())
