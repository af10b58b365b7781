"""The replica manager driven in-process, without sockets: LeaderAndIsr applied directly,
Produce / Fetch / OffsetForLeaderEpoch through the handlers' dispatcher, a follower's
fetches made up as Fetch requests with its replica id. Kafka's PartitionTest /
ReplicaManagerTest cases: acks=all waits for the ISR, high watermark bounds consumers,
fencing by leader epoch, stale requests ignored, ISR shrink under min ISR."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.messages import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from pylog.replication import PartitionInfo

T0 = 1_700_000_000_000
ME, OTHER = 0, 7


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "auto.create.topics.enable": "false",
                           "replica.lag.time.max.ms": "10000", "min.insync.replicas": "2"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def run(broker: Broker, scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        try:
            return await asyncio.wait_for(scenario(), 20)
        finally:
            await broker.replicas.shutdown()
    return asyncio.run(go())


def _ctx(broker: Broker, key: int, version: int) -> handlers.RequestContext:
    return handlers.RequestContext(broker, key, version, 1, "test", "127.0.0.1:1")


def batch(n: int = 3) -> bytearray:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, timestamp_ms=T0)
    return bytearray(b.build())


async def produce(broker: Broker, acks: int = -1, n: int = 3, timeout_ms: int = 5000) -> Any:
    R = ProduceRequest
    body = R(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.PartitionProduceData(index=0, records=batch(n))])])
    resp = await handlers.dispatch(_ctx(broker, 0, 9), body)
    return resp.responses[0].partition_responses[0]


async def fetch(broker: Broker, offset: int, replica_id: int = -1, epoch: int = -1,
                last_fetched_epoch: int = -1, version: int = 12) -> Any:
    F = FetchRequest
    body = F(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                 topic="t", partitions=[F.FetchPartition(
                     partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                     last_fetched_epoch=last_fetched_epoch, log_start_offset=0,
                     partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    resp = await handlers.dispatch(_ctx(broker, 1, version), body)
    return resp.responses[0].partitions[0]


async def latest(broker: Broker, epoch: int = -1) -> tuple[int, int, int]:
    L = ListOffsetsRequest
    body = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="t", partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch, timestamp=-1)])])
    part = (await handlers.dispatch(_ctx(broker, 2, 7), body)).topics[0].partitions[0]
    return part.error_code, part.offset, part.leader_epoch


async def lead(broker: Broker, leader: int = ME, epoch: int = 0, isr: tuple[int, ...] = (ME, OTHER),
               partition_epoch: int = 0, controller_epoch: int = 1) -> int:
    info = PartitionInfo("t", 0, leader, epoch, isr, partition_epoch, (ME, OTHER))
    result = await broker.replicas.become_leader_or_follower(
        1, controller_epoch, -1, [info], {OTHER: ("127.0.0.1", 1)})
    return result[("t", 0)]


def test_acks_all_waits_for_the_follower_and_consumers_read_below_the_high_watermark(broker) -> None:
    async def scenario() -> None:
        assert await lead(broker) == 0
        waiting = asyncio.ensure_future(produce(broker))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the follower has not fetched it yet
        assert broker.replicas.waiting_count() == 1
        consumer = await fetch(broker, 0)
        assert consumer.error_code == 0 and consumer.high_watermark == 0
        assert not consumer.records  # written, not committed: invisible
        assert await latest(broker) == (0, 0, -1)  # "latest" is the high watermark
        follower = await fetch(broker, 0, replica_id=OTHER, epoch=0)
        assert follower.error_code == 0 and len(follower.records) > 0  # reads past the HW
        assert not waiting.done()
        follower = await fetch(broker, 3, replica_id=OTHER, epoch=0)  # it has 0..2 now
        assert follower.high_watermark == 3
        pr = await asyncio.wait_for(waiting, 5)
        assert pr.error_code == 0 and pr.base_offset == 0
        consumer = await fetch(broker, 0)
        assert consumer.high_watermark == 3 and len(consumer.records) > 0
        assert await latest(broker) == (0, 3, 0)
        assert (await latest(broker, epoch=1))[0] == errors.UnknownLeaderEpochError.code
    run(broker, scenario)


def test_isr_shrinks_after_the_lag_time_and_acks_all_is_then_refused(broker) -> None:
    clock = broker.clock
    assert isinstance(clock, ManualClock)

    async def scenario() -> None:
        await lead(broker)
        assert (await produce(broker, acks=1)).error_code == 0
        await fetch(broker, 3, replica_id=OTHER, epoch=0)
        assert broker.replicas.partitions[("t", 0)].high_watermark == 3
        clock.advance(9_000)
        broker.replicas.maybe_shrink_isr()
        await asyncio.sleep(0)
        assert broker.replicas.partitions[("t", 0)].isr == (ME, OTHER)  # not lagging long enough
        # A produce the follower never fetches: once the lag passes, the ISR shrinks to
        # the leader, which is under min.insync.replicas=2.
        slow = asyncio.ensure_future(produce(broker, timeout_ms=300))
        await asyncio.sleep(0.05)
        clock.advance(11_000)
        broker.replicas.maybe_shrink_isr()
        for _ in range(10):
            await asyncio.sleep(0.01)
        state = broker.replicas.partitions[("t", 0)]
        assert state.isr == (ME,) and broker.replicas.isr_changes[-1] == ("t", 0, (ME,))
        pr = await slow
        assert pr.error_code == errors.RequestTimedOutError.code  # the HW stays under min ISR
        pr = await produce(broker)
        assert pr.error_code == errors.NotEnoughReplicasError.code
        assert (await produce(broker, acks=1)).error_code == 0
        assert state.high_watermark == 3  # never advances with the ISR under min ISR
        # The follower comes back and catches up: the ISR expands and acks=all works again.
        leo = broker.log_manager.get_partition("t", 0).log.log_end_offset
        await fetch(broker, leo, replica_id=OTHER, epoch=0)
        for _ in range(10):
            await asyncio.sleep(0.01)
        assert state.isr == (ME, OTHER) and state.high_watermark == leo
        waiting = asyncio.ensure_future(produce(broker))
        await asyncio.sleep(0.02)
        await fetch(broker, leo + 3, replica_id=OTHER, epoch=0)
        assert (await waiting).error_code == 0
    run(broker, scenario)


def test_fencing_by_leader_epoch_and_not_leader_on_a_follower(broker) -> None:
    async def scenario() -> None:
        await lead(broker, epoch=5)
        fenced = await fetch(broker, 0, epoch=4)
        assert fenced.error_code == errors.FencedLeaderEpochError.code
        assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (ME, 5)
        assert (await fetch(broker, 0, epoch=6)).error_code == errors.UnknownLeaderEpochError.code
        assert (await fetch(broker, 0, epoch=5)).error_code == 0
        # Stale LeaderAndIsr: an older leader epoch, or the same with no newer partition epoch.
        assert await lead(broker, leader=OTHER, epoch=4) == errors.StaleControllerEpochError.code
        assert await lead(broker, leader=OTHER, epoch=5) == errors.StaleControllerEpochError.code
        with pytest.raises(errors.StaleControllerEpochError):
            await lead(broker, leader=OTHER, epoch=9, controller_epoch=0)
        assert broker.replicas.partitions[("t", 0)].leader is not None
        # A pending acks=all produce is failed when leadership moves away.
        waiting = asyncio.ensure_future(produce(broker))
        await asyncio.sleep(0.02)
        assert await lead(broker, leader=OTHER, epoch=6) == 0
        assert (await waiting).error_code == errors.NotLeaderOrFollowerError.code
        pr = await produce(broker, acks=1)
        assert pr.error_code == errors.NotLeaderOrFollowerError.code
        assert (pr.current_leader.leader_id, pr.current_leader.leader_epoch) == (OTHER, 6)
        assert (await latest(broker))[0] == errors.NotLeaderOrFollowerError.code
        consumer = await fetch(broker, 0)
        assert consumer.error_code == errors.NotLeaderOrFollowerError.code
        assert (consumer.current_leader.leader_id, consumer.current_leader.leader_epoch) == (OTHER, 6)
    run(broker, scenario)


def test_follower_fetch_gets_the_diverging_epoch_and_offset_for_leader_epoch_agrees(broker) -> None:
    async def scenario() -> None:
        await lead(broker, epoch=0)
        await produce(broker, acks=1)  # 0..2 in epoch 0
        await lead(broker, epoch=2, partition_epoch=1)  # re-elected: epoch 2 starts at 3
        await produce(broker, acks=1)  # 3..5 in epoch 2
        plog = broker.log_manager.get_partition("t", 0).log
        assert plog.leader_epoch_cache.entries == [(0, 0), (2, 3)]
        # A follower that wrote 0..4 in epoch 1 (from another leader) diverges at 3.
        pd = await fetch(broker, 5, replica_id=OTHER, epoch=2, last_fetched_epoch=1)
        assert pd.error_code == 0 and not pd.records
        assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 3)
        # Fetch v11 has no last fetched epoch: no divergence reported.
        pd = await fetch(broker, 5, replica_id=OTHER, epoch=2, version=11)
        assert pd.error_code == 0 and (pd.diverging_epoch is None or pd.diverging_epoch.epoch == -1)
        Q = OffsetForLeaderEpochRequest
        body = Q(replica_id=OTHER, topics=[Q.OffsetForLeaderTopic(topic="t", partitions=[
            Q.OffsetForLeaderPartition(partition=0, current_leader_epoch=2, leader_epoch=1)])])
        resp = await handlers.dispatch(_ctx(broker, 23, 4), body)
        part = resp.topics[0].partitions[0]
        assert (part.error_code, part.leader_epoch, part.end_offset) == (0, 0, 3)
    run(broker, scenario)


def test_transaction_markers_are_written_by_the_leader_only_in_its_epoch(broker) -> None:
    from pylog.replication.markers import TxnMarker, write_markers

    async def scenario() -> None:
        await lead(broker, epoch=2, isr=(ME,))
        marker = TxnMarker(producer_id=5, producer_epoch=0, commit=False, coordinator_epoch=0,
                           partitions=[("t", 0)])
        # ISR [leader] is under min.insync.replicas=2: an acks=-1 append, refused unwritten.
        (res,) = await write_markers(broker, [marker])
        assert res.error_code == errors.NotEnoughReplicasError.code
        plog = broker.log_manager.get_partition("t", 0).log
        assert plog.log_end_offset == 0
        await lead(broker, epoch=3, isr=(ME, OTHER))
        writing = asyncio.ensure_future(write_markers(broker, [marker]))
        await asyncio.sleep(0.05)
        assert not writing.done()  # answered once the ISR has it
        (batch,) = list(logcore.iter_batches(plog.read(0, 1 << 20).read()))
        assert batch.partition_leader_epoch == 3 and batch.is_control
        await fetch(broker, 1, replica_id=OTHER, epoch=3)
        (res,) = await asyncio.wait_for(writing, 5)
        assert res.error_code == 0
        assert broker.replicas.partitions[("t", 0)].high_watermark == 1
        await lead(broker, leader=OTHER, epoch=4)
        (res,) = await write_markers(broker, [marker])
        assert res.error_code == errors.NotLeaderOrFollowerError.code
    run(broker, scenario)


def test_an_append_whose_role_is_lost_meanwhile_is_not_acknowledged(broker, monkeypatch) -> None:
    """Found by the txn fault harness (seed 11): a controlled shutdown's StopReplica
    dropped the leader's partition state while an ABORT marker was being appended on the
    I/O thread; the acks=-1 wait was skipped for a partition without a state and the
    marker was answered as written, then truncated away when the broker came back as a
    follower. The coordinator completed the abort, the producer's next transaction's
    COMMIT covered the aborted record, and a read_committed consumer saw it. A produce
    with acks=all had the same hole. In cluster mode such an append now answers
    NOT_LEADER_OR_FOLLOWER (the coordinator, the client retry with the new leader)."""
    import threading
    from types import SimpleNamespace

    from pylog.replication.markers import TxnMarker, write_markers
    gate = threading.Event()

    async def scenario() -> None:
        await lead(broker, epoch=0, isr=(ME, OTHER))
        monkeypatch.setattr(broker, "cluster", SimpleNamespace(), raising=False)  # cluster mode
        key = ("t", 0)
        # Something already queued on the partition's I/O thread: the appends wait behind it.
        blocker = asyncio.ensure_future(broker.io.run_ordered(key, gate.wait, 5))
        marker = TxnMarker(producer_id=5, producer_epoch=0, commit=False, coordinator_epoch=0,
                           partitions=[key])
        writing = asyncio.ensure_future(write_markers(broker, [marker]))
        producing = asyncio.ensure_future(produce(broker, acks=-1))
        await asyncio.sleep(0.05)
        assert not writing.done() and not producing.done()
        await broker.replicas.stop_replicas(1, 1, [("t", 0, False)])  # controlled shutdown
        gate.set()
        await blocker
        (res,) = await asyncio.wait_for(writing, 5)
        assert res.error_code == errors.NotLeaderOrFollowerError.code
        assert (await asyncio.wait_for(producing, 5)).error_code == errors.NotLeaderOrFollowerError.code
        # And with no role at all, a marker is not even written.
        end = broker.log_manager.get_partition("t", 0).log.log_end_offset
        (res,) = await write_markers(broker, [marker])
        assert res.error_code == errors.NotLeaderOrFollowerError.code
        assert broker.log_manager.get_partition("t", 0).log.log_end_offset == end
    run(broker, scenario)


def test_high_watermark_is_checkpointed_and_restored_after_a_restart(broker, tmp_path) -> None:
    async def first() -> None:
        await lead(broker)
        assert (await produce(broker, acks=1, n=4)).error_code == 0
        await fetch(broker, 4, replica_id=OTHER, epoch=0)
        assert broker.replicas.partitions[("t", 0)].high_watermark == 4
        assert (await produce(broker, acks=1, n=2)).error_code == 0  # 4..5 not committed
    run(broker, first)  # its shutdown writes replication-offset-checkpoint
    path = tmp_path / "data" / "replication-offset-checkpoint"
    assert path.read_text() == "0\n1\nt 0 4\n"
    broker.log_manager.shutdown()

    again = Broker(broker.config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    again.log_manager.startup()
    try:
        async def second() -> None:
            await lead(again, epoch=1)
            # Before any follower fetch: consumers see what was committed before the restart.
            consumer = await fetch(again, 0)
            assert consumer.high_watermark == 4
            records = consumer.records  # a small answer is copied (io_threads.read_cached)
            data = bytes(records) if isinstance(records, (bytes, bytearray)) else records.read()
            assert list(logcore.iter_batches(data))[-1].last_offset == 3
        run(again, second)
    finally:
        again.log_manager.shutdown()
        again.io.shutdown()
        broker.log_manager.startup()  # the fixture closes it again


def test_a_topic_id_that_differs_from_the_local_log_is_refused(broker) -> None:
    import uuid

    async def scenario() -> None:
        await lead(broker)
        local = broker.log_manager.topics["t"].topic_id
        other = uuid.UUID(int=local.int ^ 1)
        info = PartitionInfo("t", 0, ME, 1, (ME, OTHER), 1, (ME, OTHER), topic_id=other)
        result = await broker.replicas.become_leader_or_follower(1, 1, -1, [info], {})
        assert result == {("t", 0): errors.InconsistentTopicIdError.code}
        assert broker.replicas.partitions[("t", 0)].leader_epoch == 0  # unchanged
        same = PartitionInfo("t", 0, ME, 1, (ME, OTHER), 1, (ME, OTHER), topic_id=local)
        assert await broker.replicas.become_leader_or_follower(1, 1, -1, [same], {}) == {("t", 0): 0}
    run(broker, scenario)


def test_a_leader_staying_leader_in_a_new_epoch_keeps_its_followers_offsets(broker) -> None:
    """Kafka's makeLeader for a leader that is not new: the followers' offsets stay known,
    so the high watermark moves at once when the ISR shrinks (here the controller drops
    the lagging THIRD in epoch 1) instead of waiting for every follower's next fetch."""
    THIRD = 9
    replicas = (ME, OTHER, THIRD)

    async def apply(epoch: int, isr: tuple[int, ...], partition_epoch: int) -> None:
        info = PartitionInfo("t", 0, ME, epoch, isr, partition_epoch, replicas)
        result = await broker.replicas.become_leader_or_follower(
            1, 1, -1, [info], {OTHER: ("127.0.0.1", 1), THIRD: ("127.0.0.1", 1)})
        assert result[("t", 0)] == 0

    async def scenario() -> None:
        await apply(0, replicas, 0)
        assert (await produce(broker, acks=1)).error_code == 0
        assert (await produce(broker, acks=1)).error_code == 0
        await fetch(broker, 6, replica_id=OTHER, epoch=0)
        await fetch(broker, 3, replica_id=THIRD, epoch=0)
        state = broker.replicas.partitions[("t", 0)]
        assert state.high_watermark == 3
        await apply(0, replicas, 1)  # same epoch, newer partition epoch: all kept
        state = broker.replicas.partitions[("t", 0)]
        assert state.high_watermark == 3
        assert state.leader is not None and state.leader.followers[OTHER].log_end_offset == 6
        await apply(1, (ME, OTHER), 2)
        state = broker.replicas.partitions[("t", 0)]
        assert state.high_watermark == 6  # no fetch needed
        assert broker.log_manager.get_partition("t", 0).log.high_watermark == 6
        consumer = await fetch(broker, 0, epoch=1)
        assert consumer.error_code == 0 and consumer.high_watermark == 6
        # THIRD (out of the ISR) is not caught up until it fetches; OTHER is.
        assert state.leader is not None
        assert state.leader.followers[THIRD].last_caught_up_time_ms is None
        assert state.leader.followers[OTHER].last_caught_up_time_ms is not None
        assert state.leader.out_of_sync_replicas() == frozenset()
    run(broker, scenario)


class _Leader:
    """Stands in for the leader's connection: answers each Fetch with the next response."""

    closed = False

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.requests: list[Any] = []

    def version_for(self, _request_type: Any) -> int:
        return 12

    async def send(self, request: Any, version: int) -> Any:
        self.requests.append(request)
        return self.responses.pop(0)

    async def close(self) -> None:
        self.closed = True


def _response(*partitions: tuple[int, bytes]) -> Any:
    from pylog.protocol.messages import FetchResponse as R
    return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        R.FetchableTopicResponse(topic="t", partitions=[
            R.PartitionData(partition_index=index, error_code=0, high_watermark=100,
                            last_stable_offset=100, log_start_offset=0,
                            aborted_transactions=None, records=records)
            for index, records in partitions])])


def _keyed(base_offset: int, n: int) -> bytes:
    b = logcore.BatchBuilder(base_offset=base_offset, partition_leader_epoch=1)
    for i in range(n):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=T0)
    return b.build()


def test_a_partition_whose_append_fails_backs_off_alone(broker, caplog) -> None:
    """Kafka's AbstractFetcherThread: a corrupt batch fails its partition only (ERROR
    with the topic-partition and offset, retried after the backoff); the other partitions
    of the same response are appended."""
    from pylog.replication.fetcher import ReplicaFetcher

    async def scenario() -> None:
        infos = [PartitionInfo("t", p, OTHER, 1, (ME, OTHER), 0, (ME, OTHER)) for p in (0, 1, 2)]
        await broker.replicas.become_leader_or_follower(1, 1, -1, infos, {OTHER: ("127.0.0.1", 1)})
        # A fetcher of our own (the manager's cannot reach 127.0.0.1:1 and stays idle).
        fetcher = ReplicaFetcher(broker.replicas, OTHER, 99)
        corrupt = bytearray(_keyed(0, 2))
        corrupt[-1] ^= 0xFF
        # Partition 1 gets a batch starting at 5 (the leader cleaned 0-4 away); partition
        # 2 an empty follower log's first batch starting below its start (see below).
        p2 = broker.log_manager.get_partition("t", 2).log
        p2.truncate_fully_and_start_at(4)
        fetcher._conn = _Leader(
            _response((0, bytes(corrupt)), (1, _keyed(5, 3)), (2, _keyed(2, 4))),
            _response((0, _keyed(0, 2))))
        keys = [("t", 0), ("t", 1), ("t", 2)]
        fetcher.keys.update(keys)
        with caplog.at_level("ERROR", logger="pylog.replication.fetcher"):
            await fetcher._fetch_once(keys)
        logs = {p: broker.log_manager.get_partition("t", p).log for p in (0, 1, 2)}
        assert logs[0].log_end_offset == 0
        assert logs[1].log_end_offset == 8
        # The leader's start (4) fell inside the batch [2, 5]: the empty log restarts at 2.
        assert (p2.log_start_offset, p2.log_end_offset) == (2, 6)
        assert list(fetcher.failed) == [("t", 0)] and "stored CRC" in fetcher.failed[("t", 0)]
        errors_logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors_logged) == 1
        assert "t-0" in errors_logged[0] and "at offset 0" in errors_logged[0]
        assert "position 0" in errors_logged[0]
        loop = asyncio.get_running_loop()
        assert fetcher._delayed[("t", 0)] > loop.time()  # backing off
        assert broker.replicas.partitions[("t", 1)].follower_hw == 8
        # After the backoff the partition is fetched again and recovers.
        await fetcher._fetch_once([("t", 0)])
        assert logs[0].log_end_offset == 2 and fetcher.failed == {}
    run(broker, scenario)


def test_a_partition_step_that_does_not_end_is_reported(broker, caplog, monkeypatch) -> None:
    """A follower's append that waits (behind the partition's I/O queue, a cleaner pause)
    is reported at WARNING while it waits, naming the partition: such a wait stalls the
    fetcher, and once went unseen for minutes."""
    import threading

    from pylog.replication import fetcher as fetcher_mod
    from pylog.replication.fetcher import ReplicaFetcher

    monkeypatch.setattr(fetcher_mod, "SLOW_STEP_WARN_S", 0.05)
    monkeypatch.setattr(fetcher_mod, "_append_inline", lambda *a: False)  # via the queue
    gate = threading.Event()
    real = fetcher_mod._append_replica

    def slow_append(plog: Any, buf: bytearray) -> Any:
        gate.wait(5)
        return real(plog, buf)
    monkeypatch.setattr(fetcher_mod, "_append_replica", slow_append)

    async def scenario() -> None:
        info = PartitionInfo("t", 0, OTHER, 1, (ME, OTHER), 0, (ME, OTHER))
        await broker.replicas.become_leader_or_follower(1, 1, -1, [info], {OTHER: ("127.0.0.1", 1)})
        fetcher = ReplicaFetcher(broker.replicas, OTHER, 99)
        fetcher._conn = _Leader(_response((0, _keyed(0, 2))))
        fetcher.keys.add(("t", 0))
        with caplog.at_level("WARNING", logger="pylog.replication.fetcher"):
            task = asyncio.ensure_future(fetcher._fetch_once([("t", 0)]))
            await asyncio.sleep(0.3)
            assert not task.done()
            gate.set()
            await task
        slow = [r.getMessage() for r in caplog.records if "has not finished" in r.getMessage()]
        assert slow and "t-0: the append has not finished after" in slow[0]
        assert broker.log_manager.get_partition("t", 0).log.log_end_offset == 2
    run(broker, scenario)


class _FakeZk:
    """The partition-state znode of t-0, with ZooKeeper's conditional-write rule; a write
    may be made to raise after it was applied (a lost connection)."""

    def __init__(self, state: Any, version: int) -> None:
        self.state, self.version = state, version
        self.notified: list[Any] = []
        self.fail_after_write = False

    def update_partition_state(self, topic: str, partition: int, state: Any,
                               expected_zk_version: int, epoch_zk_version: Any = None) -> Any:
        from pylog.cluster.zk_store import BadVersion, Updated
        if expected_zk_version != self.version:
            return BadVersion(expected_zk_version)
        self.state, self.version = state, self.version + 1
        if self.fail_after_write:
            self.fail_after_write = False
            raise ConnectionError("connection loss (the write was applied)")
        return Updated(self.version)

    def get_partition_state(self, topic: str, partition: int) -> Any:
        return self.state, self.version

    def notify_isr_change(self, tps: Any) -> None:
        self.notified.extend(tps)


def test_a_leader_behind_zookeepers_partition_epoch_reconciles_instead_of_sticking(
        broker, monkeypatch) -> None:
    """Kafka's ZooKeeper-mode leaders re-read the state when an ISR write loses: a write
    that landed with its answer lost is a success, an ISR the controller changed in this
    leader epoch is taken, and only a newer leadership means waiting for the controller.
    Before, each of these left the leader failing every ISR change (a follower kept out of
    the ISR for good)."""
    from types import SimpleNamespace

    from pylog.cluster.zk_data import PartitionState
    clock = broker.clock
    assert isinstance(clock, ManualClock)
    zk = _FakeZk(PartitionState(ME, 0, (ME, OTHER), 1), 0)

    async def settle() -> None:
        for _ in range(20):
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        await lead(broker)
        state = broker.replicas.partitions[("t", 0)]
        monkeypatch.setattr(broker, "cluster", SimpleNamespace(store=zk), raising=False)
        # 1. The shrink lands in ZooKeeper, but its answer is lost (connection loss).
        zk.fail_after_write = True
        clock.advance(11_000)
        broker.replicas.maybe_shrink_isr()
        await settle()
        assert (state.isr, state.partition_epoch) == ((ME,), 1) and zk.notified == [("t", 0)]
        # The follower catches up: the expansion is written at the reconciled epoch.
        await fetch(broker, 0, replica_id=OTHER, epoch=0)
        await settle()
        assert (state.isr, state.partition_epoch, zk.version) == ((ME, OTHER), 2, 2)
        # 2. ZooKeeper's partition epoch moved on in this leader epoch (5, by a writer whose
        # LeaderAndIsr never came): the leader's next shrink loses, then takes that state,
        # and the shrink after it goes through at the new epoch.
        zk.state, zk.version = PartitionState(ME, 0, (ME, OTHER), 2), 5
        assert (await produce(broker, acks=1)).error_code == 0  # the follower lags
        clock.advance(11_000)
        broker.replicas.maybe_shrink_isr()
        await settle()
        assert (state.isr, state.partition_epoch) == ((ME, OTHER), 5)
        broker.replicas.maybe_shrink_isr()
        await settle()
        assert (state.isr, state.partition_epoch, zk.version) == ((ME,), 6, 6)
        await fetch(broker, 3, replica_id=OTHER, epoch=0)
        await settle()
        assert (state.isr, state.partition_epoch) == ((ME, OTHER), 7)  # back, not stuck
        # 3. Another broker leads in a newer epoch: the leader waits for the controller.
        zk.state, zk.version = PartitionState(OTHER, 1, (OTHER,), 3), 9
        assert (await produce(broker, acks=1)).error_code == 0
        clock.advance(11_000)
        broker.replicas.maybe_shrink_isr()
        await settle()
        assert (state.isr, state.partition_epoch) == ((ME, OTHER), 7)
        assert state.leader is not None and state.leader.pending_isr_change is None
    run(broker, scenario)
