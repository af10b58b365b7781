"""A broker's view of the cluster, fed by the controller's UpdateMetadata requests (Kafka's
``ZkMetadataCache``): live brokers with their endpoints and racks, each partition's leader,
leader epoch, ISR, replicas and offline replicas, topic ids, and the controller.

Metadata, FindCoordinator and DescribeCluster answer from it in cluster mode. An
UpdateMetadata from an older controller epoch than the last one applied is refused
(STALE_CONTROLLER_EPOCH); a partition whose leader is -2 (Kafka's ``LeaderDuringDelete``)
is removed. Event-loop affinity: read and written on the broker's loop only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pylog.protocol.codec import ZERO_UUID

LEADER_DURING_DELETE = -2
STALE_CONTROLLER_EPOCH = 11


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionMeta:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline: tuple[int, ...]
    zk_version: int


# How long Metadata and DescribeCluster wait for the first UpdateMetadata (wait_initialized).
FIRST_UPDATE_WAIT_S = 5.0


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[str, dict[int, PartitionMeta]] = {}
        self.topic_ids: dict[str, Any] = {}
        self.controller_id = -1
        self.controller_epoch = -1
        self._changed = asyncio.Event()

    def topic(self, name: str) -> dict[int, PartitionMeta] | None:
        return self.partitions.get(name)

    def topic_by_id(self, topic_id: Any) -> str | None:
        for name, tid in self.topic_ids.items():
            if tid == topic_id:
                return name
        return None

    def apply(self, request: Any, version: int) -> int:
        """Apply one UpdateMetadataRequest; returns its error code (0 or STALE)."""
        if request.controller_epoch < self.controller_epoch:
            return STALE_CONTROLLER_EPOCH
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        brokers = {}
        for b in request.live_brokers:
            if version == 0:
                host, port = b.v0_host, b.v0_port
            else:
                ep = next((e for e in b.endpoints if e.listener in ("PLAINTEXT", "")),
                          b.endpoints[0] if b.endpoints else None)
                host, port = (ep.host, ep.port) if ep is not None else ("", -1)
            brokers[b.id] = BrokerInfo(b.id, host, port, b.rack or None)
        self.brokers = brokers
        if version >= 5:
            states = [(t.topic_name, t.topic_id, s) for t in request.topic_states
                      for s in t.partition_states]
        else:
            states = [(s.topic_name, None, s) for s in request.ungrouped_partition_states]
        for name, topic_id, s in states:
            if s.leader == LEADER_DURING_DELETE:
                parts = self.partitions.get(name)
                if parts is not None:
                    parts.pop(s.partition_index, None)
                    if not parts:
                        del self.partitions[name]
                        self.topic_ids.pop(name, None)
                continue
            self.partitions.setdefault(name, {})[s.partition_index] = PartitionMeta(
                s.leader, s.leader_epoch, tuple(s.isr), tuple(s.replicas),
                tuple(s.offline_replicas), s.zk_version)
            if topic_id is not None and topic_id != ZERO_UUID:
                self.topic_ids[name] = topic_id
        self._changed.set()
        self._changed = asyncio.Event()
        return 0

    @property
    def initialized(self) -> bool:
        """The controller has sent this broker its first UpdateMetadata."""
        return self.controller_epoch >= 0

    async def wait_initialized(self, timeout: float = FIRST_UPDATE_WAIT_S) -> bool:
        """Before its first UpdateMetadata a broker knows no broker, no controller and no
        topic. A client that asks then (a registered broker is reachable a few
        milliseconds before the controller's UpdateMetadata reaches it) would get an empty
        cluster, and librdkafka then waits for its next periodic refresh (minutes) before
        it looks for the controller again. Client requests that read the cache wait for the
        first update instead, for at most ``timeout`` seconds."""
        return self.initialized or await self.wait_until(lambda c: c.initialized, timeout)

    async def wait_until(self, predicate: Any, timeout: float) -> bool:
        """Wait (bounded) until ``predicate(self)`` holds after some UpdateMetadata."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate(self):
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                return bool(predicate(self))
        return True
