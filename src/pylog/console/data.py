"""The console's data layer: what each page shows, read through ``pylog.client.aio.Admin``.

Every method returns plain dicts and lists (the views render them as HTML and as JSON) and
speaks only the Kafka protocol, so the console works against any Kafka-compatible broker.
Where a broker lacks an API, the answer says so (``missing``) instead of failing the page:
DescribeCluster falls back to Metadata inside the client; sizes come from a metrics URL's
``kafka_log_log_size`` when given, else from DescribeLogDirs, and a broker without either
shows no size.

Event-loop affinity: one ``ClusterData`` belongs to the console's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from pylog import errors
from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.client import TopicPartition
from pylog.client.aio import Admin
from pylog.client.aio.admin import ConfigResource, NewTopic, TopicDescription
from pylog.console.security import MASK, is_secret_config

__all__ = ["ClusterData", "API_NAMES", "partition_rows"]

#: Names of the API keys the overview lists (Kafka's ApiKeys).
API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
             9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 15: "DescribeGroups",
             16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
             21: "DeleteRecords", 22: "InitProducerId", 32: "DescribeConfigs",
             35: "DescribeLogDirs", 37: "CreatePartitions", 42: "DeleteGroups",
             44: "IncrementalAlterConfigs", 47: "OffsetDelete", 60: "DescribeCluster"}
#: APIs whose absence a page reports (what it cannot show then).
#: Up to this many partitions a page asks their offsets live; above, it takes the sampler's
#: last reading when that is fresh (the page says how old), since two ListOffsets of 1,000
#: partitions cost about 100 ms on a small machine (benchmarks/console_pages.py).
LIVE_OFFSETS_LIMIT = 100
NEEDED = {15: "group details", 16: "the group list", 32: "topic configs",
          44: "editing configs", 20: "deleting topics", 19: "creating topics",
          35: "topic sizes"}


def _covers(offsets: tuple[dict[TopicPartition, int], dict[TopicPartition, int]] | None,
            tps: list[TopicPartition]) -> bool:
    """Whether sampled ``offsets`` should stand in for live ones for ``tps``."""
    return (offsets is not None and len(tps) > LIVE_OFFSETS_LIMIT
            and all(tp in offsets[0] and tp in offsets[1] for tp in tps))


def partition_rows(desc: TopicDescription, starts: dict[TopicPartition, int],
                   ends: dict[TopicPartition, int]) -> list[dict[str, Any]]:
    rows = []
    for p in desc.partitions:
        tp = TopicPartition(desc.name, p.partition)
        start, end = starts.get(tp), ends.get(tp)
        rows.append({"partition": p.partition, "leader": p.leader, "replicas": p.replicas,
                     "isr": p.isr, "start_offset": start, "end_offset": end,
                     "records": (end - start) if start is not None and end is not None else None,
                     "under_replicated": len(p.isr) < len(p.replicas),
                     "offline": p.leader < 0})
    return rows


class ClusterData:
    """Reads (and, for the write views, changes) the cluster through one admin client."""

    def __init__(self, admin: Admin, clock: Clock = SYSTEM_CLOCK,
                 metadata_max_age: float = 1.0) -> None:
        self.admin = admin
        self.clock = clock
        self.metadata_max_age = metadata_max_age
        self._topics: tuple[float, dict[str, TopicDescription]] | None = None
        self._versions: dict[int, tuple[int, int]] | None = None
        #: Groups opened in the console: sampled for the lag charts even when ListGroups
        #: does not name them.
        self.watched: set[str] = set()

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        if self._versions is None:
            self._versions = await self.admin.api_versions()
        return self._versions

    async def missing(self, *keys: int) -> list[str]:
        """What cannot be shown because the broker lacks an API, one sentence each."""
        versions = await self.api_versions()
        return [f"this broker does not serve {API_NAMES.get(k, k)} (API key {k}): "
                f"no {NEEDED.get(k, 'view')}" for k in keys if k not in versions]

    async def offsets(self, tps: Iterable[TopicPartition]
                      ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Log start and end offsets (high watermarks) of the partitions, in two requests
        per leader."""
        tps = list(tps)
        if not tps:
            return {}, {}
        first, last = await asyncio.gather(
            self.admin.list_offsets(dict.fromkeys(tps, "earliest")),
            self.admin.list_offsets(dict.fromkeys(tps, "latest")))
        return ({tp: o for tp, (o, _) in first.items()}, {tp: o for tp, (o, _) in last.items()})

    async def _offsets_or_sampled(
            self, sampled: tuple[dict[TopicPartition, int], dict[TopicPartition, int]] | None,
            tps: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int], bool]:
        """(starts, ends, whether they are the ``sampled`` ones): sampled offsets stand in
        for live ones when they cover ``tps`` and there are many (``_covers``)."""
        if sampled is not None and _covers(sampled, tps):
            return sampled[0], sampled[1], True
        starts, ends = await self.offsets(tps)
        return starts, ends, False

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks only (one request per leader)."""
        tps = list(tps)
        if not tps:
            return {}
        found = await self.admin.list_offsets(dict.fromkeys(tps, "latest"))
        return {tp: o for tp, (o, _) in found.items()}

    async def topics(self) -> dict[str, TopicDescription]:
        """Every topic's metadata, reused for ``metadata_max_age`` seconds: the pages and
        the sampler ask for it often, and for 1,000 partitions one Metadata answer takes
        tens of ms to decode. A write through the console drops it."""
        now = self.clock.monotonic()
        if self._topics is not None and now - self._topics[0] < self.metadata_max_age:
            return self._topics[1]
        topics = await self.admin.describe_topics(None)
        self._topics = (now, topics)
        return topics

    async def log_sizes(self) -> dict[str, float]:
        """Bytes on disk per topic, every replica counted (as the brokers' summed
        ``kafka_log_log_size`` would be), from DescribeLogDirs; empty when a broker does not
        serve it."""
        if await self.missing(35):
            return {}
        try:
            dirs = await self.admin.describe_log_dirs()
        except errors.ApiError:
            return {}
        sizes: dict[str, float] = {}
        for d in dirs:
            for tp, size in d.sizes.items():
                sizes[tp.topic] = sizes.get(tp.topic, 0.0) + size
        return sizes

    # --- the overview and brokers --------------------------------------------------------

    async def overview(self) -> dict[str, Any]:
        cluster, topics, versions = await asyncio.gather(
            self.admin.describe_cluster(), self.topics(), self.api_versions())
        parts = [p for t in topics.values() for p in t.partitions]
        return {
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                         "controller": b.node_id == cluster.controller_id}
                        for b in sorted(cluster.brokers)],
            "topic_count": sum(1 for t in topics.values() if not t.is_internal),
            "internal_topic_count": sum(1 for t in topics.values() if t.is_internal),
            "partition_count": len(parts),
            "under_replicated": sum(1 for p in parts if len(p.isr) < len(p.replicas)),
            "offline": sum(1 for p in parts if p.leader < 0),
            "apis": [{"key": k, "name": API_NAMES[k], "min": lo, "max": hi}
                     for k, (lo, hi) in sorted(versions.items()) if k in API_NAMES],
            "api_count": len(versions),
        }

    async def brokers(self) -> list[dict[str, Any]]:
        cluster, topics = await asyncio.gather(self.admin.describe_cluster(), self.topics())
        rows = {b.node_id: {"node_id": b.node_id, "host": b.host, "port": b.port,
                            "rack": b.rack, "controller": b.node_id == cluster.controller_id,
                            "leaders": 0, "replicas": 0, "in_sync": 0}
                for b in cluster.brokers}
        for t in topics.values():
            for p in t.partitions:
                if p.leader in rows:
                    rows[p.leader]["leaders"] += 1
                for r in p.replicas:
                    if r in rows:
                        rows[r]["replicas"] += 1
                        rows[r]["in_sync"] += r in p.isr
        return [rows[k] for k in sorted(rows)]

    # --- topics --------------------------------------------------------------------------

    async def topic_rows(self, query: str = "", internal: bool = False,
                         offsets: tuple[dict[TopicPartition, int], dict[TopicPartition, int]]
                         | None = None) -> tuple[list[dict[str, Any]], bool]:
        """One row per topic whose name contains ``query`` (any case). Record counts come
        from ``offsets`` (log start and end offsets, e.g. the sampler's last reading) when
        given, covering every partition, and there are more than ``LIVE_OFFSETS_LIMIT``
        partitions; else from ListOffsets now. Returns the rows and whether the offsets were
        the sampled ones."""
        topics = await self.topics()
        chosen = sorted((t for t in topics.values()
                         if (internal or not t.is_internal) and query.lower() in t.name.lower()),
                        key=lambda t: t.name)
        tps = [TopicPartition(t.name, p.partition) for t in chosen for p in t.partitions]
        starts, ends, sampled = await self._offsets_or_sampled(offsets, tps)
        rows = []
        for t in chosen:
            records = 0
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                if tp in starts and tp in ends:
                    records += ends[tp] - starts[tp]
            rows.append({"name": t.name, "internal": t.is_internal,
                         "partitions": len(t.partitions),
                         "replication_factor": max((len(p.replicas) for p in t.partitions),
                                                   default=0),
                         "under_replicated": sum(1 for p in t.partitions
                                                 if len(p.isr) < len(p.replicas)),
                         "records": records})
        return rows, sampled

    async def topic(self, name: str,
                    offsets: tuple[dict[TopicPartition, int], dict[TopicPartition, int]]
                    | None = None) -> dict[str, Any]:
        """Partitions with offsets (from ``offsets`` when given and covering them all, as
        in ``topic_rows``), and configs (secrets masked).

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        desc = (await self.topics()).get(name)
        if desc is None:  # newer than the metadata held, or no such topic: ask
            desc = (await self.admin.describe_topics([name]))[name]
        tps = [TopicPartition(name, p.partition) for p in desc.partitions]
        starts, ends, sampled = await self._offsets_or_sampled(offsets, tps)
        configs: list[dict[str, Any]] = []
        config_error = ""
        try:
            res = ConfigResource("topic", name)
            entries = (await self.admin.describe_configs([res]))[res]
            for e in sorted(entries.values()):
                secret = is_secret_config(e.name, e.is_sensitive)
                configs.append({"name": e.name, "value": MASK if secret and e.value is not None
                                else e.value, "source": e.source, "read_only": e.read_only,
                                "secret": secret})
        except errors.KafkaError as exc:
            config_error = f"configs not available: {exc}"
        missing = await self.missing(32, 44, 20)
        if config_error and not any("DescribeConfigs" in m for m in missing):
            missing.append(config_error)
        rows = partition_rows(desc, starts, ends)
        return {"name": name, "internal": desc.is_internal, "offsets_sampled": sampled,
                "topic_id": str(desc.topic_id) if desc.topic_id else None,
                "partitions": rows, "configs": configs, "missing": missing,
                "records": sum(r["records"] or 0 for r in rows)}

    async def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        self._topics = None
        await self.admin.create_topics([NewTopic(name, partitions, replication_factor)])
        self._topics = None

    async def delete_topic(self, name: str) -> None:
        self._topics = None
        await self.admin.delete_topics([name])
        self._topics = None

    async def alter_topic_config(self, name: str, key: str, value: str | None) -> None:
        await self.admin.alter_configs(ConfigResource("topic", name), {key: value})

    # --- groups --------------------------------------------------------------------------

    async def group_rows(self) -> list[dict[str, Any]]:
        listings = await self.admin.list_groups()
        ids = sorted(g.group_id for g in listings)
        descs = await self.admin.describe_groups(ids) if ids else {}
        rows = []
        for g in sorted(listings):
            d = descs.get(g.group_id)
            rows.append({"group_id": g.group_id,
                         "state": d.state if d else (g.state or "?"),
                         "protocol_type": g.protocol_type or (d.protocol_type if d else ""),
                         "protocol": d.protocol if d else "",
                         "members": len(d.members) if d else 0,
                         "coordinator": d.coordinator if d else None})
        return rows

    async def committed(self, group_id: str) -> dict[TopicPartition, Any]:
        """The group's committed offsets. Asked for every partition at once (OffsetFetch
        with no topics); a broker that answers that with nothing (Tansu 0.6) is asked again
        for the partitions of every topic, and the ones with an offset are kept."""
        committed = await self.admin.list_group_offsets(group_id)
        if committed:
            return committed
        topics = await self.topics()
        tps = [TopicPartition(t.name, p.partition) for t in topics.values()
               if not t.is_internal for p in t.partitions]
        if not tps:
            return {}
        asked = await self.admin.list_group_offsets(group_id, tps)
        return {tp: o for tp, o in asked.items() if o is not None and o.offset >= 0}

    async def group(self, group_id: str) -> dict[str, Any]:
        """State, members and per-partition committed offset, end offset and lag."""
        desc = (await self.admin.describe_groups([group_id]))[group_id]
        committed = await self.committed(group_id)
        self.watched.add(group_id)
        owner: dict[TopicPartition, dict[str, Any]] = {}
        members = []
        for m in desc.members:
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "host": m.host,
                            "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.assignment]})
            for tp in m.assignment:
                owner[tp] = {"client_id": m.client_id, "host": m.host}
        tps = sorted(set(committed) | set(owner))
        ends = await self.end_offsets(tps)
        rows = []
        total = 0
        for tp in tps:
            c = committed.get(tp)
            end = ends.get(tp)
            lag = end - c.offset if c is not None and end is not None and c.offset >= 0 else None
            total += lag or 0
            who = owner.get(tp)
            rows.append({"topic": tp.topic, "partition": tp.partition,
                         "committed": c.offset if c is not None else None,
                         "metadata": c.metadata if c is not None else "",
                         "end_offset": end, "lag": lag,
                         "client_id": who["client_id"] if who else None,
                         "host": who["host"] if who else None})
        return {"group_id": group_id, "state": desc.state, "protocol_type": desc.protocol_type,
                "protocol": desc.protocol, "coordinator": desc.coordinator,
                "members": members, "offsets": rows, "total_lag": total,
                "topics": sorted({tp.topic for tp in tps})}
