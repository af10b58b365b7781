"""Collectors: one scrape of a broker, rendered in the Prometheus text format.

The request path counts (``registry.BrokerMetrics``); everything else is a gauge computed
here at scrape time from the state the broker keeps anyway (the collector pattern): log
sizes and offsets from each ``logcore.Log``'s lock-free properties, ISR state from the
replica manager, the controller's view from the controller, consumer lag from the group
coordinators' committed offsets and the partitions' high watermarks. Nothing is kept up to
date for metrics' sake between scrapes.

The names are those Prometheus's JMX exporter gives Kafka's MBeans with the rules of its
Kafka example configuration (``lowercaseOutputName``: ``kafka.server:type=ReplicaManager,
name=UnderReplicatedPartitions`` is ``kafka_server_replicamanager_underreplicatedpartitions``;
a ``...PerSec`` meter's count is ``..._total``), and kafka_exporter's for consumer groups
(``kafka_consumergroup_lag``). docs/metrics.md lists every one.

``collect`` is a generator: it writes into an ``Exposition`` and yields after every slice
of partitions (``SLICE``), so that the HTTP endpoint can give the event loop back between
slices and a scrape of 10,000 partitions never holds the loop for more than a few
milliseconds at a time. A partition deleted between slices is skipped (its log is closed).

The broker is handed in as an object (``broker``): this package imports nothing above
``pylog.config`` (tests/unit/test_layering.py).

Event-loop affinity: runs on the broker's loop (the request counters and the replica and
group state belong to it; ``time.thread_time`` measures the loop's thread).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from typing import Any

from pylog.metrics.registry import (
    REQUEST_TIME_PARTS,
    TOPIC_METRICS,
    Exposition,
    Histogram,
    labels_text,
    merge,
)
from pylog.protocol.apis import api_name

#: Partitions rendered between two yields to the event loop.
SLICE = 1000


def collect(broker: Any, out: Exposition) -> Iterator[None]:
    """Write every metric of ``broker`` into ``out``, yielding between slices."""
    _requests(broker, out)
    _topics(broker, out)
    _replica_manager(broker, out)
    _controller(broker, out)
    yield
    yield from _logs(broker, out)
    _flushes(broker, out)
    _cleaner(broker, out)
    _idle(broker, out)
    _network(broker, out)
    _quotas(broker, out)
    yield
    yield from _consumer_groups(broker, out)


def _requests(broker: Any, out: Exposition) -> None:
    requests = sorted(broker.metrics.requests.items())
    name = "kafka_network_requestmetrics_requests_total"
    out.family(name, "counter", "Requests received, per API and version.")
    per_api: dict[str, list[list[Histogram]]] = {}
    for (api, version), times in requests:
        out.sample(name, times.count, labels_text((("request", api_name(api)),
                                                    ("version", str(version)))))
        per_api.setdefault(api_name(api), []).append(times.histograms())
    merged = {api: [merge(h[i] for h in hists) for i in range(len(REQUEST_TIME_PARTS))]
              for api, hists in sorted(per_api.items())}
    for i, (part, meaning) in enumerate(REQUEST_TIME_PARTS):
        name = f"kafka_network_requestmetrics_{part}"
        out.family(name, "histogram", f"Milliseconds a request spent {meaning}, per API.")
        for api, hists in merged.items():
            out.histogram(name, hists[i], (("request", api),))


def _topics(broker: Any, out: Exposition) -> None:
    m = broker.metrics
    topics = broker.log_manager.topics
    for gone in [t for t in m.topics if t not in topics]:  # deleted: Kafka drops its metrics
        m.forget_topic(gone)
    per_topic = sorted(m.topics.items())
    everything = m.all_topics()
    for attr, name, help_ in TOPIC_METRICS:
        out.family(name, "counter", help_ + " Without a topic label: all topics.")
        out.sample(name, getattr(everything, attr))
        for topic, stats in per_topic:
            out.sample(name, getattr(stats, attr), labels_text((("topic", topic),)))


def _replica_manager(broker: Any, out: Exposition) -> None:
    replicas = broker.replicas
    if replicas.active:
        states = list(replicas.partitions.values())
        count = len(states)
        leaders = [s for s in states if s.leader is not None]
        under = sum(1 for s in leaders if len(s.isr) < len(s.replicas))
        under_min = sum(1 for s in leaders if len(s.isr) < _min_isr(broker, s.topic))
        leader_count = len(leaders)
    else:  # a single node, or a cluster broker before its first LeaderAndIsr
        count = 0 if broker.cluster is not None else len(broker.log_manager.all_partitions())
        leader_count = count
        under = under_min = 0
    prefix = "kafka_server_replicamanager_"
    for suffix, type_, value, help_ in (
        ("partitioncount", "gauge", count, "Partitions this broker holds a replica of."),
        ("leadercount", "gauge", leader_count, "Partitions this broker leads."),
        ("underreplicatedpartitions", "gauge", under,
         "Partitions this broker leads whose ISR is smaller than their replica set."),
        ("underminisrpartitioncount", "gauge", under_min,
         "Partitions this broker leads whose ISR is smaller than min.insync.replicas."),
        ("isrshrinks_total", "counter", replicas.isr_shrinks,
         "ISR shrinks this broker applied as a leader."),
        ("isrexpands_total", "counter", replicas.isr_expands,
         "ISR expansions this broker applied as a leader."),
    ):
        out.family(prefix + suffix, type_, help_)
        out.sample(prefix + suffix, value)


def _min_isr(broker: Any, topic: str) -> int:
    t = broker.log_manager.topics.get(topic)
    if t is None:
        return 1
    return int(t.config.get("min.insync.replicas", 1))


def _controller(broker: Any, out: Exposition) -> None:
    cluster = broker.cluster
    if cluster is None:  # a single node is its own (embedded) controller; no partition is offline
        active, offline = 1, 0
    else:
        ctl = cluster.controller
        active = 1 if ctl is not None and not ctl.stopped else 0
        offline = len(ctl.core.offline_partitions()) if active else 0
    prefix = "kafka_controller_kafkacontroller_"
    out.family(prefix + "activecontrollercount", "gauge",
               "1 on the broker that is the active controller, else 0.")
    out.sample(prefix + "activecontrollercount", active)
    out.family(prefix + "offlinepartitionscount", "gauge",
               "Partitions without a live leader (reported by the active controller only).")
    out.sample(prefix + "offlinepartitionscount", offline)


_LOG_METRICS = (
    ("kafka_log_log_size", "Bytes of the partition's log segments on this broker."),
    ("kafka_log_log_logstartoffset", "The partition's log start offset on this broker."),
    ("kafka_log_log_logendoffset", "The partition's log end offset on this broker."),
    ("kafka_log_log_numlogsegments", "Segments of the partition's log on this broker."),
)


def _logs(broker: Any, out: Exposition) -> Iterator[None]:
    """Per partition: size, log start and end offsets, segments. Rendered one family after
    the other (the text format wants a family's samples together), each in slices."""
    parts = broker.log_manager.all_partitions()
    rows: list[tuple[str, int, int, int, int]] = []
    for i, p in enumerate(parts, 1):
        plog = p.log
        if plog.closed:
            continue
        label = labels_text((("topic", p.topic), ("partition", str(p.index))))
        rows.append((label, plog.size_in_bytes, plog.log_start_offset, plog.log_end_offset,
                     plog.num_segments))
        if i % SLICE == 0:
            yield
    append = out.lines.append
    for col, (name, help_) in enumerate(_LOG_METRICS, 1):
        out.family(name, "gauge", help_)
        for start in range(0, len(rows), SLICE):
            for row in rows[start:start + SLICE]:
                append(f"{name}{row[0]} {row[col]}")
            yield


def _flushes(broker: Any, out: Exposition) -> None:
    name = "kafka_log_logflushstats_logflushrateandtimems"
    out.family(name, "histogram", "Milliseconds each log flush (fsync of segments up to an "
               "offset) took; the count is the number of flushes.")
    out.histogram(name, broker.log_manager.flush_times.copy())


def _cleaner(broker: Any, out: Exposition) -> None:
    cleaner = broker.log_manager.cleaner
    stats = cleaner.last_stats if cleaner is not None else None
    last_s = stats.elapsed_s if stats is not None else 0.0
    recopy = (100.0 * stats.bytes_written / stats.bytes_read
              if stats is not None and stats.bytes_read else 0.0)
    since_ms = 0.0
    if cleaner is not None and cleaner.last_round_monotonic is not None:
        since_ms = (time.monotonic() - cleaner.last_round_monotonic) * 1000.0
    for name, type_, value, help_ in (
        ("kafka_log_logcleaner_max_clean_time_secs", "gauge", last_s,
         "Seconds the last cleaning round took."),
        ("kafka_log_logcleaner_cleaner_recopy_percent", "gauge", recopy,
         "Bytes written as a percentage of bytes read in the last cleaning round."),
        ("kafka_log_logcleaner_rounds_total", "counter",
         cleaner.rounds if cleaner is not None else 0, "Cleaning rounds completed."),
        ("kafka_log_logcleanermanager_time_since_last_run_ms", "gauge", since_ms,
         "Milliseconds since the last cleaning round finished (0: none yet)."),
        ("kafka_log_logcleanermanager_uncleanable_partitions_count", "gauge",
         len(cleaner.uncleanable) if cleaner is not None else 0,
         "Partitions whose cleaning failed and that are skipped from then on."),
        ("kafka_log_logcleaner_dead_thread_count", "gauge",
         cleaner.dead_threads() if cleaner is not None else 0,
         "Cleaner threads that died (0 when cleaning runs as configured)."),
    ):
        out.family(name, type_, help_)
        out.sample(name, value)


def _idle(broker: Any, out: Exposition) -> None:
    """The event loop's and the I/O threads' idle ratios since the previous scrape (since
    the start for the first): 1 - loop thread CPU seconds / wall seconds, and 1 - seconds
    the I/O threads spent in request-path work / (threads x wall seconds)."""
    now = time.monotonic()
    cpu = time.thread_time()
    busy = broker.io.busy_seconds()
    marks = broker.metrics_marks
    prev = marks.get("idle")
    marks["idle"] = (now, cpu, busy)
    if prev is None:
        prev = (broker.started_monotonic, broker.started_thread_time, 0.0)
    wall = now - prev[0]
    net_idle = io_idle = 1.0
    if wall > 0:
        net_idle = min(1.0, max(0.0, 1.0 - (cpu - prev[1]) / wall))
        io_idle = min(1.0, max(0.0, 1.0 - (busy - prev[2]) / (wall * broker.io.threads)))
    name = "kafka_network_socketserver_networkprocessoravgidlepercent"
    out.family(name, "gauge", "Share of time (0 to 1) the broker's event loop, its network "
               "layer, was idle since the previous scrape.")
    out.sample(name, net_idle)
    name = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
    out.family(name, "gauge", "Share of time (0 to 1) the I/O threads (num.io.threads) were "
               "idle since the previous scrape.")
    out.sample(name, io_idle)


def _network(broker: Any, out: Exposition) -> None:
    pool = broker.memory_pool
    capacity = pool.capacity
    prefix = "kafka_network_socketserver_"
    out.family(prefix + "memorypoolused", "gauge",
               "Bytes of request frames held (queued.max.request.bytes' pool).")
    out.sample(prefix + "memorypoolused", pool.in_use)
    out.family(prefix + "memorypoolavailable", "gauge",
               "Bytes left in the request memory pool (+Inf when queued.max.request.bytes <= 0).")
    out.sample(prefix + "memorypoolavailable",
               max(capacity - pool.in_use, 0) if capacity > 0 else float("inf"))
    counts = collections.Counter(c.listener for c in list(broker.connections))
    name = "kafka_server_socket_server_metrics_connection_count"
    out.family(name, "gauge", "Open client connections, per listener.")
    for listener in broker.config.listeners if broker.listen else []:
        out.sample(name, counts.get(listener.name, 0),
                   labels_text((("listener", listener.name), ("networkProcessor", "0"))))


#: (quota type, its measure's attribute name in Kafka's quota MBean) per quota manager.
_QUOTA_MEASURES = (("Produce", "byte_rate"), ("Fetch", "byte_rate"), ("Request", "request_time"))


def _quotas(broker: Any, out: Exposition) -> None:
    """Kafka's quota MBeans ``kafka.server:type=Produce|Fetch|Request,user=U,client-id=C``
    (attributes ``byte-rate`` / ``request-time`` and ``throttle-time``) as the JMX
    exporter's Kafka rules name them: ``kafka_server_quota_<attribute>{resource, user,
    clientId}``. One sample per sensor, i.e. per (user, client-id) pair a quota is measured
    for; none until a quota is configured (Kafka creates no quota sensors before)."""
    quotas = getattr(broker, "quotas", None)
    if quotas is None:
        return
    now = quotas.now_ms()
    rows: dict[str, list[tuple[float, str]]] = {
        name: [] for name in ("byte_rate", "request_time", "throttle_time")}
    for kind, measure in _QUOTA_MEASURES:
        for user, client_id, rate, throttle in quotas.managers[kind].measurements(now):
            labels = labels_text((("resource", kind), ("user", user), ("clientId", client_id)))
            rows[measure].append((rate, labels))
            rows["throttle_time"].append((throttle, labels))
    helps = {
        "byte_rate": "Bytes per second of a quota's clients (resource Produce: produced, Fetch: "
        "fetched), measured over the quota windows as the quota is enforced.",
        "request_time": "Percent of a request-handler thread's time a quota's clients used "
        "(resource Request), over the quota windows.",
        "throttle_time": "Average ms the throttled responses of a quota's clients were "
        "throttled for (Kafka's throttle-time, over the last 30 to 60 s; NaN: none throttled).",
    }
    for measure, samples in rows.items():
        name = f"kafka_server_quota_{measure}"
        out.family(name, "gauge", helps[measure])
        for value, labels in samples:
            out.sample(name, value, labels)


def _consumer_groups(broker: Any, out: Exposition) -> Iterator[None]:
    """kafka_exporter's names: per group and partition the committed offset and the lag
    (high watermark - committed offset, never below 0), and their sums per group and topic.
    The lag is given only for partitions this broker leads (it knows no other high
    watermark); the committed offset for every partition of a group it coordinates."""
    replicas = broker.replicas
    manager = broker.log_manager
    current: list[tuple[str, int]] = []
    lags: list[tuple[str, int]] = []
    current_sum: dict[tuple[str, str], int] = {}
    lag_sum: dict[tuple[str, str], int] = {}
    n = 0
    for coord in broker.groups.coordinators():
        for group, offsets in sorted(coord.all_committed_offsets().items()):
            for (topic, partition), committed in sorted(offsets.items()):
                n += 1
                label = labels_text((("consumergroup", group), ("topic", topic),
                                     ("partition", str(partition))))
                current.append((label, committed.offset))
                key = (group, topic)
                current_sum[key] = current_sum.get(key, 0) + committed.offset
                hw = _high_watermark(manager, replicas, topic, partition)
                if hw is not None:
                    lag = max(hw - committed.offset, 0)
                    lags.append((label, lag))
                    lag_sum[key] = lag_sum.get(key, 0) + lag
                if n % SLICE == 0:
                    yield
    yield from _group_families(
        out, "kafka_consumergroup_current_offset", current, current_sum,
        "Committed offset of a consumer group in a partition.",
        "Sum of a consumer group's committed offsets in a topic.")
    yield from _group_families(
        out, "kafka_consumergroup_lag", lags, lag_sum,
        "Records of a partition after a consumer group's committed offset (high watermark - "
        "committed offset), on the partition's leader.",
        "Sum of a consumer group's lag in a topic's partitions led here.")


def _group_families(out: Any, name: str, per_partition: list[tuple[str, int]],
                    sums: dict[tuple[str, str], int], help_text: str, help_sum: str) -> Any:
    """One per-partition gauge family (rendered in slices, giving the loop back) and its
    per-group-and-topic ``_sum`` family, as kafka_exporter names them."""
    out.family(name, "gauge", help_text)
    for i, (label, value) in enumerate(per_partition, 1):
        out.sample(name, value, label)
        if i % SLICE == 0:
            yield
    out.family(f"{name}_sum", "gauge", help_sum)
    for (group, topic), value in sorted(sums.items()):
        out.sample(f"{name}_sum", value, labels_text((("consumergroup", group), ("topic", topic))))

def _high_watermark(manager: Any, replicas: Any, topic: str, partition: int) -> int | None:
    if replicas.active:
        state = replicas.partitions.get((topic, partition))
        if state is None or state.leader is None:
            return None
        return int(state.high_watermark)
    p = manager.get_partition(topic, partition)
    if p is None or p.log.closed:
        return None
    return int(p.log.log_end_offset)


def render(broker: Any) -> str:
    """The whole scrape at once (embedded mode, tests): ``collect`` without yielding."""
    out = Exposition()
    for _ in collect(broker, out):
        pass
    return out.text()
