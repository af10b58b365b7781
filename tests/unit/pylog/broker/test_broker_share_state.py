"""The share coordinator's RPCs (KIP-932; Initialize/Read/Write/Delete ShareGroupState and
ReadShareGroupStateSummary, v0) through the dispatcher on a single node: state round trips,
leader- and state-epoch fencing, bad input, NOT_COORDINATOR, CLUSTER_ACTION, FindCoordinator
key type 2, and the state surviving a restart of the broker (replayed from the log)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.log.topics import topic_id_str
from pylog.protocol.messages import (
    DeleteShareGroupStateRequest,
    FindCoordinatorRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from pylog.security.acl import AclOperation as Op
from pylog.security.acl import ResourceType as RT
from pylog.security.authz.authorizer import AclAuthorizer, AclSnapshot
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)

T0 = 1_700_000_000_000
TID = uuid.UUID(int=0x1234)
W, R, Init, D, S = (WriteShareGroupStateRequest, ReadShareGroupStateRequest, InitializeShareGroupStateRequest,
                 DeleteShareGroupStateRequest, ReadShareGroupStateSummaryRequest)
FENCED_LEADER = errors.FencedLeaderEpochError.code
FENCED_STATE = errors.FencedStateEpochError.code
INVALID = errors.InvalidRequestError.code


def _broker(data: Any) -> Broker:
    config = BrokerConfig({"log.dirs": str(data), "num.partitions": "1",
                           "share.coordinator.state.topic.num.partitions": "3"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    return b


@pytest.fixture
def broker(tmp_path):
    b = _broker(tmp_path / "data")
    yield b
    b.log_manager.shutdown()
    b.executor.shutdown()


async def call(broker: Broker, api_key: int, body: Any, version: int = 0, principal: str = "User:ANONYMOUS") -> Any:
    ctx = handlers.RequestContext(broker, api_key, version, 1, "test", "127.0.0.1:1")
    ctx.principal = principal
    return await asyncio.wait_for(handlers.dispatch(ctx, body), 10)


def write(part: int, state_epoch: int, leader_epoch: int, start: int, batches: list[tuple[int, int, int, int]],
          group: str = "g", topic_id: uuid.UUID = TID) -> Any:
    return W(group_id=group, topics=[W.WriteStateData(topic_id=topic_id, partitions=[W.PartitionData(
        partition=part, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
        state_batches=[W.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                       for f, la, s, c in batches])])])


def init(part: int, state_epoch: int = 0, start: int = -1, group: str = "g") -> Any:
    """InitializeShareGroupState: what the group coordinator sends before any read or write."""
    return Init(group_id=group, topics=[Init.InitializeStateData(topic_id=TID, partitions=[
        Init.PartitionData(partition=part, state_epoch=state_epoch, start_offset=start)])])


def read(part: int, leader_epoch: int, group: str = "g") -> Any:
    return R(group_id=group, topics=[R.ReadStateData(topic_id=TID, partitions=[
        R.PartitionData(partition=part, leader_epoch=leader_epoch)])])


def one(resp: Any) -> Any:
    (t,) = resp.results
    (p,) = t.partitions
    return p


def batches(p: Any) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]


async def _start(broker: Broker) -> None:
    await broker.share.start()
    await broker.share.state.ensure_topic()


def test_write_read_and_epoch_fencing(broker: Broker) -> None:
    async def go() -> None:
        await _start(broker)
        # Never initialized: reads and writes are refused (Kafka 4.1), nothing is stored.
        p = one(await call(broker, 84, read(0, 1)))
        assert (p.error_code, p.error_message) == (INVALID, "Read operation on uninitialized share partition not allowed.")
        p = one(await call(broker, 85, write(0, 0, 3, 10, [(10, 14, 0, 1)])))
        assert (p.error_code, p.error_message) == (INVALID, "Write operation on uninitialized share partition not allowed.")
        # Initialized with start offset -1 (the leader resolves share.auto.offset.reset).
        assert one(await call(broker, 83, init(0))).error_code == 0
        p = one(await call(broker, 84, read(0, 1)))
        assert (p.error_code, p.start_offset, p.state_epoch, batches(p)) == (0, -1, 0, [])
        p = one(await call(broker, 85, write(0, 0, 3, 10, [(10, 14, 0, 1), (15, 19, 2, 1)])))
        assert p.error_code == 0, p
        p = one(await call(broker, 84, read(0, 3)))
        assert (p.error_code, p.start_offset, p.state_epoch) == (0, 10, 0)
        assert batches(p) == [(10, 14, 0, 1), (15, 19, 2, 1)]
        # A write's batches replace those offsets; the start offset moves (-1 keeps it).
        assert one(await call(broker, 85, write(0, 0, 3, -1, [(12, 12, 4, 2)]))).error_code == 0
        assert one(await call(broker, 85, write(0, 0, 3, 11, []))).error_code == 0
        p = one(await call(broker, 84, read(0, 3)))
        assert p.start_offset == 11
        assert batches(p) == [(11, 11, 0, 1), (12, 12, 4, 2), (13, 14, 0, 1), (15, 19, 2, 1)]
        # An older leader epoch is fenced, for writes and reads; nothing changes.
        p = one(await call(broker, 85, write(0, 0, 2, 30, [])))
        assert p.error_code == FENCED_LEADER and p.error_message
        assert one(await call(broker, 84, read(0, 2))).error_code == FENCED_LEADER
        # A newer leader's read stores its epoch: the old leader is fenced from then on.
        assert one(await call(broker, 84, read(0, 4))).error_code == 0
        assert one(await call(broker, 85, write(0, 0, 3, 30, []))).error_code == FENCED_LEADER
        assert one(await call(broker, 84, read(0, 4))).start_offset == 11
        # State epochs: Initialize may not lower it and starts afresh; older writes are fenced.
        assert one(await call(broker, 83, init(0, 1, 7))).error_code == 0
        assert one(await call(broker, 83, init(0, 0, 5))).error_code == FENCED_STATE
        p = one(await call(broker, 84, read(0, 4)))
        assert (p.state_epoch, p.start_offset) == (1, 7)
        # The same state epoch again is taken (a group coordinator retrying its initialize).
        assert one(await call(broker, 83, init(0, 1, 5))).error_code == 0
        p = one(await call(broker, 84, read(0, 4)))
        assert (p.state_epoch, p.start_offset, batches(p)) == (1, 5, [])
        assert one(await call(broker, 85, write(0, 0, 4, 9, []))).error_code == FENCED_STATE
        assert one(await call(broker, 85, write(0, 1, 4, 9, []))).error_code == 0
        # The summary: state epoch and start offset; an old leader epoch is fenced.
        s = one(await call(broker, 87, S(group_id="g", topics=[S.ReadStateSummaryData(
            topic_id=TID, partitions=[S.PartitionData(partition=0, leader_epoch=4)])])))
        assert (s.error_code, s.state_epoch, s.start_offset) == (0, 1, 9)
        s = one(await call(broker, 87, S(group_id="g", topics=[S.ReadStateSummaryData(
            topic_id=TID, partitions=[S.PartitionData(partition=0, leader_epoch=1)])])))
        assert s.error_code == FENCED_LEADER
        # Delete: the share partition is uninitialized again: a leader that still holds it
        # cannot write it back, nor read it; the summary reads start offset -1.
        d = one(await call(broker, 86, D(group_id="g", topics=[D.DeleteStateData(
            topic_id=TID, partitions=[D.PartitionData(partition=0)])])))
        assert d.error_code == 0
        assert one(await call(broker, 85, write(0, 1, 4, 12, [(12, 12, 2, 1)]))).error_code == INVALID
        assert one(await call(broker, 84, read(0, 4))).error_code == INVALID
        s = one(await call(broker, 87, S(group_id="g", topics=[S.ReadStateSummaryData(
            topic_id=TID, partitions=[S.PartitionData(partition=0, leader_epoch=-1)])])))
        assert (s.error_code, s.state_epoch, s.start_offset) == (0, 0, -1)
        assert broker.share.state.saved(("g", TID, 0)) is None
        await broker.share.shutdown()

    asyncio.run(go())


@pytest.mark.parametrize("body", [
    write(0, 0, 0, 0, [], group=""),
    write(0, 0, 0, 0, [], topic_id=uuid.UUID(int=0)),
    write(-1, 0, 0, 0, []),
    write(0, 0, 0, -2, []),
    write(0, 0, 0, 0, [(5, 4, 0, 1)]),
    write(0, 0, 0, 0, [(5, 6, 1, 1)]),   # 1 (acquired) is not a durable state
    write(0, 0, 0, 0, [(5, 6, 0, -1)]),
], ids=["no-group", "zero-topic-id", "negative-partition", "start-below--1", "first-after-last",
        "delivery-state-1", "negative-count"])
def test_bad_input_is_invalid_request(broker: Broker, body: Any) -> None:
    async def go() -> None:
        await _start(broker)
        if body.group_id and body.topics[0].topic_id.int:
            assert one(await call(broker, 83, init(0))).error_code == 0
        p = one(await call(broker, 85, body))
        assert p.error_code == INVALID and p.error_message
        # Nothing was written for the partition.
        if body.group_id and body.topics[0].partitions[0].partition >= 0 and body.topics[0].topic_id.int:
            assert one(await call(broker, 84, read(0, 0))).start_offset == -1
        await broker.share.shutdown()

    asyncio.run(go())


def test_not_coordinator_when_the_partition_is_not_hosted(broker: Broker) -> None:
    async def go() -> None:
        await _start(broker)
        broker.share.state.on_topic_deleted()  # every state partition resigns
        p = one(await call(broker, 84, read(0, 0)))
        assert p.error_code == errors.NotCoordinatorError.code
        assert one(await call(broker, 85, write(0, 0, 0, 1, []))).error_code == errors.NotCoordinatorError.code
        await broker.share.shutdown()

    asyncio.run(go())


def test_cluster_action_is_required(broker: Broker) -> None:
    async def go() -> None:
        await _start(broker)
        a = AclAuthorizer((), False)
        a.install(AclSnapshot([AclBinding(ResourcePattern(RT.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                                          AccessControlEntry("User:broker", "*", Op.CLUSTER_ACTION,
                                                             AclPermissionType.ALLOW))]))
        broker.authorizer = a
        code = errors.ClusterAuthorizationFailedError.code
        assert one(await call(broker, 83, init(0), principal="User:alice")).error_code == code
        assert one(await call(broker, 83, init(0), principal="User:broker")).error_code == 0
        assert one(await call(broker, 85, write(0, 0, 0, 1, []), principal="User:alice")).error_code == code
        assert one(await call(broker, 84, read(0, 0), principal="User:alice")).error_code == code
        assert one(await call(broker, 84, read(0, 0), principal="User:alice")).start_offset == -1
        assert one(await call(broker, 85, write(0, 0, 0, 1, []), principal="User:broker")).error_code == 0
        # FindCoordinator of a share partition: brokers only, too.
        key = f"g:{topic_id_str(TID)}:0"
        f = await call(broker, 10, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), version=4,
                       principal="User:alice")
        assert f.coordinators[0].error_code == code
        f = await call(broker, 10, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), version=4,
                       principal="User:broker")
        assert f.coordinators[0].error_code == 0 and f.coordinators[0].node_id == broker.node_id
        await broker.share.shutdown()

    asyncio.run(go())


@pytest.mark.parametrize("key", ["g", "g:0", f"g:{topic_id_str(TID)}:x", f"g:{topic_id_str(TID)}:-1",
                                 "g:c2hvcnQ:0", f":{topic_id_str(TID)}:0"])
def test_find_coordinator_refuses_malformed_share_keys(broker: Broker, key: str) -> None:
    async def go() -> None:
        await _start(broker)
        f = await call(broker, 10, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), version=4)
        assert f.coordinators[0].error_code == INVALID, f
        await broker.share.shutdown()

    asyncio.run(go())


def test_the_state_survives_a_restart(tmp_path) -> None:
    data = tmp_path / "data"

    async def first() -> None:
        b = _broker(data)
        try:
            await _start(b)
            for part in range(4):  # several state-topic partitions
                assert one(await call(b, 83, init(part))).error_code == 0
                assert one(await call(b, 85, write(part, 0, 2, 100 + part, [(200, 201, 2, 3)]))).error_code == 0
            assert one(await call(b, 85, write(1, 0, 2, -1, [(201, 201, 4, 5)]))).error_code == 0
            assert one(await call(b, 86, D(group_id="g", topics=[D.DeleteStateData(
                topic_id=TID, partitions=[D.PartitionData(partition=3)])]))).error_code == 0
            await b.share.shutdown()
        finally:
            b.log_manager.shutdown()
            b.executor.shutdown()

    async def second() -> None:
        b = _broker(data)
        try:
            await b.share.start()  # loads every partition of the existing topic
            got = {part: one(await call(b, 84, read(part, 2))) for part in range(4)}
            assert {k: (p.error_code, p.start_offset, batches(p)) for k, p in got.items()} == {
                0: (0, 100, [(200, 201, 2, 3)]),
                1: (0, 101, [(200, 200, 2, 3), (201, 201, 4, 5)]),
                2: (0, 102, [(200, 201, 2, 3)]),
                3: (INVALID, -1, []),
            }
            # The leader epoch was kept: an older one is fenced after the restart too.
            assert one(await call(b, 84, read(0, 1))).error_code == FENCED_LEADER
            await b.share.shutdown()
        finally:
            b.log_manager.shutdown()
            b.executor.shutdown()

    asyncio.run(first())
    asyncio.run(second())
