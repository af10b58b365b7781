"""The coordinator runtime on a real single-node broker: chunked loads that yield to the
loop, failed loads retried with backoff (COORDINATOR_LOAD_IN_PROGRESS meanwhile), ordered
appends, resignation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.coordinator import (
    CoordinatorRuntime,
    LoadedMarker,
    LoadedRecord,
    PartitionState,
    TopicSpec,
    runtime,
)
from pylog.protocol.apis import ApiKey
from pylog.protocol.messages import FindCoordinatorRequest, OffsetCommitRequest, OffsetFetchRequest
from pylog.replication.append import append_records

T0 = 1_700_000_000_000
TOPIC = "coord-test"


def _batch(*keys: bytes) -> bytes:
    b = logcore.BatchBuilder(compression="none")
    for k in keys:
        b.append(b"v-" + k, key=k, timestamp_ms=T0)
    return bytes(b.build())


class _Write:
    def __init__(self, key: bytes) -> None:
        self.key = key
        self.outcome: tuple[str, int] | None = None

    def fail(self, code: int) -> None:
        self.outcome = ("failed", code)


class Recorder:
    """A ShardHandler that keeps what it was given; ``fail_replays`` replays raise first."""

    def __init__(self, fail_replays: int = 0) -> None:
        self.fail_replays = fail_replays
        self.begun: list[tuple[int, int | None]] = []
        self.chunks: list[list[LoadedRecord | LoadedMarker]] = []
        self.loaded: dict[int, int] = {}
        self.unloaded: list[int] = []
        self.settled_writes: list[tuple[bytes, int, int]] = []
        self.on_replay: Any = None

    def begin_load(self, index: int, epoch: int | None) -> None:
        self.begun.append((index, epoch))
        self.chunks = []

    def replay(self, index: int, entries: Sequence[LoadedRecord | LoadedMarker]) -> None:
        if self.fail_replays:
            self.fail_replays -= 1
            raise RuntimeError("injected replay failure")
        if self.on_replay is not None:
            self.on_replay()
        self.chunks.append(list(entries))

    def complete_load(self, index: int, read_end: int) -> int:
        self.loaded[index] = read_end
        return sum(len(c) for c in self.chunks)

    def unload(self, index: int) -> None:
        self.unloaded.append(index)

    def batch(self, write: _Write) -> bytes:
        return _batch(write.key)

    def append_timeout_ms(self, write: _Write) -> int:
        return 1000

    def settled(self, index: int, write: _Write, code: int, info: Any) -> None:
        self.settled_writes.append((write.key, code, -1 if info is None else info.first_offset))


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1",
                           "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


async def _topic_with(broker: Broker, batches: int) -> Any:
    topic = await broker.log_manager.create_topic_async(broker.executor, TOPIC, 1)
    for i in range(batches):
        await append_records(broker, topic.partitions[0], _batch(b"k%d" % i, b"x%d" % i))
    return topic


def _runtime(broker: Broker, handler: Recorder, **kw: Any) -> CoordinatorRuntime:
    return CoordinatorRuntime(broker, TopicSpec(TOPIC, 1, 1, {}), handler, **kw)


async def _until(cond: Any, what: str) -> None:
    for _ in range(1000):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_load_reads_in_bounded_chunks_and_yields_to_the_loop_between_them(broker) -> None:
    async def scenario() -> None:
        await _topic_with(broker, 20)
        handler = Recorder()
        ticks = 0
        seen: list[int] = []

        async def other_work() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)
        handler.on_replay = lambda: seen.append(ticks)
        other = asyncio.ensure_future(other_work())
        rt = _runtime(broker, handler, load_chunk_bytes=1)  # one batch per chunk
        try:
            await rt.start()
            await _until(lambda: rt.state(0) is PartitionState.ACTIVE, "the load")
        finally:
            other.cancel()
        assert len(handler.chunks) == 20 and all(len(c) == 2 for c in handler.chunks)
        assert [e.key for c in handler.chunks for e in c if isinstance(e, LoadedRecord)] == [k for i in range(20) for k in (b"k%d" % i, b"x%d" % i)]
        assert handler.loaded == {0: 40}
        # The loop ran other work between every two chunks.
        assert all(b > a for a, b in zip(seen, seen[1:], strict=False)), seen
        await rt.shutdown()
        assert handler.unloaded == [0]
    run(scenario())


def test_a_load_whose_replay_fails_once_is_retried_and_becomes_active(broker) -> None:
    async def scenario() -> None:
        await _topic_with(broker, 3)
        handler = Recorder(fail_replays=1)
        rt = _runtime(broker, handler, load_chunk_bytes=1 << 20, retry_backoff_ms=50)
        await rt.start()
        await _until(lambda: rt.state(0) is PartitionState.FAILED, "the failed load")
        assert 0 not in handler.loaded
        await _until(lambda: rt.state(0) is PartitionState.ACTIVE, "the retried load")
        assert handler.begun == [(0, None), (0, None)]  # begun again: nothing half-replayed kept
        assert sum(len(c) for c in handler.chunks) == 6 and handler.loaded == {0: 6}
        await rt.shutdown()
    run(scenario())


def test_a_failed_load_is_retried_on_the_brokers_clock(tmp_path) -> None:
    """The retry's backoff is the broker's clock time: on a virtual clock (pylog.testing)
    real time passing does not retry it, advancing the clock past the backoff does."""
    from pylog.testing.clock import VirtualClock, settle_loop

    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1"})
    clock = VirtualClock(time_ms=T0)
    b = Broker(config, clock=clock, allow_pure_python=True)
    b.log_manager.startup()

    async def scenario() -> None:
        await _topic_with(b, 2)
        handler = Recorder(fail_replays=1)
        rt = _runtime(b, handler, load_chunk_bytes=1 << 20, retry_backoff_ms=50)
        await rt.start()
        await _until(lambda: rt.state(0) is PartitionState.FAILED, "the failed load")
        await asyncio.sleep(0.15)  # three backoffs of real time
        assert rt.state(0) is PartitionState.FAILED and handler.begun == [(0, None)]
        await clock.run_due(0.049, settle_loop)
        assert rt.state(0) is PartitionState.FAILED
        await clock.run_due(0.001, settle_loop)
        await _until(lambda: rt.state(0) is PartitionState.ACTIVE, "the retried load")
        assert handler.loaded == {0: 4}
        await rt.shutdown()
    try:
        run(scenario())
    finally:
        b.log_manager.shutdown()
        b.io.shutdown()


def test_a_failed_load_waits_longer_each_time_and_stops_when_resigned(broker, monkeypatch) -> None:
    async def scenario() -> None:
        await _topic_with(broker, 1)
        reads = 0

        def broken(plog: Any, offset: int, max_bytes: int) -> Any:
            nonlocal reads
            reads += 1
            raise logcore.LogDirError(5, "injected read error")
        monkeypatch.setattr(runtime, "read_chunk", broken)
        handler = Recorder()
        rt = _runtime(broker, handler, load_chunk_bytes=1 << 20, retry_backoff_ms=20, retry_backoff_max_ms=40)
        await rt.start()
        await _until(lambda: reads >= 3, "three attempts")
        assert rt.state(0) in (PartitionState.FAILED, PartitionState.LOADING)
        assert handler.loaded == {}
        rt.on_topic_deleted()
        assert rt.state(0) is None and handler.unloaded == [0]
        settled = reads
        await asyncio.sleep(0.15)
        assert reads == settled  # a closed partition is not retried
        await rt.shutdown()
    run(scenario())


def test_writes_are_appended_in_order_and_fail_once_resigned(broker) -> None:
    async def scenario() -> None:
        await _topic_with(broker, 0)
        handler = Recorder()
        rt = _runtime(broker, handler, load_chunk_bytes=1 << 20)
        await rt.start()
        await _until(lambda: rt.state(0) is PartitionState.ACTIVE, "the load")
        rt.enqueue(0, [_Write(b"a"), _Write(b"b"), _Write(b"c")])
        await _until(lambda: len(handler.settled_writes) == 3, "the appends")
        assert handler.settled_writes == [(b"a", 0, 0), (b"b", 0, 1), (b"c", 0, 2)]
        late = _Write(b"d")
        rt.on_topic_deleted()
        rt.enqueue(0, [late])
        assert late.outcome == ("failed", errors.NotCoordinatorError.code)
        await rt.shutdown()
    run(scenario())


def test_writes_with_nothing_queued_are_appended_and_settled_inline(broker) -> None:
    """On a single node a write is appended and settled within ``enqueue`` (no appender
    task, no loop turn); one that settles may enqueue the next, taken in the same drain.
    (The log's first append writes its leader epoch to a file: on a thread, not inline.)"""
    async def scenario() -> None:
        await _topic_with(broker, 1)
        handler = Recorder()
        rt = _runtime(broker, handler, load_chunk_bytes=1 << 20)
        await rt.start()
        await _until(lambda: rt.state(0) is PartitionState.ACTIVE, "the load")
        settled = handler.settled

        def chained(index: int, write: _Write, code: int, info: Any) -> None:
            settled(index, write, code, info)
            if write.key == b"a":
                rt.enqueue(0, [_Write(b"c")])  # queued behind b, appended after it
        handler.settled = chained  # type: ignore[method-assign]
        rt.enqueue(0, [_Write(b"a"), _Write(b"b")])
        assert handler.settled_writes == [(b"a", 0, 2), (b"b", 0, 3), (b"c", 0, 4)]
        assert rt._partitions[0].appender is None
        await rt.shutdown()
    run(scenario())


def test_a_write_behind_an_append_on_an_io_thread_keeps_its_place(broker) -> None:
    """Nothing jumps the partition's queue: while an append runs on an I/O thread for the
    partition, writes go to the appender task and are appended after it, in order."""
    async def scenario() -> None:
        topic = await _topic_with(broker, 1)
        handler = Recorder()
        rt = _runtime(broker, handler, load_chunk_bytes=1 << 20)
        await rt.start()
        await _until(lambda: rt.state(0) is PartitionState.ACTIVE, "the load")
        release = threading.Event()
        key = (TOPIC, 0)

        def held() -> None:
            release.wait(10)
        busy = asyncio.ensure_future(broker.io.run_ordered(key, held))
        await asyncio.sleep(0)
        assert broker.io.busy(key)
        produced = asyncio.ensure_future(append_records(broker, topic.partitions[0], _batch(b"p")))
        rt.enqueue(0, [_Write(b"a"), _Write(b"b")])
        assert handler.settled_writes == []  # not inline: an append is queued on a thread
        release.set()
        await busy
        await produced
        await _until(lambda: len(handler.settled_writes) == 2, "the appends")
        assert handler.settled_writes == [(b"a", 0, 3), (b"b", 0, 4)]  # after the produce at 2
        await rt.shutdown()
    run(scenario())


async def _call(b: Broker, key: int, version: int, request: Any) -> Any:
    return await handlers.dispatch(handlers.RequestContext(b, key, version, 1, "c", "127.0.0.1:1"), request)


async def _fetch(b: Broker) -> tuple[int, int]:
    R = OffsetFetchRequest
    r = await _call(b, ApiKey.OFFSET_FETCH, 7, R(group_id="g", topics=[
        R.OffsetFetchRequestTopic(name="data", partition_indexes=[0])]))
    if r.error_code:
        return r.error_code, -1
    return r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].committed_offset


def test_the_group_service_answers_load_in_progress_until_a_failed_load_succeeds(tmp_path, monkeypatch) -> None:
    """The groups of ``__consumer_offsets`` come back after a read error at start: the
    partition answers COORDINATOR_LOAD_IN_PROGRESS while the load waits for its retry."""
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1",
                           "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})

    async def first_life() -> None:
        b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
        await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.startup)
        await b.groups.start()
        await b.log_manager.create_topic_async(b.executor, "data", 1)
        assert (await _call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))).error_code == 0
        R = OffsetCommitRequest
        r = await _call(b, ApiKey.OFFSET_COMMIT, 7, R(group_id="g", generation_id_or_member_epoch=-1,
                                                      member_id="", topics=[R.OffsetCommitRequestTopic(
                                                          name="data", partitions=[R.OffsetCommitRequestPartition(
                                                              partition_index=0, committed_offset=42)])]))
        assert r.topics[0].partitions[0].error_code == 0
        await b.groups.shutdown()
        await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.shutdown)
        b.io.shutdown()

    async def second_life() -> None:
        real = runtime.read_chunk
        failures = 0

        def flaky(plog: Any, offset: int, max_bytes: int) -> Any:
            nonlocal failures
            if failures == 0:
                failures += 1
                raise OSError(24, "Too many open files")
            return real(plog, offset, max_bytes)
        monkeypatch.setattr(runtime, "read_chunk", flaky)
        b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
        await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.startup)
        try:
            b.groups.runtime.retry_backoff_ms = 200
            await b.groups.start()
            await _until(lambda: b.groups.runtime.state(0) is PartitionState.FAILED, "the failed load")
            assert await _fetch(b) == (errors.CoordinatorLoadInProgressError.code, -1)
            await _until(lambda: b.groups.runtime.state(0) is PartitionState.ACTIVE, "the retried load")
            assert await _fetch(b) == (0, 42)
        finally:
            await b.groups.shutdown()
            await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.shutdown)
            b.io.shutdown()

    run(first_life())
    run(second_life())
