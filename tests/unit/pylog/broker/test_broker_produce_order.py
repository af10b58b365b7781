"""Produce and fetch around the I/O threads: appends that go to a thread and appends cheap
enough for the loop land in arrival order per partition, one request's partitions are
appended together, and an append during a fetch's read wakes that fetch."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import logcore
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.messages import ProduceRequest
from pylog.replication import append

T0 = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def _body(topic: str, parts: dict[int, bytes]) -> Any:
    R = ProduceRequest
    return R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=p, records=r) for p, r in parts.items()])])


def _batch(compression: str = "none", n: int = 3) -> bytearray:
    b = logcore.BatchBuilder(compression=compression)
    for i in range(n):
        b.append(b"v%d" % i, timestamp_ms=T0)
    return bytearray(b.build())


def _ctx(broker: Broker) -> handlers.RequestContext:
    return handlers.RequestContext(broker, 0, 9, 1, "test", "127.0.0.1:1")


def test_a_cheap_append_queues_behind_one_on_a_thread(broker, monkeypatch) -> None:
    gate = threading.Event()
    real = append._append_now

    def slow_append(partition: Any, records: Any, acks: int, *epoch: int) -> Any:
        if threading.current_thread() is not threading.main_thread():
            gate.wait(5)  # hold the thread-side append until the cheap one has arrived
        return real(partition, records, acks, *epoch)

    monkeypatch.setattr(append, "_append_now", slow_append)

    async def scenario() -> tuple[int, int]:
        await handlers.dispatch(_ctx(broker), _body("t", {0: _batch()}))  # create the topic
        compressed = asyncio.ensure_future(handlers.dispatch(_ctx(broker), _body("t", {0: _batch("zstd")})))
        await asyncio.sleep(0.05)
        assert broker.io.busy(("t", 0))
        cheap = asyncio.ensure_future(handlers.dispatch(_ctx(broker), _body("t", {0: _batch()})))
        await asyncio.sleep(0.05)
        assert not cheap.done()  # it did not overtake
        gate.set()
        a, b = await asyncio.wait_for(asyncio.gather(compressed, cheap), 10)
        return (a.responses[0].partition_responses[0].base_offset,
                b.responses[0].partition_responses[0].base_offset)

    assert asyncio.run(asyncio.wait_for(scenario(), 20)) == (3, 6)


def test_inline_only_for_small_uncompressed_appends(broker) -> None:
    async def scenario() -> None:
        await handlers.dispatch(_ctx(broker), _body("t", {0: _batch()}))

    asyncio.run(scenario())
    p = broker.log_manager.topics["t"].partitions[0]
    assert append._inline(p, _batch(), 0)
    assert not append._inline(p, _batch("zstd"), 0)
    big = logcore.BatchBuilder()
    big.append(b"x" * (append.INLINE_APPEND_MAX_BYTES + 1))
    assert not append._inline(p, big.build(), 0)
    assert not append._inline(p, _batch(), 1)  # a new leader epoch writes its file


def _batch_at(ts: int) -> bytearray:
    b = logcore.BatchBuilder()
    b.append(b"v", timestamp_ms=ts)
    return bytearray(b.build())


@pytest.mark.parametrize("kind", ["segment.ms", "segment.bytes", "index", "flush.messages"])
def test_an_append_that_would_roll_or_flush_goes_to_a_thread(broker, kind) -> None:
    """Every kind of roll (and an fsync policy) is predicted from the batch header and
    the active segment, so the append runs on an I/O thread, never on the loop."""
    async def scenario() -> None:
        await handlers.dispatch(_ctx(broker), _body("t", {0: _batch()}))

    asyncio.run(scenario())
    p = broker.log_manager.topics["t"].partitions[0]
    ts = T0 + 10
    assert append._inline(p, _batch_at(ts), 0)
    cfg = p.log.config
    if kind == "segment.ms":
        p.log.update_config(cfg.replace(segment_ms=1000, segment_jitter_ms=0))
        ts = T0 + 1001  # the first batch is at T0: this one is more than segment.ms later
    elif kind == "segment.bytes":
        p.log.update_config(cfg.replace(segment_bytes=p.log.active_segment.size + 60))
    elif kind == "index":
        p.log.active_segment.index_full = True  # what an append that filled it leaves
    else:
        p.log.update_config(cfg.replace(flush_messages=1))
    assert not append._inline(p, _batch_at(ts), 0)
    rolled = p.log.append(_batch_at(ts), leader_epoch=0).rolled
    assert rolled == (kind != "flush.messages")


def test_partitions_of_one_request_are_all_answered(broker) -> None:
    async def scenario() -> Any:
        return await handlers.dispatch(_ctx(broker), _body("t", {0: _batch("zstd"), 1: _batch(), 7: _batch()}))

    resp = asyncio.run(asyncio.wait_for(scenario(), 10))
    parts = resp.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, 0, 0), (1, 0, 0), (7, 3, -1)]


def test_a_fetch_sees_an_append_that_lands_while_it_reads(broker, monkeypatch) -> None:
    """Reads may await an I/O thread; an append (and its notify) in that window must wake
    the fetch, not leave it waiting out max_wait_ms."""
    from pylog.broker.handlers import fetch
    from pylog.protocol.messages import FetchRequest

    real_read_all = fetch._read_all
    state = {"appended": False}

    async def read_then_append(ctx: Any, request: Any, *args: Any) -> Any:
        result = await real_read_all(ctx, request, *args)
        if not state["appended"]:
            # Another client's produce lands after this pass read the partition and
            # before the fetch waits (a read that awaited an I/O thread opens the window).
            state["appended"] = True
            broker.log_manager.topics["t"].partitions[0].log.append(_batch())
            broker.waiters.notify(("t", 0))
        return result

    monkeypatch.setattr(fetch, "_read_all", read_then_append)
    F = FetchRequest
    body = F(replica_id=-1, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="t", partitions=[
                 F.FetchPartition(partition=0, fetch_offset=3, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")

    async def scenario() -> Any:
        await handlers.dispatch(_ctx(broker), _body("t", {0: _batch()}))  # offsets 0-2
        ctx = handlers.RequestContext(broker, 1, 12, 2, "test", "127.0.0.1:1")
        return await asyncio.wait_for(handlers.dispatch(ctx, body), 5)

    resp = asyncio.run(asyncio.wait_for(scenario(), 20))
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 6 and len(part.records) > 0


@pytest.mark.parametrize(("codec", "inline"), [("producer", True), ("uncompressed", True), ("lz4", False)])
def test_an_uncompressed_topic_takes_uncompressed_batches_inline_as_they_are(broker, codec, inline) -> None:
    """``__transaction_state`` is created ``compression.type=uncompressed``: an uncompressed
    batch needs no rewrite there, so its small appends run on the loop like produce's."""
    async def scenario() -> Any:
        topic = await broker.log_manager.create_topic_async(broker.executor, "c", 1, 1,
                                                            {"compression.type": codec})
        await append.append_records(broker, topic.partitions[0], _batch())  # the epoch file
        return topic.partitions[0]

    p = asyncio.run(scenario())
    batch = _batch()
    assert append._inline(p, batch, 0) is inline
    info = append.try_append_inline(broker, p, batch)
    assert (info is not None) is inline
    if inline:
        stored = p.log.read(info.first_offset, 1 << 20).read()
        assert logcore.RecordBatch(stored).compression == "none"
