"""StopReplica with delete on the replica manager: a partition moved away while other
partitions of its topic stay on the broker is emptied in place; the topic's local log is
deleted with its last replicated partition."""

from __future__ import annotations

import asyncio

import pytest

import logcore
from pylog._clock import ManualClock
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.replication import PartitionInfo

T0 = 1_700_000_000_000
ME, OTHER = 0, 7


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "auto.create.topics.enable": "false"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def _batch(n: int) -> bytes:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, timestamp_ms=T0)
    return bytes(b.build())


def test_stop_replica_delete_empties_one_partition_then_deletes_the_topic(broker) -> None:
    async def scenario() -> None:
        infos = [PartitionInfo("t", p, ME, 0, (ME,), 0, (ME, OTHER)) for p in (0, 1)]
        result = await broker.replicas.become_leader_or_follower(
            1, 1, -1, infos, {OTHER: ("127.0.0.1", 1)})
        assert result == {("t", 0): 0, ("t", 1): 0}
        for p in (0, 1):
            broker.log_manager.get_partition("t", p).log.append(_batch(5))
        directory = broker.log_manager.get_partition("t", 1).log.directory
        assert await broker.replicas.stop_replicas(1, 1, [("t", 1, True)]) == {("t", 1): 0}
        p1 = broker.log_manager.get_partition("t", 1).log
        assert p1.log_end_offset == 0 and p1.log_start_offset == 0
        assert p1.directory == directory  # the dense list keeps partition 1, now empty
        assert broker.log_manager.get_partition("t", 0).log.log_end_offset == 5
        assert ("t", 0) in broker.replicas.partitions and ("t", 1) not in broker.replicas.partitions
        # The last replicated partition's delete removes the topic's local log.
        assert await broker.replicas.stop_replicas(1, 1, [("t", 0, True)]) == {("t", 0): 0}
        assert "t" not in broker.log_manager.topics

    async def go() -> None:
        try:
            await asyncio.wait_for(scenario(), 20)
        finally:
            await broker.replicas.shutdown()
    asyncio.run(go())


def test_stop_replica_without_delete_keeps_the_log(broker) -> None:
    async def scenario() -> None:
        info = PartitionInfo("t", 0, ME, 0, (ME,), 0, (ME, OTHER))
        await broker.replicas.become_leader_or_follower(1, 1, -1, [info], {})
        broker.log_manager.get_partition("t", 0).log.append(_batch(3))
        await broker.replicas.stop_replicas(1, 1, [("t", 0, False)])
        assert broker.log_manager.get_partition("t", 0).log.log_end_offset == 3

    async def go() -> None:
        try:
            await asyncio.wait_for(scenario(), 20)
        finally:
            await broker.replicas.shutdown()
    asyncio.run(go())
