"""The console's memory of the cluster over time: rates and lag for the live charts.

A ``Sampler`` task reads the cluster every ``interval`` seconds: the end offset of every
partition (ListOffsets), the committed offsets of every group (OffsetFetch), and, when
metrics URLs are given, the brokers' ``/metrics``. ``History`` turns two consecutive
samples into points of time series:

- ``produce:<topic>`` records/s appended: from ``messagesin_total`` when the metrics have
  it, else from the growth of the partitions' end offsets (the same thing, minus records
  removed by nothing: offsets only grow);
- ``consume:<topic>`` records/s consumed: the growth of the groups' committed offsets;
- ``bytes_in:<topic>``, ``bytes_out:<topic>``: only from the metrics;
- ``lag:<group>``: the group's total lag (end offset - committed, summed);
- ``broker:<node>``: records/s appended to the partitions the broker leads;
- ``produce:*``, ``consume:*``: the cluster's totals.

Each series keeps its last ``keep`` points (wall-clock ms, value). Nothing is stored on disk:
a console started now draws from now on.

Event-loop affinity: ``Sampler`` runs on the console's loop; ``History`` is plain data.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, NamedTuple

from pylog import errors
from pylog._clock import Clock
from pylog.client import TopicPartition
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.console.data import ClusterData
from pylog.console.metrics import MetricsUnavailable, TopicCounters, scrape

__all__ = ["Snapshot", "History", "Sampler"]

log = logging.getLogger("pylog.console")

#: Groups whose offsets one sample reads: those ListGroups names and those opened in the
#: console, in name order (the rest are left out of the charts).
MAX_SAMPLED_GROUPS = 200


class Snapshot(NamedTuple):
    """One reading of the cluster at ``mono`` (monotonic s) / ``wall_ms``."""

    mono: float
    wall_ms: int
    starts: dict[TopicPartition, int]
    ends: dict[TopicPartition, int]
    leaders: dict[TopicPartition, int]
    committed: dict[str, dict[TopicPartition, int]]
    counters: TopicCounters | None


class History:
    """Time series derived from consecutive snapshots (see the module docstring)."""

    def __init__(self, keep: int = 180) -> None:
        self.keep = keep
        self.series: dict[str, deque[tuple[int, float]]] = {}
        self.last: Snapshot | None = None
        self.log_size: dict[str, float] = {}

    def _point(self, key: str, wall_ms: int, value: float) -> None:
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = deque(maxlen=self.keep)
        s.append((wall_ms, value))

    def points(self, key: str) -> list[tuple[int, float]]:
        return list(self.series.get(key, ()))

    def latest(self, key: str) -> float | None:
        s = self.series.get(key)
        return s[-1][1] if s else None

    def add(self, snap: Snapshot) -> None:
        """Record ``snap``; from the second snapshot on, append a point to each series.
        Lag needs no predecessor: it is a level, not a rate."""
        prev, self.last = self.last, snap
        self._forget(snap)
        for group, committed in snap.committed.items():
            lag = sum(max(snap.ends[tp] - off, 0) for tp, off in committed.items()
                      if tp in snap.ends and off >= 0)
            self._point(f"lag:{group}", snap.wall_ms, float(lag))
        if snap.counters is not None:
            self.log_size = dict(snap.counters.log_size)
        if prev is None or snap.mono <= prev.mono:
            return
        dt = snap.mono - prev.mono
        produced: dict[str, float] = {}
        by_broker: dict[int, float] = {}
        for tp, end in snap.ends.items():
            before = prev.ends.get(tp)
            if before is None or end < before:  # new partition, or a recreated topic
                continue
            produced[tp.topic] = produced.get(tp.topic, 0.0) + (end - before)
            leader = snap.leaders.get(tp, -1)
            by_broker[leader] = by_broker.get(leader, 0.0) + (end - before)
        consumed: dict[str, float] = {}
        for group, committed in snap.committed.items():
            earlier = prev.committed.get(group, {})
            for tp, off in committed.items():
                before = earlier.get(tp)
                if before is not None and 0 <= before <= off:
                    consumed[tp.topic] = consumed.get(tp.topic, 0.0) + (off - before)
        metrics = (snap.counters is not None and prev.counters is not None
                   and bool(snap.counters.messages_in))
        if metrics:
            assert snap.counters is not None and prev.counters is not None
            produced = _deltas(prev.counters.messages_in, snap.counters.messages_in)
            for name, key in (("bytes_in", "bytes_in"), ("bytes_out", "bytes_out")):
                for topic, d in _deltas(getattr(prev.counters, name),
                                        getattr(snap.counters, name)).items():
                    self._point(f"{key}:{topic}", snap.wall_ms, d / dt)
        topics = {tp.topic for tp in snap.ends}
        for topic in sorted(topics):
            self._point(f"produce:{topic}", snap.wall_ms, produced.get(topic, 0.0) / dt)
            self._point(f"consume:{topic}", snap.wall_ms, consumed.get(topic, 0.0) / dt)
        self._point("produce:*", snap.wall_ms, sum(produced.values()) / dt)
        self._point("consume:*", snap.wall_ms, sum(consumed.values()) / dt)
        for node in sorted(set(snap.leaders.values())):
            self._point(f"broker:{node}", snap.wall_ms, by_broker.get(node, 0.0) / dt)

    def _forget(self, snap: Snapshot) -> None:
        """Drop the series of topics and groups the snapshot no longer has (deleted)."""
        topics = {tp.topic for tp in snap.ends}
        for key in list(self.series):
            kind, _, name = key.partition(":")
            if kind == "lag":
                gone = name not in snap.committed
            elif kind == "broker":
                gone = False  # brokers come back; their series are few
            else:
                gone = name != "*" and name not in topics
            if gone:
                del self.series[key]

    def rates(self, topic: str) -> dict[str, float | None]:
        return {"produce": self.latest(f"produce:{topic}"),
                "consume": self.latest(f"consume:{topic}"),
                "bytes_in": self.latest(f"bytes_in:{topic}"),
                "bytes_out": self.latest(f"bytes_out:{topic}")}


def _deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Counter growth per key; a counter that went down (a broker restarted) counts from 0."""
    out = {}
    for key, value in after.items():
        old = before.get(key, 0.0)
        out[key] = value - old if value >= old else value
    return out


class Sampler:
    """Reads the cluster every ``interval`` s into a ``History``; ``error`` holds the last
    failure (the broker or the metrics URL unreachable), "" when the last sample worked."""

    def __init__(self, data: ClusterData, history: History, clock: Clock, interval: float,
                 metrics_urls: list[str] | None = None) -> None:
        self.data = data
        self.history = history
        self.clock = clock
        self.interval = interval
        self.metrics_urls = list(metrics_urls or [])
        self.error = ""
        self.metrics_error = ""
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> Snapshot:
        topics = await self.data.topics()
        leaders = {TopicPartition(t.name, p.partition): p.leader
                   for t in topics.values() if not t.is_internal for p in t.partitions}
        starts, ends = await self.data.offsets(leaders)
        committed: dict[str, dict[TopicPartition, int]] = {}
        try:
            groups = await self.data.admin.list_groups()
        except errors.ApiError as exc:  # e.g. a broker without ListGroups
            groups = []
            self.error = f"groups not sampled: {exc}"
        ids = sorted({g.group_id for g in groups} | self.data.watched)[:MAX_SAMPLED_GROUPS]
        for group_id in ids:
            offsets = await self.data.committed(group_id)
            committed[group_id] = {tp: o.offset for tp, o in offsets.items()
                                   if o is not None and tp in leaders}
        counters = None
        if self.metrics_urls:
            try:
                counters = await scrape(self.metrics_urls)
                self.metrics_error = ""
            except MetricsUnavailable as exc:
                self.metrics_error = f"{exc}; rates come from offsets meanwhile"
        snap = Snapshot(self.clock.monotonic(), self.clock.time_ms(), starts, ends, leaders,
                        committed, counters)
        self.history.add(snap)
        return snap

    async def run(self) -> None:
        while True:
            self.error = ""  # sample_once may note what it could not read
            try:
                await self.sample_once()
            except (errors.KafkaError, KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
                self.error = f"sampling failed: {exc}"
                log.warning("console: %s", self.error)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def fresh_offsets(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int],
                                     float] | None:
        """The last sample's log start and end offsets and their age in seconds, while they
        are younger than two intervals; else None (then a page asks the brokers)."""
        last = self.history.last
        if last is None:
            return None
        age = self.clock.monotonic() - last.mono
        return (last.starts, last.ends, age) if age < 2 * self.interval else None

    def status(self) -> dict[str, Any]:
        source = "metrics" if self.metrics_urls and not self.metrics_error else "offsets"
        return {"interval": self.interval, "source": source, "error": self.error,
                "metrics_error": self.metrics_error}
