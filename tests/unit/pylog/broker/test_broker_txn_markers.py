"""write_markers (WriteTxnMarkers) and Produce's txn_verify hook, in process."""

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
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from pylog.protocol.messages import ProduceRequest
from pylog.replication.markers import TxnMarker, TxnMarkerResult, write_markers

T0 = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.executor.shutdown()


def tbatch(pid: int, seq: int, epoch: int = 0) -> bytes:
    b = logcore.BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                             transactional=True)
    b.append(b"v", key=b"k", timestamp_ms=T0)
    return b.build()


async def produce(broker: Broker, records: bytes, txn_id: str | None = "tx") -> Any:
    R = ProduceRequest
    body = R(transactional_id=txn_id, acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.PartitionProduceData(index=0, records=records)])])
    ctx = handlers.RequestContext(broker, 0, 9, 1, "test", "127.0.0.1:1")
    resp = await handlers.dispatch(ctx, body)
    return resp.responses[0].partition_responses[0]


def test_markers_for_consumer_offsets_tell_the_group_coordinator(broker) -> None:
    calls: list[tuple[int, int, bool, int]] = []

    async def on_txn_marker(partition: int, producer_id: int, commit: bool, offset: int) -> None:
        calls.append((partition, producer_id, commit, offset))

    async def go() -> list[TxnMarkerResult]:
        await broker.groups.ensure_topic()
        broker.groups.on_txn_marker = on_txn_marker
        plog = broker.log_manager.topics[GROUP_METADATA_TOPIC_NAME].partitions[3].log
        plog.append(tbatch(77, -1))  # as the group coordinator writes TxnOffsetCommit
        assert plog.first_unstable_offset == 0
        return await write_markers(broker, [
            TxnMarker(77, 0, True, 4, [(GROUP_METADATA_TOPIC_NAME, 3),
                                       (GROUP_METADATA_TOPIC_NAME, 999), ("nope", 0)])])

    results = asyncio.run(asyncio.wait_for(go(), 20))
    assert results == [TxnMarkerResult(77, GROUP_METADATA_TOPIC_NAME, 3, 0, 1),
                       TxnMarkerResult(77, GROUP_METADATA_TOPIC_NAME, 999,
                                       errors.UnknownTopicOrPartitionError.code),
                       TxnMarkerResult(77, "nope", 0, errors.UnknownTopicOrPartitionError.code)]
    assert calls == [(3, 77, True, 1)]
    plog = broker.log_manager.topics[GROUP_METADATA_TOPIC_NAME].partitions[3].log
    assert plog.first_unstable_offset is None


@pytest.mark.parametrize("code, expected", [
    (0, 0),
    (errors.InvalidTxnStateError.code, errors.InvalidTxnStateError.code),
    (errors.ProducerFencedError.code, errors.InvalidProducerEpochError.code),
    (errors.TransactionAbortableError.code, errors.InvalidTxnStateError.code),  # Produce v9
])
def test_txn_verify_hook_guards_the_first_transactional_batch(broker, code, expected) -> None:
    seen: list[tuple[str, int, int, str, int]] = []

    async def txn_verify(txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
        seen.append((txn_id, pid, epoch, topic, partition))
        return code

    async def go() -> list[int]:
        broker.txn_verify = txn_verify  # type: ignore[attr-defined]
        first = await produce(broker, tbatch(5, 0))
        out = [first.error_code]
        if first.error_code == 0:
            # In a transaction on this partition now: no second verification.
            out.append((await produce(broker, tbatch(5, 1))).error_code)
        return out

    got = asyncio.run(asyncio.wait_for(go(), 20))
    assert got[0] == expected
    if expected == 0:
        assert got == [0, 0] and seen == [("tx", 5, 0, "t", 0)]
    else:
        assert seen == [("tx", 5, 0, "t", 0)]
        assert broker.log_manager.topics["t"].partitions[0].log.log_end_offset == 0
