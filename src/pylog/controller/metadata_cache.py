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
_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
STALE_CONTROLLER_EPOCH = 11


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker. ``host``/``port``: its endpoint on the inter-broker listener (what
    brokers use to reach it); ``endpoints``: (listener name, host, port) of every listener
    it advertises (what clients are given, by the listener they came in on)."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def at(self, listener: str) -> BrokerInfo | None:
        """This broker as clients of ``listener`` see it: None when it has no such
        listener (Kafka leaves it out of their Metadata). A broker known without endpoints
        (built by hand) is itself."""
        if not self.endpoints:
            return self
        for name, host, port in self.endpoints:
            if name == listener:
                return BrokerInfo(self.broker_id, host, port, self.rack, self.endpoints)
        return None


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
    """Args: listener: the inter-broker listener name (``BrokerInfo.host``/``port``)."""

    def __init__(self, listener: str = "PLAINTEXT") -> None:
        self.listener = listener
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
                endpoints: tuple[tuple[str, str, int], ...] = (("PLAINTEXT", host, port),)
            else:
                # v1-2 endpoints name no listener: the protocol's own name (Kafka's rule).
                endpoints = tuple((e.listener or _PROTOCOL_NAMES.get(e.security_protocol, ""),
                                   e.host, e.port) for e in b.endpoints)
                ep = next((e for e in endpoints if e[0] == self.listener),
                          endpoints[0] if endpoints else None)
                host, port = (ep[1], ep[2]) if ep is not None else ("", -1)
            brokers[b.id] = BrokerInfo(b.id, host, port, b.rack or None, endpoints)
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
