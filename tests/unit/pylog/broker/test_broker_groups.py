"""The group handlers and their glue (``pylog.group.service``) in-process: FindCoordinator
creates ``__consumer_offsets``; joins, syncs and commits go through the coordinator and its
writes through Produce's append path; a new broker on the same directory replays them."""

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
from pylog.protocol.apis import ApiKey
from pylog.protocol.messages import (
    FindCoordinatorRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)

T0 = 1_700_000_000_000
GROUP_PARTITIONS = 3


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


async def _wait_loaded(b: Broker) -> None:
    for _ in range(500):
        if b.groups.coordinators() and not any(c.loading for c in b.groups.coordinators()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("coordinators did not load")


def _join(member_id: str = "") -> Any:
    R = JoinGroupRequest
    return R(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
             protocol_type="consumer", protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"\x00")])


def _commit(member_id: str, generation: int, topic: str, offset: int) -> Any:
    R = OffsetCommitRequest
    return R(group_id="g", generation_id_or_member_epoch=generation, member_id=member_id, topics=[
        R.OffsetCommitRequestTopic(name=topic, partitions=[
            R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata="m")]),
        R.OffsetCommitRequestTopic(name="nope", partitions=[
            R.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata="")]),
    ])


def _fetch(topic: str) -> Any:
    R = OffsetFetchRequest
    return R(groups=[R.OffsetFetchRequestGroup(group_id="g", topics=[
        R.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])])])


def test_groups_end_to_end_and_replay(tmp_path) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            # Before FindCoordinator, group requests get COORDINATOR_NOT_AVAILABLE.
            r = await _call(b, ApiKey.JOIN_GROUP, 9, _join())
            assert r.error_code == errors.CoordinatorNotAvailableError.code
            r = await _call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
            assert (r.error_code, r.node_id) == (0, 0)
            topic = b.log_manager.topics[GROUP_METADATA_TOPIC_NAME]
            assert len(topic.partitions) == GROUP_PARTITIONS
            assert topic.overrides["cleanup.policy"] == ["compact"]
            assert topic.overrides["segment.bytes"] == 1048576
            await _wait_loaded(b)
            await b.log_manager.create_topic_async(b.executor, "data", 2)

            r = await _call(b, ApiKey.JOIN_GROUP, 9, _join())
            assert r.error_code == errors.MemberIdRequiredError.code and r.member_id.startswith("client-a-")
            member = r.member_id
            r = await _call(b, ApiKey.JOIN_GROUP, 9, _join(member))
            assert (r.error_code, r.generation_id, r.leader, r.protocol_name) == (0, 1, member, "range")
            S = SyncGroupRequest
            r = await _call(b, ApiKey.SYNC_GROUP, 5, S(group_id="g", generation_id=1, member_id=member,
                                                       protocol_type="consumer", protocol_name="range",
                                                       assignments=[S.SyncGroupRequestAssignment(
                                                           member_id=member, assignment=b"A")]))
            assert (r.error_code, r.assignment) == (0, b"A")
            r = await _call(b, ApiKey.OFFSET_COMMIT, 9, _commit(member, 1, "data", 42))
            codes = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
            assert codes == {("data", 0): 0, ("nope", 0): errors.UnknownTopicOrPartitionError.code}

            # The records went through the append path into the group's partition.
            from pylog.group.config import partition_for
            plog = topic.partitions[partition_for("g", GROUP_PARTITIONS)].log
            assert plog.log_end_offset >= 3  # new group, assignment, commit

            # Clients may not produce to it.
            batch = logcore.BatchBuilder(compression="none")
            batch.append(b"v", key=b"k", timestamp_ms=T0)
            P = ProduceRequest
            r = await _call(b, ApiKey.PRODUCE, 9, P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
                name=GROUP_METADATA_TOPIC_NAME, partition_data=[
                    P.PartitionProduceData(index=0, records=bytes(batch.build()))])]))
            assert r.responses[0].partition_responses[0].error_code == errors.InvalidTopicError.code
        finally:
            await _stop(b)

        # A new broker on the same directory replays the partition.
        b = await _start(tmp_path)
        try:
            await _wait_loaded(b)
            r = await _call(b, ApiKey.OFFSET_FETCH, 9, _fetch("data"))
            (g,) = r.groups
            got = {(p.partition_index, p.committed_offset, p.metadata) for t in g.topics for p in t.partitions}
            assert (g.error_code, got) == (0, {(0, 42, "m"), (1, -1, "")})
            # The group is Stable again with its member, which may heartbeat on.
            coord = b.groups.coordinator("g")
            assert coord is not None
            group = coord.group("g")
            assert group is not None and group.generation_id == 1 and member in group.members
        finally:
            await _stop(b)

    asyncio.run(scenario())


@pytest.mark.parametrize("version", [1, 3, 4])
def test_find_coordinator_key_types(tmp_path, version: int) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            if version >= 4:
                r = await _call(b, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                    key_type=0, coordinator_keys=["a", "b"]))
                assert [(c.key, c.error_code, c.node_id) for c in r.coordinators] == [("a", 0, 0), ("b", 0, 0)]
                r = await _call(b, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                    key_type=1, coordinator_keys=["t"]))
                code, node = r.coordinators[0].error_code, r.coordinators[0].node_id
            else:
                r = await _call(b, ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key="t", key_type=1))
                code, node = r.error_code, r.node_id
            # A transactional id: this node, with __transaction_state created on the way.
            assert (code, node) == (0, 0)
            assert "__transaction_state" in b.log_manager.topics
            r = await _call(b, ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(
                key="x", key_type=7, coordinator_keys=["x"]))
            code = r.coordinators[0].error_code if version >= 4 else r.error_code
            assert code == errors.InvalidRequestError.code
        finally:
            await _stop(b)

    asyncio.run(scenario())
