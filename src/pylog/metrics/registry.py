"""The broker's counters and histograms, and the Prometheus text format they are rendered in.

What is counted per request lives here as plain Python ints and floats on objects with
``__slots__``: ``BrokerMetrics`` (per API and version, per topic). They are
updated on the broker's event loop only, once per request or once per partition of a
request, never per record, and without a lock: the loop is one thread, so ``+=`` on an
attribute is never interleaved with another update or with a scrape (which runs on the
loop too). Gauges (log sizes, ISR state, consumer lag) are not kept here at all: the
collectors (``pylog.metrics.collectors``) compute them at scrape time from the state the
broker keeps anyway.

The text format is Prometheus's exposition format 0.0.4 (``# HELP``, ``# TYPE``, one
``name{label="value"} number`` line per sample; histograms as cumulative ``_bucket`` lines
with ``le`` labels, ``_sum`` and ``_count``), written by hand in ``Exposition`` as a list
of lines joined once (a scrape of 10,000 partitions writes some 40,000). prometheus_client
is not a dependency: its ``Counter.inc`` takes a ``threading.Lock`` (1.25 us against 0.17 us
for a ``+=`` on a slot, timeit), which the request path must not pay, and its collectors
would build every sample as an object per scrape.

Event-loop affinity: ``BrokerMetrics`` and its parts belong to the broker's loop;
``Histogram.observe`` from another thread needs the caller's own lock (``LockedHistogram``).
"""

from __future__ import annotations

import array
import bisect
import math
import threading
from collections.abc import Iterable, Sequence

import numpy as np

#: Request-time buckets in milliseconds (Kafka's request histograms report percentiles of
#: values in ms; these bounds cover a 0.1 ms loopback request to a 30 s long poll).
REQUEST_TIME_BUCKETS_MS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
    5000.0, 10000.0, 30000.0)

_BOUNDS = np.array(REQUEST_TIME_BUCKETS_MS)
#: Pending requests (x 7 numbers) that make ``BrokerMetrics.record_request`` fold them: about
#: 200 KiB, folded in about 1 ms.
_FOLD_AT = 4096 * 7

#: The parts of a request's time, as Kafka's ``RequestMetrics`` splits it; the metric of each
#: is ``kafka_network_requestmetrics_<part>``.
REQUEST_TIME_PARTS: tuple[tuple[str, str], ...] = (
    ("requestqueuetimems", "from the request read off the socket to its handler starting "
     "(behind earlier requests of the connection)"),
    ("localtimems", "in the handler, minus the remote time"),
    ("remotetimems", "waiting on others: a fetch's long poll, an acks=all produce waiting for "
     "the in-sync replicas"),
    ("throttletimems", "throttled by a client quota (the throttle_time_ms of its response; the "
     "connection is muted that long after it, outside the total time)"),
    ("responsesendtimems", "writing the response to the socket"),
    ("totaltimems", "from the request read off the socket to its response written"),
)


class Histogram:
    """A Prometheus histogram with fixed upper bounds (``le``), in the unit observed.

    ``observe`` is one ``bisect`` and two additions. Not thread-safe (see the module doc).
    """

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = REQUEST_TIME_BUCKETS_MS) -> None:
        self.bounds = tuple(bounds)
        # counts[i]: observations <= bounds[i] and > bounds[i-1]; counts[-1]: above the last.
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


class LockedHistogram(Histogram):
    """A histogram observed from several threads (log flushes: the background scheduler and
    the I/O threads). The lock is taken once per observation, off the request path."""

    __slots__ = ("_lock",)

    def __init__(self, bounds: Sequence[float] = REQUEST_TIME_BUCKETS_MS) -> None:
        super().__init__(bounds)
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            Histogram.observe(self, value)

    def copy(self) -> Histogram:
        """A consistent copy to render (counts and sum of the same observations)."""
        out = Histogram(self.bounds)
        with self._lock:
            out.counts = list(self.counts)
            out.sum = self.sum
        return out


class TopicStats:
    """Kafka's ``BrokerTopicMetrics`` of one topic (or ``BrokerMetrics.untracked``).

    Counted by the Produce and Fetch handlers once per partition of a request:
    ``messages_in`` (records appended), ``bytes_in`` (batch bytes appended), ``bytes_out``
    (record bytes fetched by consumers), ``replication_bytes_out`` (by follower brokers),
    ``total_*_requests`` (partitions asked for), ``failed_*_requests`` (partitions answered
    with an error).
    """

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "replication_bytes_out",
                 "total_produce_requests", "total_fetch_requests", "failed_produce_requests",
                 "failed_fetch_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.replication_bytes_out = 0
        self.total_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0


#: (attribute of TopicStats, metric name, help) in the order they are rendered.
TOPIC_METRICS: tuple[tuple[str, str, str], ...] = (
    ("messages_in", "kafka_server_brokertopicmetrics_messagesin_total",
     "Records appended by Produce requests."),
    ("bytes_in", "kafka_server_brokertopicmetrics_bytesin_total",
     "Record-batch bytes appended by Produce requests."),
    ("bytes_out", "kafka_server_brokertopicmetrics_bytesout_total",
     "Record-batch bytes sent to consumers in Fetch responses."),
    ("replication_bytes_out", "kafka_server_brokertopicmetrics_replicationbytesout_total",
     "Record-batch bytes sent to follower brokers in Fetch responses."),
    ("total_produce_requests", "kafka_server_brokertopicmetrics_totalproducerequests_total",
     "Partitions of Produce requests (Kafka counts a request once per partition)."),
    ("total_fetch_requests", "kafka_server_brokertopicmetrics_totalfetchrequests_total",
     "Partitions of Fetch requests (consumers and followers)."),
    ("failed_produce_requests", "kafka_server_brokertopicmetrics_failedproducerequests_total",
     "Partitions of Produce requests answered with an error."),
    ("failed_fetch_requests", "kafka_server_brokertopicmetrics_failedfetchrequests_total",
     "Partitions of Fetch requests answered with an error."),
)


class RequestTimes:
    """The requests of one API and version, and their times: ``count``, and per measured
    part (queue, local, remote, throttle, response send, total) the bucket counts and
    the sum in ms.

    ``BrokerMetrics.fold`` adds requests to it in batches.
    """

    __slots__ = ("count", "counts", "sums")

    #: Indexes into REQUEST_TIME_PARTS of the parts observed, in ``counts`` order.
    MEASURED = (0, 1, 2, 3, 4, 5)

    def __init__(self) -> None:
        self.count = 0
        self.counts = [[0] * (len(REQUEST_TIME_BUCKETS_MS) + 1) for _ in self.MEASURED]
        self.sums = [0.0] * len(self.MEASURED)

    def histograms(self) -> list[Histogram]:
        """One Histogram per part of REQUEST_TIME_PARTS."""
        out = []
        for i in range(len(REQUEST_TIME_PARTS)):
            h = Histogram()
            if i in self.MEASURED:
                j = self.MEASURED.index(i)
                h.counts = list(self.counts[j])
                h.sum = self.sums[j]
            else:
                h.counts[0] = self.count  # 0 ms: the first bucket
            out.append(h)
        return out


def merge(histograms: Iterable[Histogram]) -> Histogram:
    """The sum of histograms with the same bounds (an API's versions, for its times)."""
    out = Histogram()
    for h in histograms:
        out.counts = [a + b for a, b in zip(out.counts, h.counts, strict=True)]
        out.sum += h.sum
    return out


class BrokerMetrics:
    """What the request path counts (``broker.metrics``); see the module docstring.

    Attributes:
        requests: {(api key, version): RequestTimes}: Kafka's ``RequestsPerSec`` per API
            and version, and the request times (rendered per API, versions merged). Keys,
            not names: the names are looked up at scrape time, not once per request.
        topics: {topic: TopicStats}; entries of deleted topics are folded into
            ``untracked`` and dropped at scrape time.
        untracked: counts kept per topic no more (deleted topics) or never (partitions of
            a topic that does not exist). The broker-wide figures are ``untracked`` plus
            every topic's, summed at scrape time (``all_topics``), so a request pays for
            one TopicStats update per partition, not two.
    """

    __slots__ = ("_requests", "_pending", "topics", "untracked")

    def __init__(self) -> None:
        self._requests: dict[tuple[int, int], RequestTimes] = {}
        # Requests not yet folded into _requests: (api, version, queue_s, handler_s,
        # remote_s, send_s, throttle_s) each, flat.
        self._pending = array.array("d")
        self.topics: dict[str, TopicStats] = {}
        self.untracked = TopicStats()

    def forget_topic(self, name: str) -> None:
        """A deleted topic: its counts stay in the broker-wide figures only."""
        stats = self.topics.pop(name, None)
        if stats is not None:
            for attr in TopicStats.__slots__:
                setattr(self.untracked, attr, getattr(self.untracked, attr) + getattr(stats, attr))

    def all_topics(self) -> TopicStats:
        """The broker-wide figures (scrape time)."""
        out = TopicStats()
        for stats in (self.untracked, *self.topics.values()):
            for attr in TopicStats.__slots__:
                setattr(out, attr, getattr(out, attr) + getattr(stats, attr))
        return out

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    @property
    def requests(self) -> dict[tuple[int, int], RequestTimes]:
        """{(api key, version): RequestTimes}, with every request recorded so far."""
        self.fold()
        return self._requests

    def record_request(self, api: int, version: int, queue_s: float, handler_s: float,
                       remote_s: float, send_s: float, throttle_ms: float = 0.0) -> None:
        """One request done (seconds; ``handler_s`` includes ``remote_s``, local time is
        the difference; ``throttle_ms``: its quota throttle time). Its seven numbers are appended to a flat buffer, one
        ``array.extend`` (about 0.35 us), and folded into the histograms in batches
        (``fold``) with numpy: 0.3 us a request, against 1 to 1.5 us for counting each
        request into five histograms as it ends."""
        pending = self._pending
        pending.extend((api, version, queue_s, handler_s, remote_s, send_s, throttle_ms / 1000.0))
        if len(pending) >= _FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """Count the pending requests into their RequestTimes (at ``_FOLD_AT`` requests and
        before every read of ``requests``)."""
        pending = self._pending
        if not pending:
            return
        rows = np.frombuffer(pending, dtype=np.float64).reshape(-1, 7).copy()
        del pending[:]
        keys = rows[:, 0].astype(np.int64) * 1024 + rows[:, 1].astype(np.int64)
        unique, which = np.unique(keys, return_inverse=True)
        ms = rows[:, 2:] * 1000.0
        queue, handler, remote, send, throttle = ms[:, 0], ms[:, 1], ms[:, 2], ms[:, 3], ms[:, 4]
        parts = (queue, np.maximum(handler - remote, 0.0), remote, throttle, send,
                 queue + handler + send)
        nb = len(REQUEST_TIME_BUCKETS_MS) + 1
        k = len(unique)
        per_key = np.bincount(which, minlength=k)
        folded = [(np.bincount(which * nb + np.searchsorted(_BOUNDS, v, side="left"),
                               minlength=k * nb).reshape(k, nb),
                   np.bincount(which, weights=v, minlength=k)) for v in parts]
        for i, key in enumerate(unique.tolist()):
            api_version = (key // 1024, key % 1024)
            times = self._requests.get(api_version)
            if times is None:
                times = self._requests[api_version] = RequestTimes()
            times.count += int(per_key[i])
            for j, (counts, sums) in enumerate(folded):
                row = counts[i].tolist()
                times.counts[j] = [a + b for a, b in zip(times.counts[j], row, strict=True)]
                times.sums[j] += float(sums[i])


# --- the text format ---------------------------------------------------------------------------


def escape_label(value: str) -> str:
    """A label value as the text format wants it: backslash, quote and newline escaped."""
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def format_value(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def labels_text(labels: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
    return "{" + inner + "}" if inner else ""


class Exposition:
    """Lines of a scrape, written family by family (``family`` then its samples)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, type_: str, help_: str) -> None:
        help_ = help_.replace("\\", "\\\\").replace("\n", "\\n")
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {type_}")

    def sample(self, name: str, value: float, labels: str = "") -> None:
        """One sample; ``labels`` already rendered by ``labels_text`` (or empty)."""
        self.lines.append(f"{name}{labels} {format_value(value)}")

    def histogram(self, name: str, hist: Histogram, labels: Sequence[tuple[str, str]] = ()) -> None:
        """The ``_bucket`` (cumulative, ``le`` last), ``_sum`` and ``_count`` samples."""
        prefix = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
        prefix = prefix + "," if prefix else ""
        append = self.lines.append
        running = 0
        for bound, n in zip(hist.bounds, hist.counts, strict=False):
            running += n
            append(f'{name}_bucket{{{prefix}le="{bound!r}"}} {running}')
        running += hist.counts[-1]
        append(f'{name}_bucket{{{prefix}le="+Inf"}} {running}')
        plain = labels_text(labels)
        append(f"{name}_sum{plain} {format_value(hist.sum)}")
        append(f"{name}_count{plain} {running}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""
