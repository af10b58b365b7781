"""A failed ``__consumer_offsets`` write leaves no change in memory that the log lacks.

The coordinators change their groups before appending the records (a join, a heartbeat's
new epoch and target assignment, a commit that makes a simple group, a share member's
join); when the append fails, the runtime reloads the partition from the log
(``CoordinatorRuntime.reload``). Here, with a real single-node broker in process and a
manual clock, an append of ``__consumer_offsets`` is made to fail (NOT_ENOUGH_REPLICAS, as
min.insync.replicas would) in each coordinator path; the request gets Kafka's mapped error
(COORDINATOR_NOT_AVAILABLE), and once the reload ends the groups are exactly what the log
says, and work again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.coordinator import PartitionState, runtime
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME
from pylog.protocol.apis import ApiKey
from pylog.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeShareGroupOffsetsRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ShareGroupHeartbeatRequest,
    SyncGroupRequest,
)
from pylog.replication.append import AppendError

T0 = 1_700_000_000_000
NOT_ENOUGH_REPLICAS = errors.NotEnoughReplicasError.code
COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code


class FailingAppends:
    """Makes appends to ``__consumer_offsets`` fail with ``code`` while ``code`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.code = 0
        self.failed = 0
        inline, replicated = runtime.try_append_inline, runtime.append_replicated

        def check(partition: Any) -> None:
            if self.code and partition.topic == GROUP_METADATA_TOPIC_NAME:
                self.failed += 1
                raise AppendError(self.code, "injected append failure")

        def try_inline(broker: Any, partition: Any, records: Any, *a: Any) -> Any:
            check(partition)
            return inline(broker, partition, records, *a)

        async def append(broker: Any, partition: Any, records: Any, *a: Any) -> Any:
            check(partition)
            return await replicated(broker, partition, records, *a)
        monkeypatch.setattr(runtime, "try_append_inline", try_inline)
        monkeypatch.setattr(runtime, "append_replicated", append)


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1",
                           "offsets.topic.num.partitions": "1",
                           "group.initial.rebalance.delay.ms": "0"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


async def call(b: Broker, key: int, version: int, request: Any) -> Any:
    ctx = handlers.RequestContext(b, key, version, 1, "c", "127.0.0.1:1")
    return await handlers.dispatch(ctx, request)


async def start(b: Broker) -> Any:
    await b.groups.start()
    topic = await b.log_manager.create_topic_async(b.executor, "data", 2)
    r = await call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))
    assert r.error_code == 0
    return topic


async def reloaded(b: Broker) -> None:
    """Until ``__consumer_offsets-0`` is loaded again after the failure."""
    for _ in range(2000):
        if b.groups.runtime.state(0) is PartitionState.ACTIVE:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the partition was not reloaded")


async def stop(b: Broker) -> None:
    await b.groups.shutdown()


def coordinator(b: Broker) -> Any:
    coord = b.groups.coordinator("g")
    assert coord is not None
    return coord


def test_a_failed_sync_group_write_forgets_the_generation(broker, monkeypatch) -> None:
    """JoinGroup changes memory (a member, generation 1; only the new empty group is
    written); the leader's SyncGroup writes generation 1 with its assignment. That write
    failing answers COORDINATOR_NOT_AVAILABLE and the group is what the log says: empty, at
    generation 0."""
    inject = FailingAppends(monkeypatch)

    async def go() -> None:
        await start(broker)
        try:
            J = JoinGroupRequest
            joined = await call(broker, ApiKey.JOIN_GROUP, 3, J(
                group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                protocol_type="consumer",
                protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert joined.error_code == 0 and joined.generation_id == 1
            assert "g" in coordinator(broker).group_ids()
            inject.code = NOT_ENOUGH_REPLICAS
            S = SyncGroupRequest
            synced = await call(broker, ApiKey.SYNC_GROUP, 2, S(
                group_id="g", generation_id=1, member_id=joined.member_id, assignments=[
                    S.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a")]))
            assert synced.error_code == COORDINATOR_NOT_AVAILABLE
            assert inject.failed == 1
            inject.code = 0
            await reloaded(broker)
            group = coordinator(broker)._groups["g"]
            assert (group.state.value, group.generation_id, len(group.members)) == ("Empty", 0, 0)
            # It works again: the member joins anew.
            again = await call(broker, ApiKey.JOIN_GROUP, 3, J(
                group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                protocol_type="consumer",
                protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert again.error_code == 0 and again.generation_id == 1
        finally:
            await stop(broker)
    run(go())


def test_a_failed_commit_forgets_the_simple_group_and_the_offset(broker, monkeypatch) -> None:
    inject = FailingAppends(monkeypatch)

    async def go() -> None:
        await start(broker)
        try:
            R = OffsetCommitRequest

            def commit(offset: int) -> Any:
                return R(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
                    R.OffsetCommitRequestTopic(name="data", partitions=[
                        R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])
            assert (await call(broker, ApiKey.OFFSET_COMMIT, 7, commit(5))).topics[0].partitions[0].error_code == 0
            inject.code = NOT_ENOUGH_REPLICAS
            r = await call(broker, ApiKey.OFFSET_COMMIT, 7, commit(9))
            assert r.topics[0].partitions[0].error_code == COORDINATOR_NOT_AVAILABLE
            inject.code = 0
            await reloaded(broker)
            F = OffsetFetchRequest
            fetched = await call(broker, ApiKey.OFFSET_FETCH, 7, F(group_id="g", topics=[
                F.OffsetFetchRequestTopic(name="data", partition_indexes=[0])]))
            assert fetched.topics[0].partitions[0].committed_offset == 5
            # A commit that made a simple group: the group goes with the failed write.
            inject.code = NOT_ENOUGH_REPLICAS
            r = await call(broker, ApiKey.OFFSET_COMMIT, 7, R(
                group_id="g2", generation_id_or_member_epoch=-1, member_id="", topics=[
                    R.OffsetCommitRequestTopic(name="data", partitions=[
                        R.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
            assert r.topics[0].partitions[0].error_code == COORDINATOR_NOT_AVAILABLE
            inject.code = 0
            await reloaded(broker)
            assert set(coordinator(broker).group_ids()) == {"g"}
        finally:
            await stop(broker)
    run(go())


def _cg_heartbeat(member: str, epoch: int, topics: list[str] | None) -> Any:
    return ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=member, member_epoch=epoch, rebalance_timeout_ms=10_000,
        subscribed_topic_names=topics, topic_partitions=[] if epoch == 0 else None)


def test_a_failed_heartbeat_write_keeps_the_epoch_and_target_assignment(broker, monkeypatch) -> None:
    """KIP-848: a second member's join bumps the group epoch and moves partitions in the
    target assignment; that write failing leaves the group as the log has it: one member,
    its epoch and its whole assignment."""
    inject = FailingAppends(monkeypatch)

    async def go() -> None:
        await start(broker)
        try:
            r1 = await call(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _cg_heartbeat("m1", 0, ["data"]))
            assert r1.error_code == 0
            group = coordinator(broker).consumer.groups["g"]
            epoch, target = group.group_epoch, {k: dict(v) for k, v in group.target.items()}
            assert set(target) == {"m1"}
            inject.code = NOT_ENOUGH_REPLICAS
            r2 = await call(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _cg_heartbeat("m2", 0, ["data"]))
            assert r2.error_code == COORDINATOR_NOT_AVAILABLE
            inject.code = 0
            await reloaded(broker)
            group = coordinator(broker).consumer.groups["g"]
            assert group.group_epoch == epoch
            assert set(group.members) == {"m1"}
            assert {k: dict(v) for k, v in group.target.items()} == target
            # And it goes on: m2 joins now.
            r2 = await call(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, _cg_heartbeat("m2", 0, ["data"]))
            assert r2.error_code == 0
            assert coordinator(broker).consumer.groups["g"].group_epoch == epoch + 1
        finally:
            await stop(broker)
    run(go())


def _sg_heartbeat(member: str, epoch: int, topics: list[str] | None) -> Any:
    return ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch,
                                      subscribed_topic_names=topics)


def test_a_failed_share_heartbeat_write_keeps_the_share_group(broker, monkeypatch) -> None:
    inject = FailingAppends(monkeypatch)

    async def go() -> None:
        await start(broker)
        try:
            r1 = await call(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, _sg_heartbeat("m1", 0, ["data"]))
            assert r1.error_code == 0
            group = coordinator(broker).share.groups["g"]
            epoch = group.group_epoch
            inject.code = NOT_ENOUGH_REPLICAS
            r2 = await call(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, _sg_heartbeat("m2", 0, ["data"]))
            assert r2.error_code == COORDINATOR_NOT_AVAILABLE
            # Meanwhile (reloading) the group's requests are told to retry.
            r1b = await call(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, _sg_heartbeat("m1", r1.member_epoch, None))
            assert r1b.error_code in (errors.CoordinatorLoadInProgressError.code, 0)
            inject.code = 0
            await reloaded(broker)
            group = coordinator(broker).share.groups["g"]
            assert (group.group_epoch, set(group.members)) == (epoch, {"m1"})
            r2 = await call(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, _sg_heartbeat("m2", 0, ["data"]))
            assert r2.error_code == 0
        finally:
            await stop(broker)
    run(go())


def test_without_the_flag_a_failed_write_does_not_reload(broker, monkeypatch) -> None:
    """The runtime reloads only for handlers that ask for it (the transaction coordinator
    and the share-state store do not): the failed write is reported, the partition stays."""
    inject = FailingAppends(monkeypatch)

    async def go() -> None:
        await start(broker)
        try:
            broker.groups.runtime.reload_on_failed_write = False
            inject.code = NOT_ENOUGH_REPLICAS
            R = OffsetCommitRequest
            r = await call(broker, ApiKey.OFFSET_COMMIT, 7, R(
                group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
                    R.OffsetCommitRequestTopic(name="data", partitions=[
                        R.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
            assert r.topics[0].partitions[0].error_code == COORDINATOR_NOT_AVAILABLE
            assert broker.groups.runtime.state(0) is PartitionState.ACTIVE
            assert "g" in coordinator(broker).group_ids()  # the simple group stayed
        finally:
            await stop(broker)
    run(go())


def test_a_failed_share_state_write_leaves_the_start_offset_as_it_was(broker, monkeypatch) -> None:
    """AlterShareGroupOffsets whose ``__share_group_state`` write fails: the share
    coordinator's InitializeShareGroupState gets the append's error, its partition reloads
    from the log (so what it holds is the log's start offset), the persister retries until
    ``share.coordinator.write.timeout.ms`` on the broker's (manual) clock, and the partition
    gets COORDINATOR_NOT_AVAILABLE. (The write settles inline on a single node.)"""
    failing = {"on": False}
    inline, replicated = runtime.try_append_inline, runtime.append_replicated

    def check(partition: Any) -> None:
        if failing["on"] and partition.topic == SHARE_GROUP_STATE_TOPIC_NAME:
            raise AppendError(NOT_ENOUGH_REPLICAS, "injected append failure")

    def try_inline(b: Any, partition: Any, records: Any, *a: Any) -> Any:
        check(partition)
        return inline(b, partition, records, *a)

    async def append(b: Any, partition: Any, records: Any, *a: Any) -> Any:
        check(partition)
        return await replicated(b, partition, records, *a)
    monkeypatch.setattr(runtime, "try_append_inline", try_inline)
    monkeypatch.setattr(runtime, "append_replicated", append)
    A, D = AlterShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest

    async def start_offset() -> int:
        r = await call(broker, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, D(groups=[
            D.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=[
                D.DescribeShareGroupOffsetsRequestTopic(topic_name="data", partitions=[0])])]))
        (g,) = r.groups
        assert g.error_code == 0, g.error_message
        return int(g.topics[0].partitions[0].start_offset)

    def alter(offset: int) -> Any:
        return A(group_id="g", topics=[A.AlterShareGroupOffsetsRequestTopic(topic_name="data", partitions=[
            A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)])])

    async def go() -> None:
        await broker.share.start()
        await start(broker)
        try:
            joined = await call(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, _sg_heartbeat("m1", 0, ["data"]))
            assert joined.error_code == 0
            left = await call(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, _sg_heartbeat("m1", -1, None))
            assert left.error_code == 0
            ok = await call(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter(7))
            assert (ok.error_code, ok.responses[0].partitions[0].error_code) == (0, 0)
            assert await start_offset() == 7
            failing["on"] = True
            pending = asyncio.ensure_future(call(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter(3)))
            while not pending.done():  # the retries' deadline is on the manual clock
                broker.clock.advance(250)
                await asyncio.sleep(0.01)
            bad = pending.result()
            assert bad.responses[0].partitions[0].error_code == COORDINATOR_NOT_AVAILABLE
            assert await start_offset() == 7  # memory kept what the log has
            failing["on"] = False
            ok = await call(broker, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter(3))
            assert ok.responses[0].partitions[0].error_code == 0
            assert await start_offset() == 3
        finally:
            await stop(broker)
            await broker.share.shutdown()
    run(go())
