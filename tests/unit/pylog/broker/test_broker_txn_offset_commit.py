"""TxnOffsetCommit (API 28) in-process: the handler's checks, the KIP-890 verification hook,
and (with the partition side's transactional appends and markers, issue 10 T1) the write as
one transactional batch, RequireStable, the markers and a reload."""

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
from pylog.group.config import partition_for
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import (
    FindCoordinatorRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)

T0 = 1_700_000_000_000
GROUP_PARTITIONS = 3
PID, EPOCH = 1000, 0



def _config(tmp_path: Any) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2",
                         "offsets.topic.num.partitions": str(GROUP_PARTITIONS),
                         "group.initial.rebalance.delay.ms": "0", "offsets.topic.segment.bytes": "1048576"})


async def _start(tmp_path: Any) -> Broker:
    b = Broker(_config(tmp_path), clock=ManualClock(time_ms=T0), allow_pure_python=True)
    await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.startup)
    await b.groups.start()
    return b


async def _stop(b: Broker) -> None:
    await b.groups.shutdown()
    await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.shutdown)
    b.io.shutdown()


async def _call(b: Broker, key: int, version: int, request: Any) -> Any:
    ctx = handlers.RequestContext(b, key, version, 1, "client-a", "127.0.0.1:5555")
    return await handlers.dispatch(ctx, request)


async def _ready(b: Broker) -> None:
    r = await _call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
    assert r.error_code == 0
    for _ in range(500):
        if b.groups.coordinators() and not any(c.loading for c in b.groups.coordinators()):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("coordinators did not load")
    if "data" not in b.log_manager.topics:
        await b.log_manager.create_topic_async(b.executor, "data", 2)


def _txn_commit(group: str = "g", offsets: dict[int, int] | None = None, topic: str = "data",
                generation: int = -1, member: str = "", pid: int = PID, epoch: int = EPOCH) -> Any:
    R = TxnOffsetCommitRequest
    return R(transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=epoch,
             generation_id=generation, member_id=member, topics=[
                 R.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                     R.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                       committed_leader_epoch=-1, committed_metadata="m")
                     for p, o in (offsets or {0: 5}).items()])])


async def _verified(*args: Any) -> int:
    """A transaction coordinator that confirms every partition (KIP-890 verification)."""
    return 0


def _codes(r: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


async def _fetch(b: Broker, stable: bool) -> dict[int, tuple[int, int]]:
    R = OffsetFetchRequest
    r = await _call(b, ApiKey.OFFSET_FETCH, 9, R(require_stable=stable, groups=[R.OffsetFetchRequestGroup(
        group_id="g", topics=[R.OffsetFetchRequestTopics(name="data", partition_indexes=[0, 1])])]))
    (g,) = r.groups
    assert g.error_code == 0
    return {p.partition_index: (p.committed_offset, p.error_code) for t in g.topics for p in t.partitions}


def test_txn_offset_commit_is_advertised() -> None:
    assert ADVERTISED[ApiKey.TXN_OFFSET_COMMIT] == (0, 4)
    assert handlers.SUPPORTED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT] == (0, 4)


def test_handler_checks_before_any_write(tmp_path) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            await b.log_manager.create_topic_async(b.executor, "data", 2)
            # No __consumer_offsets yet.
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit())
            assert _codes(r) == {("data", 0): errors.CoordinatorNotAvailableError.code}
            await _ready(b)
            b.txn_verify = _verified  # type: ignore[method-assign,assignment,unused-ignore]
            # Unknown topics and partitions are answered by the handler, as Kafka's does.
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit(offsets={0: 1, 7: 1}, topic="nope"))
            assert set(_codes(r).values()) == {errors.UnknownTopicOrPartitionError.code}
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit(group=""))
            assert _codes(r) == {("data", 0): errors.InvalidGroupIdError.code}
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit(generation=4, member="m"))
            assert _codes(r) == {("data", 0): errors.IllegalGenerationError.code}
            # While the partition loads: v2+ COORDINATOR_LOAD_IN_PROGRESS, v0-1 get
            # COORDINATOR_NOT_AVAILABLE (KAFKA-7296).
            coord = b.groups.coordinator("g")
            assert coord is not None
            coord.begin_load()
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 2, _txn_commit())
            assert _codes(r) == {("data", 0): errors.CoordinatorLoadInProgressError.code}
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 1, _txn_commit())
            assert _codes(r) == {("data", 0): errors.CoordinatorNotAvailableError.code}
            coord.complete_load()
        finally:
            await _stop(b)

    asyncio.run(scenario())


@pytest.mark.parametrize(("answer", "version", "expected"), [
    (errors.ProducerFencedError.code, 4, errors.InvalidProducerEpochError.code),
    (errors.TransactionAbortableError.code, 3, errors.InvalidTxnStateError.code),
    (errors.TransactionAbortableError.code, 4, errors.TransactionAbortableError.code),
    (errors.NetworkError.code, 4, errors.CoordinatorLoadInProgressError.code),
    (errors.InvalidProducerIdMappingError.code, 4, errors.InvalidProducerIdMappingError.code),
])
def test_verification_hook_errors_reach_the_client_as_kafka_maps_them(tmp_path, answer: int, version: int,
                                                                         expected: int) -> None:
    calls: list[tuple[Any, ...]] = []

    async def verify(*args: Any) -> int:
        calls.append(args)
        return answer

    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            await _ready(b)
            b.txn_verify = verify  # type: ignore[method-assign,assignment,unused-ignore]
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, version, _txn_commit(offsets={0: 1, 1: 2}))
            assert set(_codes(r).values()) == {expected}
            assert calls == [("tx", PID, EPOCH, GROUP_METADATA_TOPIC_NAME, partition_for("g", GROUP_PARTITIONS))]
            assert await _fetch(b, True) == {0: (-1, 0), 1: (-1, 0)}
        finally:
            await _stop(b)

    asyncio.run(scenario())


async def _marker(b: Broker, commit: bool, pid: int = PID, epoch: int = EPOCH) -> None:
    """A COMMIT/ABORT marker into the group's partition, the way WriteTxnMarkers writes it."""
    from pylog.replication.markers import (
        TxnMarker,  # type: ignore[import-not-found,unused-ignore]
        write_markers,  # type: ignore[import-not-found,unused-ignore]
    )

    index = partition_for("g", GROUP_PARTITIONS)
    results = await write_markers(b, [TxnMarker(pid, epoch, commit, 0, [(GROUP_METADATA_TOPIC_NAME, index)])])
    assert all(getattr(r, "error_code", 0) == 0 for r in results), results


def test_pending_until_the_marker_and_after_a_reload(tmp_path) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        verified: list[Any] = []

        async def verify(*args: Any) -> int:
            verified.append(args)
            return 0
        try:
            await _ready(b)
            b.txn_verify = verify  # type: ignore[method-assign,assignment,unused-ignore]
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 4, _txn_commit(offsets={0: 5, 1: 6}))
            assert set(_codes(r).values()) == {0}
            # A second commit in the same transaction is not verified again (the producer has
            # an open transaction in that partition).
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 4, _txn_commit(offsets={1: 7}))
            assert set(_codes(r).values()) == {0} and len(verified) == 1
            # One transactional batch per commit, with the producer's id and epoch, base sequence -1.
            topic = b.log_manager.topics[GROUP_METADATA_TOPIC_NAME]
            plog = topic.partitions[partition_for("g", GROUP_PARTITIONS)].log
            region = plog.read(0, 1 << 20, min_one_batch=True)
            txn = [x for x in logcore.iter_batches(region.read()) if x.is_transactional]
            assert [(x.producer_id, x.producer_epoch, x.base_sequence, x.records_count) for x in txn] == [
                (PID, EPOCH, -1, 2), (PID, EPOCH, -1, 1)]
            assert await _fetch(b, False) == {0: (-1, 0), 1: (-1, 0)}
            unstable = errors.UnstableOffsetCommitError.code
            assert await _fetch(b, True) == {0: (-1, unstable), 1: (-1, unstable)}
            await _marker(b, commit=True)
            assert await _fetch(b, True) == {0: (5, 0), 1: (7, 0)}
            # A second transaction stays open across a restart.
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 4, _txn_commit(offsets={0: 50}, epoch=EPOCH))
            assert set(_codes(r).values()) == {0}
        finally:
            await _stop(b)

        b = await _start(tmp_path)
        try:
            await _ready(b)
            assert await _fetch(b, True) == {0: (-1, errors.UnstableOffsetCommitError.code), 1: (7, 0)}
            await _marker(b, commit=False)
            assert await _fetch(b, True) == {0: (5, 0), 1: (7, 0)}
        finally:
            await _stop(b)

    asyncio.run(scenario())


@pytest.mark.parametrize("marker_read", [True, False])
def test_a_marker_appended_while_the_partition_loads(tmp_path, marker_read: bool) -> None:
    """The partition side does not wait for a load: a marker written meanwhile is applied
    after the records read before it, once (whether or not the load's read saw it)."""
    from pylog.coordinator import read_all

    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            await _ready(b)
            b.txn_verify = _verified  # type: ignore[method-assign,assignment,unused-ignore]
            r = await _call(b, ApiKey.TXN_OFFSET_COMMIT, 4, _txn_commit(offsets={0: 5}))
            assert set(_codes(r).values()) == {0}
            index = partition_for("g", GROUP_PARTITIONS)
            partition = b.log_manager.topics[GROUP_METADATA_TOPIC_NAME].partitions[index]
            before = read_all(partition.log)  # a load that read before the marker
            shard = b.groups.shard_of(b.groups.coordinator("g"))  # type: ignore[arg-type]
            b.groups.begin_load(index, None)
            await _marker(b, commit=True)
            assert len(shard.early_markers) == 1  # held until the load has replayed the log
            entries, read_end = read_all(partition.log) if marker_read else before
            b.groups.replay(index, entries)
            b.groups.complete_load(index, read_end)
            assert not shard.coordinator.loading and not shard.early_markers
            assert await _fetch(b, True) == {0: (5, 0), 1: (-1, 0)}
        finally:
            await _stop(b)

    asyncio.run(scenario())
