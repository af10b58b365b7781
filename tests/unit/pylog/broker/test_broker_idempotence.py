"""InitProducerId and idempotent Produce through the dispatcher, in process."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.producer_ids import FILE_NAME, ProducerIdAllocator
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.messages import InitProducerIdRequest, ProduceRequest

T0 = 1_700_000_000_000


def make_broker(data: str) -> Broker:
    config = BrokerConfig({"log.dirs": data, "num.partitions": "1"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    return b


def stop(b: Broker) -> None:
    b.log_manager.shutdown()
    b.executor.shutdown()


@pytest.fixture
def data(tmp_path) -> str:
    return str(tmp_path / "data")


@pytest.fixture
def broker(data):
    b = make_broker(data)
    yield b
    stop(b)


def call(broker: Broker, api_key: int, version: int, body: Any) -> Any:
    ctx = handlers.RequestContext(broker, api_key, version, 1, "test", "127.0.0.1:1")
    return asyncio.run(asyncio.wait_for(handlers.dispatch(ctx, body), 10))


def init_pid(broker: Broker, version: int = 4, transactional_id: str | None = None) -> Any:
    body = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60000,
                                 producer_id=-1, producer_epoch=-1)
    return call(broker, 22, version, body)


def pbatch(pid: int, seq: int, epoch: int = 0, n: int = 2) -> bytes:
    b = logcore.BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(b"v%d" % (seq + i), timestamp_ms=T0)
    return b.build()


def produce(broker: Broker, records: bytes, topic: str = "t") -> Any:
    R = ProduceRequest
    body = R(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=0, records=records)])])
    return call(broker, 0, 9, body).responses[0].partition_responses[0]


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_gives_new_ids_at_every_version(broker, version) -> None:
    a, b = init_pid(broker, version), init_pid(broker, version)
    assert (a.error_code, b.error_code) == (0, 0)
    assert a.producer_epoch == b.producer_epoch == 0
    assert 0 <= a.producer_id < b.producer_id


def test_transactional_id_before_its_coordinator_exists(broker) -> None:
    # No __transaction_state yet (FindCoordinator creates it): the client is told to look
    # its coordinator up, as Kafka answers for a partition it does not lead.
    resp = init_pid(broker, 4, transactional_id="tx-1")
    assert resp.error_code == errors.NotCoordinatorError.code
    assert resp.producer_id == -1


def test_producer_ids_are_not_reused_across_restarts(data) -> None:
    b = make_broker(data)
    first = [init_pid(b).producer_id for _ in range(3)]
    stop(b)
    b = make_broker(data)
    try:
        again = init_pid(b).producer_id
    finally:
        stop(b)
    assert again > max(first)


def test_allocator_reserves_blocks_before_handing_out(tmp_path) -> None:
    d = str(tmp_path)
    alloc = ProducerIdAllocator(d, block_size=3)
    assert [alloc.next_id() for _ in range(4)] == [0, 1, 2, 3]
    with open(os.path.join(d, FILE_NAME)) as f:
        assert f.read().strip() == "6"  # the second block is on disk before id 3 is used
    # a "crash" now: the new allocator starts after everything reserved
    assert ProducerIdAllocator(d, block_size=3).next_id() == 6
    with open(os.path.join(d, FILE_NAME), "w") as f:
        f.write("garbage")
    with pytest.raises(ValueError, match="producer id mark"):
        ProducerIdAllocator(d)


def test_idempotent_produce_duplicate_and_errors(broker) -> None:
    pid = init_pid(broker).producer_id
    r0 = produce(broker, pbatch(pid, 0))
    assert (r0.error_code, r0.base_offset) == (0, 0)
    r1 = produce(broker, pbatch(pid, 2))
    assert (r1.error_code, r1.base_offset) == (0, 2)
    dup = produce(broker, pbatch(pid, 0))  # a retry of the first batch
    assert (dup.error_code, dup.base_offset) == (0, 0)
    gap = produce(broker, pbatch(pid, 9))
    assert gap.error_code == errors.OutOfOrderSequenceNumberError.code == 45
    assert "out of order" in gap.error_message
    stale_setup = produce(broker, pbatch(pid, 0, epoch=1))
    assert stale_setup.error_code == 0 and stale_setup.base_offset == 4
    stale = produce(broker, pbatch(pid, 4, epoch=0))
    assert stale.error_code == errors.InvalidProducerEpochError.code == 47
    nxt = produce(broker, pbatch(pid, 2, epoch=1))
    assert (nxt.error_code, nxt.base_offset) == (0, 6)
    # offsets 0-3, then epoch 1 at 4-5 and 6-7: the duplicate and the refusals wrote nothing


def test_transactional_batch_needs_transactional_id(broker) -> None:
    raw = bytearray(pbatch(1, 0))
    raw[22] |= 0x10  # attributes (int16 at byte 21): transactional; checked before the CRC
    resp = produce(broker, bytes(raw))
    assert resp.error_code == errors.TransactionalIdAuthorizationFailedError.code
    assert "transactional_id" in resp.error_message


def test_producer_ids_are_unique_when_taken_from_many_threads(broker, tmp_path) -> None:
    # The handler's per-broker allocator is made once however many threads ask at once
    # (two allocators on one directory would hand out the same ids), and one allocator
    # never gives an id twice across threads, through many block reservations.
    from pylog.broker.handlers.init_producer_id import allocator

    threads = 8
    barrier = threading.Barrier(threads)
    seen_allocators: list[Any] = [None] * threads
    ids: list[list[int]] = [[] for _ in range(threads)]
    shared = ProducerIdAllocator(str(tmp_path), block_size=5)

    def work(t: int) -> None:
        barrier.wait()
        seen_allocators[t] = allocator(broker)
        ids[t] = [shared.next_id() for _ in range(200)]

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert len({id(a) for a in seen_allocators}) == 1 and seen_allocators[0] is not None
    every = sorted(i for mine in ids for i in mine)
    assert every == list(range(threads * 200))
    assert ProducerIdAllocator(str(tmp_path), block_size=5).next_id() == threads * 200
