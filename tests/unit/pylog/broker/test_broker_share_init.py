"""The group coordinator's share-partition state through the dispatcher (a single-node broker
in process, manual clock, the real share coordinator and persister): ShareGroupHeartbeat
initializes the state (InitializeShareGroupState at the group epoch, start offset -1) before
the partitions are assigned, a failed initialize is the heartbeat's error and is tried again,
DeleteGroups deletes the state first (a failure keeps the group, and a retry finishes), a
deleted group's share partition cannot be written back by a leader that still holds it, and
DeleteTopics drops the topic from the group's record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.group.share.state_metadata import InitEntry, StatePartitionMetadata
from pylog.group.share.state_store import StateResult
from pylog.protocol.apis import ApiKey
from pylog.protocol.messages import (
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    FindCoordinatorRequest,
    ShareGroupHeartbeatRequest,
)

T0 = 1_700_000_000_000
COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1",
                           "offsets.topic.num.partitions": "1",
                           "share.coordinator.state.topic.num.partitions": "3"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


async def call(b: Broker, key: int, version: int, request: Any) -> Any:
    ctx = handlers.RequestContext(b, key, version, 1, "c", "127.0.0.1:1")
    return await handlers.dispatch(ctx, request)


async def start(b: Broker, partitions: int = 2) -> Any:
    await b.share.start()
    await b.groups.start()
    topic = await b.log_manager.create_topic_async(b.executor, "data", partitions)
    r = await call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))
    assert r.error_code == 0
    return topic


async def stop(b: Broker) -> None:
    await b.groups.shutdown()
    await b.share.shutdown()


async def heartbeat(b: Broker, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return await call(b, ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest(
        group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=topics))


def assigned(r: Any) -> dict[Any, list[int]] | None:
    if r.assignment is None:
        return None
    return {t.topic_id: sorted(t.partitions) for t in r.assignment.topic_partitions}


def meta(b: Broker) -> Any:
    coord = b.groups.coordinator("g")
    assert coord is not None
    return coord.share.meta("g")


def test_partitions_are_initialized_then_assigned(broker) -> None:
    async def go() -> None:
        topic = await start(broker)
        tid = topic.topic_id
        try:
            r = await heartbeat(broker, "m1", 0, ["data"])
            # Answered once the state is initialized: nothing assigned in this answer.
            assert (r.error_code, r.member_epoch, assigned(r)) == (0, 1, {})
            assert meta(broker).initialized_partitions() == {tid: {0, 1}}
            for p in (0, 1):
                st = broker.share.state.saved(("g", tid, p))
                assert st is not None and (st.state_epoch, st.start_offset, st.batches) == (1, -1, [])
            # The next heartbeat bumps the epoch and assigns them.
            r = await heartbeat(broker, "m1", 1)
            assert (r.error_code, r.member_epoch, assigned(r)) == (0, 2, {tid: [0, 1]})
            # The leader (this broker) resolves start offset -1 from share.auto.offset.reset
            # (latest: the high watermark, 0) and writes it.
            sp = await broker.share.share_partition("g", topic, 0)
            assert sp is not None and sp.start_offset == 0 and sp.state_epoch == 1
            await broker.share.flushed()
            assert broker.share.state.saved(("g", tid, 0)).start_offset == 0
        finally:
            await stop(broker)
    run(go())


def test_a_failed_initialize_is_the_heartbeats_error_and_is_retried(broker, monkeypatch) -> None:
    async def go() -> None:
        topic = await start(broker)
        tid = topic.topic_id
        persister = broker.share.persister
        real = persister.initialize
        calls: list[Any] = []

        async def failing_once(key: Any, state_epoch: int, start_offset: int) -> StateResult:
            calls.append((key, state_epoch, start_offset))
            if len(calls) == 1:  # the coordinator could not be reached before the deadline
                return StateResult(errors.NotCoordinatorError.code, "injected")
            return await real(key, state_epoch, start_offset)
        monkeypatch.setattr(persister, "initialize", failing_once)
        try:
            r = await heartbeat(broker, "m1", 0, ["data"])
            assert r.error_code == COORDINATOR_NOT_AVAILABLE and r.member_id is None
            assert meta(broker).is_empty()  # out of initializing: the next heartbeat retries
            # The member did join (its records were written); its retry of the join heartbeat
            # initializes both partitions again.
            r = await heartbeat(broker, "m1", 0, ["data"])
            assert r.error_code == 0
            assert sorted(k[2] for k, _e, _s in calls) == [0, 0, 1, 1]  # both, twice
            assert all(s == -1 for _k, _e, s in calls)
            assert meta(broker).initialized_partitions() == {tid: {0, 1}}
            r = await heartbeat(broker, "m1", r.member_epoch)
            assert assigned(r) == {tid: [0, 1]}
        finally:
            await stop(broker)
    run(go())


def test_delete_groups_deletes_the_state_and_fences_a_leader_that_holds_it(broker, monkeypatch) -> None:
    async def go() -> None:
        topic = await start(broker)
        tid = topic.topic_id
        try:
            r = await heartbeat(broker, "m1", 0, ["data"])
            r = await heartbeat(broker, "m1", r.member_epoch)
            assert assigned(r) == {tid: [0, 1]}
            sp = await broker.share.share_partition("g", topic, 0)
            assert sp is not None
            await broker.share.flushed()
            assert (await heartbeat(broker, "m1", -1)).error_code == 0
            # A leader elsewhere still holding share partition 0 (what this broker's
            # ShareService holds, kept out of the delete here by not forgetting it).
            held = broker.share.partitions[("g", tid, 0)]
            monkeypatch.setattr(broker.share, "forget", lambda key: None)
            monkeypatch.setattr(broker.share, "on_group_deleted", lambda gid: None)

            # The first DeleteShareGroupState fails: the group stays, its topic deleting.
            persister = broker.share.persister
            real = persister.delete_now
            failures = [errors.CoordinatorLoadInProgressError.code]

            async def delete_now(key: Any) -> StateResult:
                if failures and key[2] == 1:
                    return StateResult(failures.pop(), "injected")
                return await real(key)
            monkeypatch.setattr(persister, "delete_now", delete_now)
            D = DeleteGroupsRequest
            d = await call(broker, ApiKey.DELETE_GROUPS, 2, D(groups_names=["g"]))
            assert d.results[0].error_code == COORDINATOR_NOT_AVAILABLE
            coord = broker.groups.coordinator("g")
            assert "g" in coord.share.groups and dict(meta(broker).deleting) == {tid: "data"}
            d = await call(broker, ApiKey.DELETE_GROUPS, 2, D(groups_names=["g"]))
            assert d.results[0].error_code == 0
            assert "g" not in coord.share.groups and "g" not in coord.share.state_metadata
            assert broker.share.state.saved(("g", tid, 0)) is None
            assert broker.share.state.saved(("g", tid, 1)) is None

            # The stale share partition changes (a lock expires, a new acquisition...): its
            # write is refused, it is dropped, and nothing is written back.
            held.start_offset += 0
            broker.share.changed(("g", tid, 0), held)
            failed = await broker.share.flushed()
            assert failed == {("g", tid, 0): errors.InvalidRequestError.code}
            assert ("g", tid, 0) not in broker.share.partitions
            assert broker.share.state.saved(("g", tid, 0)) is None
        finally:
            await stop(broker)
    run(go())


def test_delete_topics_drops_the_topic_from_the_record(broker) -> None:
    async def go() -> None:
        topic = await start(broker)
        other = await broker.log_manager.create_topic_async(broker.executor, "other", 1)
        try:
            r = await heartbeat(broker, "m1", 0, ["data", "other"])
            assert set(meta(broker).initialized) == {topic.topic_id, other.topic_id}
            DT = DeleteTopicsRequest
            d = await call(broker, ApiKey.DELETE_TOPICS, 6, DT(topics=[DT.DeleteTopicState(name="other")],
                                                                timeout_ms=1000))
            assert d.responses[0].error_code == 0
            assert set(meta(broker).initialized) == {topic.topic_id}
            for _ in range(200):  # its state is deleted in the background
                if broker.share.state.saved(("g", other.topic_id, 0)) is None:
                    break
                await asyncio.sleep(0.01)
            assert broker.share.state.saved(("g", other.topic_id, 0)) is None
            r = await heartbeat(broker, "m1", r.member_epoch)
            assert assigned(r) == {topic.topic_id: [0, 1]}
        finally:
            await stop(broker)
    run(go())


def test_state_written_before_the_record_existed_is_kept(broker) -> None:
    """A share group whose records were written by a pylog that did not keep
    ShareGroupStatePartitionMetadata (its share-partition leaders wrote the state): at its
    first heartbeat the coordinator finds state with a start offset and records the
    partition as initialized instead of resetting it; a partition without state is
    initialized."""
    async def go() -> None:
        topic = await start(broker)
        tid = topic.topic_id
        persister = broker.share.persister
        try:
            # What the old leader left: share partition 0 at start offset 7 (state epoch 0).
            assert (await persister.initialize(("g", tid, 0), 0, 7)).error_code == 0
            r = await heartbeat(broker, "m1", 0, ["data"])
            assert r.error_code == 0
            assert meta(broker).initialized_partitions() == {tid: {0, 1}}
            st0 = broker.share.state.saved(("g", tid, 0))
            st1 = broker.share.state.saved(("g", tid, 1))
            assert (st0.state_epoch, st0.start_offset) == (0, 7)  # kept
            assert (st1.state_epoch, st1.start_offset) == (1, -1)  # initialized
            # A group that has a record adopts nothing: a partition it does not know as
            # initialized (here 1, with state) is initialized, its state reset, as Kafka does.
            assert (await persister.initialize(("g", tid, 1), 1, 9)).error_code == 0
            coord = broker.groups.coordinator("g")
            coord.share.state_metadata["g"] = StatePartitionMetadata(
                initialized={tid: InitEntry("data", frozenset({0}), 0)})
            r = await heartbeat(broker, "m1", r.member_epoch)
            assert r.error_code == 0
            assert broker.share.state.saved(("g", tid, 1)).start_offset == -1
        finally:
            await stop(broker)
    run(go())
