"""The group coordinators following ``__consumer_offsets`` leadership in cluster mode, in-process
and without sockets: a broker whose ``cluster`` is a small stand-in (topic configs and the
metadata cache are all the group paths read from it), LeaderAndIsr / StopReplica applied
through the replica manager, group requests through the handlers' dispatcher, the follower
played by Fetch requests with its replica id (as tests/unit/pylog/replication does).

Kafka's ``GroupCoordinator.onElection`` / ``onResignation``: nothing hosted before
LeaderAndIsr, a partition led elsewhere answers NOT_COORDINATOR, leading loads from the local
log, losing the lead answers parked requests NOT_COORDINATOR and drops the groups, leading
again reloads; coordinator writes wait for the ISR (``offsets.commit.timeout.ms``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pylog import errors
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.coordinator import runtime as coordinator_runtime
from pylog.group.service import offsets_topic_configs
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from pylog.protocol.messages import (
    FetchRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from pylog.replication import PartitionInfo

ME, OTHER = 0, 7
OFFSETS = GROUP_METADATA_TOPIC_NAME
GROUP = "g1"


class _Metadata:
    """The metadata cache as the group handlers read it (topic -> partitions)."""

    def __init__(self) -> None:
        self.partitions: dict[str, dict[int, Any]] = {"t": {0: None, 1: None}}


class _Cluster:
    """What the replica manager and the group paths use of ``broker.cluster``."""

    def __init__(self, broker: Broker) -> None:
        self.metadata = _Metadata()
        self._broker = broker

    async def topic_config(self, topic: str) -> dict[str, Any]:
        return offsets_topic_configs(self._broker.config) if topic == OFFSETS else {}


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "auto.create.topics.enable": "false",
                           "offsets.topic.num.partitions": "1", "offsets.commit.timeout.ms": "400",
                           "group.initial.rebalance.delay.ms": "60000",
                           "replica.lag.time.max.ms": "60000", "node.id": str(ME)})
    b = Broker(config, allow_pure_python=True)
    b.cluster = _Cluster(b)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def run(broker: Broker, scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        try:
            return await asyncio.wait_for(scenario(), 30)
        finally:
            await broker.replicas.shutdown()
            await broker.groups.shutdown()
    return asyncio.run(go())


def _ctx(broker: Broker, key: int, version: int) -> handlers.RequestContext:
    return handlers.RequestContext(broker, key, version, 1, "test", "127.0.0.1:1")


async def lead(broker: Broker, leader: int, epoch: int, isr: tuple[int, ...] = (ME, OTHER),
               loaded: bool = True) -> int:
    info = PartitionInfo(OFFSETS, 0, leader, epoch, isr, epoch, (ME, OTHER))
    result = await broker.replicas.become_leader_or_follower(
        1, 1, -1, [info], {OTHER: ("127.0.0.1", 1)})
    await settle(broker, loaded)
    return result[(OFFSETS, 0)]


async def settle(broker: Broker, loaded: bool = True) -> None:
    """Let the hooks' tasks run (a resign is scheduled on the loop); with ``loaded``, until
    no hosted partition is loading any more (its log is read on an I/O thread)."""
    for _ in range(5):
        await asyncio.sleep(0.01)
    deadline = asyncio.get_running_loop().time() + 15
    while loaded and any(c.loading for c in broker.groups.coordinators()):
        assert asyncio.get_running_loop().time() < deadline, "the partition did not load"
        await asyncio.sleep(0.01)


async def commit(broker: Broker, offset: int, partition: int = 0) -> int:
    R = OffsetCommitRequest
    body = R(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
             retention_time_ms=-1, topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
                 R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                                committed_leader_epoch=-1, committed_metadata="")])])
    resp = await handlers.dispatch(_ctx(broker, 8, 8), body)
    return resp.topics[0].partitions[0].error_code


async def fetch_offset(broker: Broker) -> tuple[int, int]:
    """(group error, committed offset of t-0)."""
    R = OffsetFetchRequest
    body = R(group_id=GROUP, topics=[R.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
             require_stable=False)
    resp = await handlers.dispatch(_ctx(broker, 9, 7), body)
    part = resp.topics[0].partitions[0]
    return resp.error_code or part.error_code, part.committed_offset


async def join(broker: Broker) -> Any:
    R = JoinGroupRequest
    body = R(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
             protocol_type="consumer", protocols=[R.JoinGroupRequestProtocol(name="range",
                                                                             metadata=b"")])
    return await handlers.dispatch(_ctx(broker, 11, 3), body)


async def follower_fetch(broker: Broker, offset: int, epoch: int) -> Any:
    F = FetchRequest
    body = F(replica_id=OTHER, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=OFFSETS, partitions=[
                 F.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                  last_fetched_epoch=-1, log_start_offset=0,
                                  partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")
    resp = await handlers.dispatch(_ctx(broker, 1, 12), body)
    return resp.responses[0].partitions[0]


def leo(broker: Broker) -> int:
    return int(broker.log_manager.get_partition(OFFSETS, 0).log.log_end_offset)


def test_nothing_hosted_before_leader_and_isr_and_no_local_topic_created(broker) -> None:
    async def scenario() -> None:
        await broker.groups.start()
        assert broker.groups.coordinators() == []
        assert await broker.groups.ensure_topic() is None
        assert OFFSETS not in broker.log_manager.topics  # created through ZooKeeper only
        assert await fetch_offset(broker) == (errors.NotCoordinatorError.code, -1)
        assert await commit(broker, 5) == errors.NotCoordinatorError.code
        assert (await join(broker)).error_code == errors.NotCoordinatorError.code
        # A follower of the partition does not host it either.
        assert await lead(broker, OTHER, 0) == 0
        assert broker.groups.coordinators() == []
        assert await fetch_offset(broker) == (errors.NotCoordinatorError.code, -1)
    run(broker, scenario)


def test_commits_wait_for_the_isr_and_time_out_as_coordinator_not_available(broker) -> None:
    async def scenario() -> None:
        assert await lead(broker, ME, 0) == 0
        assert len(broker.groups.coordinators()) == 1
        waiting = asyncio.ensure_future(commit(broker, 5))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # in the leader's log, not yet on the follower
        end = leo(broker)
        await follower_fetch(broker, 0, 0)
        assert not waiting.done()
        await follower_fetch(broker, end, 0)  # the follower has it: the HW passes it
        assert await asyncio.wait_for(waiting, 5) == 0
        assert await fetch_offset(broker) == (0, 5)
        # Partitions are checked against the cluster's metadata (the coordinator holds no
        # replica of t here): t-0 exists, t-5 does not.
        assert "t" not in broker.log_manager.topics
        assert await commit(broker, 1, partition=5) == errors.UnknownTopicOrPartitionError.code
        # The follower stops fetching: after offsets.commit.timeout.ms the commit fails with
        # COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT mapped), and is not applied.
        assert await commit(broker, 9) == errors.CoordinatorNotAvailableError.code
        assert await fetch_offset(broker) == (0, 5)
    run(broker, scenario)


def test_resign_unloads_and_leading_again_reloads_from_the_log(broker) -> None:
    async def scenario() -> None:
        assert await lead(broker, ME, 0, isr=(ME,)) == 0  # ISR [me]: writes commit at once
        assert await commit(broker, 42) == 0
        coord = broker.groups.coordinator(GROUP)
        assert coord is not None and not coord.loading
        parked = asyncio.ensure_future(join(broker))  # waits for the initial rebalance delay
        await asyncio.sleep(0.1)
        assert not parked.done()
        # A newer leader epoch while leading keeps the loaded coordinator and its members.
        assert await lead(broker, ME, 1, isr=(ME,)) == 0
        assert broker.groups.coordinator(GROUP) is coord and not parked.done()
        # Leadership moves to the other replica: the parked join is answered
        # NOT_COORDINATOR, the groups go, requests get NOT_COORDINATOR.
        assert await lead(broker, OTHER, 2) == 0
        assert (await asyncio.wait_for(parked, 5)).error_code == errors.NotCoordinatorError.code
        assert broker.groups.coordinator(GROUP) is None and coord.group_ids() == []
        assert await fetch_offset(broker) == (errors.NotCoordinatorError.code, -1)
        # Leading again: loaded anew from the local log, the commit is back.
        assert await lead(broker, ME, 3, isr=(ME,)) == 0
        again = broker.groups.coordinator(GROUP)
        assert again is not None and again is not coord
        assert await fetch_offset(broker) == (0, 42)
        # StopReplica resigns too.
        await broker.replicas.stop_replicas(1, 1, [(OFFSETS, 0, False)])
        await settle(broker)
        assert broker.groups.coordinators() == []
        assert await commit(broker, 43) == errors.NotCoordinatorError.code
    run(broker, scenario)


def test_load_in_progress_and_a_resign_during_the_load(broker, monkeypatch) -> None:
    gate = threading.Event()
    gate.set()
    read = coordinator_runtime.read_chunk

    def gated(plog: Any, offset: int, max_bytes: int) -> Any:
        assert gate.wait(20)
        return read(plog, offset, max_bytes)
    monkeypatch.setattr(coordinator_runtime, "read_chunk", gated)

    async def scenario() -> None:
        assert await lead(broker, ME, 0, isr=(ME,)) == 0
        assert await commit(broker, 42) == 0
        assert await lead(broker, OTHER, 1) == 0
        gate.clear()
        assert await lead(broker, ME, 2, isr=(ME,), loaded=False) == 0
        loading = broker.groups.coordinator(GROUP)
        assert loading is not None and loading.loading
        assert await fetch_offset(broker) == (errors.CoordinatorLoadInProgressError.code, -1)
        # Leadership moves away while the log is being read: the load stops unapplied.
        assert await lead(broker, OTHER, 3) == 0
        assert await fetch_offset(broker) == (errors.NotCoordinatorError.code, -1)
        gate.set()
        await settle(broker)
        assert not loading.loading and loading.group_ids() == []
        assert broker.groups.coordinators() == []
        assert await lead(broker, ME, 4, isr=(ME,)) == 0
        assert await fetch_offset(broker) == (0, 42)
    run(broker, scenario)


def test_a_stale_resign_or_election_is_ignored(broker) -> None:
    async def scenario() -> None:
        assert await lead(broker, ME, 0, isr=(ME,)) == 0
        coord = broker.groups.coordinator(GROUP)
        await broker.groups.on_resign(0)  # the replica manager says this broker leads
        assert broker.groups.coordinator(GROUP) is coord
        assert await lead(broker, OTHER, 1) == 0
        await broker.groups.on_become_leader(0)  # ... and now that it follows
        assert broker.groups.coordinators() == []
    run(broker, scenario)


def test_appends_refused_by_the_partition_map_to_client_errors() -> None:
    from pylog.group.admin import map_append_error

    for code in (errors.NotEnoughReplicasError.code, errors.NotEnoughReplicasAfterAppendError.code,
                 errors.RequestTimedOutError.code, errors.UnknownTopicOrPartitionError.code):
        assert map_append_error(code) == errors.CoordinatorNotAvailableError.code
    assert map_append_error(errors.NotLeaderOrFollowerError.code) == errors.NotCoordinatorError.code
