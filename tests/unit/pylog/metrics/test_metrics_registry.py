"""pylog.metrics.registry: the histograms, the request and topic counters and the hand-written
text format, read back with prometheus_client's parser (a malformed line fails)."""

from __future__ import annotations

import math
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pylog.metrics.registry import (
    REQUEST_TIME_BUCKETS_MS,
    REQUEST_TIME_PARTS,
    BrokerMetrics,
    Exposition,
    Histogram,
    LockedHistogram,
    escape_label,
    format_value,
    labels_text,
    merge,
)


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_histogram_buckets_are_upper_inclusive() -> None:
    h = Histogram((1.0, 5.0))
    for v in (0.0, 1.0, 1.0001, 5.0, 5.5, 1e9):
        h.observe(v)
    assert h.counts == [2, 2, 2]  # <=1, (1, 5], above 5
    assert h.count == 6
    assert h.sum == pytest.approx(0.0 + 1.0 + 1.0001 + 5.0 + 5.5 + 1e9)


def test_histogram_renders_cumulative_buckets_sum_and_count() -> None:
    h = Histogram((1.0, 5.0))
    for v in (0.5, 2.0, 3.0, 7.0):
        h.observe(v)
    out = Exposition()
    out.family("t_ms", "histogram", "a test")
    out.histogram("t_ms", h, (("request", "Produce"),))
    fam = _families(out.text())["t_ms"]
    got = {(s.name, s.labels.get("le")): s.value for s in fam.samples}
    assert got[("t_ms_bucket", "1.0")] == 1
    assert got[("t_ms_bucket", "5.0")] == 3
    assert got[("t_ms_bucket", "+Inf")] == 4
    assert got[("t_ms_count", None)] == 4
    assert got[("t_ms_sum", None)] == 12.5
    assert all(s.labels["request"] == "Produce" for s in fam.samples)


def test_label_values_are_escaped_and_parse_back() -> None:
    nasty = 'a"b\\c\nd'
    out = Exposition()
    out.family("x", "gauge", "help with \\ and\nnewline")
    out.sample("x", 3, labels_text((("topic", nasty), ("partition", "0"))))
    (sample,) = _families(out.text())["x"].samples
    assert sample.labels == {"topic": nasty, "partition": "0"} and sample.value == 3
    assert escape_label("plain.topic-1") == "plain.topic-1"


def test_values_format_as_the_text_format_wants() -> None:
    assert format_value(7) == "7"
    assert format_value(0.25) == "0.25"
    assert format_value(float("inf")) == "+Inf"
    assert format_value(float("-inf")) == "-Inf"
    assert format_value(float("nan")) == "NaN"
    out = Exposition()
    out.family("g", "gauge", "h")
    out.sample("g", float("inf"))
    (sample,) = _families(out.text())["g"].samples
    assert math.isinf(sample.value)


def test_record_request_splits_the_time_as_kafka_does() -> None:
    m = BrokerMetrics()
    m.record_request(1, 12, queue_s=0.002, handler_s=0.5, remote_s=0.45, send_s=0.003)
    m.record_request(1, 12, queue_s=0.0, handler_s=0.001, remote_s=0.0, send_s=0.0)
    m.record_request(1, 11, queue_s=0.0, handler_s=0.001, remote_s=0.0, send_s=0.0)
    m.record_request(0, 9, queue_s=0.0, handler_s=0.001, remote_s=0.0, send_s=0.0)
    assert {k: t.count for k, t in m.requests.items()} == {(1, 12): 2, (1, 11): 1, (0, 9): 1}
    parts = dict(zip((p for p, _ in REQUEST_TIME_PARTS), m.requests[(1, 12)].histograms(),
                     strict=True))
    assert parts["requestqueuetimems"].sum == pytest.approx(2.0)
    assert parts["localtimems"].sum == pytest.approx(50.0 + 1.0)
    assert parts["remotetimems"].sum == pytest.approx(450.0)
    assert parts["throttletimems"].sum == 0 and parts["throttletimems"].counts[0] == 2
    assert parts["responsesendtimems"].sum == pytest.approx(3.0)
    assert parts["totaltimems"].sum == pytest.approx(505.0 + 1.0)
    assert all(h.count == 2 for h in parts.values())
    # 450 ms remote: in the (250, 500] bucket; 1 ms local: in (0.5, 1].
    bounds = parts["remotetimems"].bounds
    assert parts["remotetimems"].counts[bounds.index(500.0)] == 1
    assert parts["localtimems"].counts[bounds.index(1.0)] == 1


def test_an_apis_versions_merge_into_its_histograms() -> None:
    m = BrokerMetrics()
    m.record_request(1, 12, 0.0, 0.001, 0.0, 0.0)
    m.record_request(1, 11, 0.0, 0.003, 0.0, 0.0)
    total = merge(t.histograms()[5] for (api, _v), t in m.requests.items() if api == 1)
    assert total.count == 2 and total.sum == pytest.approx(4.0)


def test_topic_stats_are_kept_per_topic() -> None:
    m = BrokerMetrics()
    m.topic("a").messages_in += 3
    m.topic("a").messages_in += 2
    m.topic("b").bytes_in += 10
    assert m.topic("a").messages_in == 5 and m.topic("b").bytes_in == 10
    m.untracked.failed_produce_requests += 1
    assert m.all_topics().messages_in == 5 and m.all_topics().failed_produce_requests == 1
    m.forget_topic("a")  # deleted: the broker-wide figures keep its counts
    assert "a" not in m.topics and m.all_topics().messages_in == 5
    assert m.all_topics().bytes_in == 10


def test_locked_histogram_loses_no_observation_across_threads() -> None:
    h = LockedHistogram((1.0,))

    def work() -> None:
        for _ in range(20000):
            h.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    copy = h.copy()
    assert copy.counts == [80000, 0] and copy.sum == 40000.0


def test_folding_in_batches_matches_counting_each_request() -> None:
    """Requests are folded into the histograms in batches with numpy; the result equals
    counting each one with bisect, across several batches and API versions."""
    import bisect
    import random

    rng = random.Random(7)
    m = BrokerMetrics()
    expected: dict[tuple[int, int], list[list[int]]] = {}
    sums: dict[tuple[int, int], list[float]] = {}
    buckets = REQUEST_TIME_BUCKETS_MS

    for _ in range(10_000):
        key = (rng.choice((0, 1, 3, 18)), rng.randrange(0, 13))
        q, h, s = (rng.expovariate(1 / 0.002) for _ in range(3))
        r = rng.random() * h if key[0] == 1 else 0.0
        t = float(rng.randrange(0, 3000)) if key[0] == 0 and rng.random() < 0.3 else 0.0
        m.record_request(*key, q, h, r, s, t)
        parts = (q * 1000, max(h * 1000 - r * 1000, 0.0), r * 1000, t, s * 1000,
                 q * 1000 + h * 1000 + s * 1000)
        counts = expected.setdefault(key, [[0] * (len(buckets) + 1) for _ in parts])
        total = sums.setdefault(key, [0.0] * len(parts))
        for j, v in enumerate(parts):
            counts[j][bisect.bisect_left(buckets, v)] += 1
            total[j] += v
    assert set(m.requests) == set(expected)
    for key, times in m.requests.items():
        assert times.count == sum(expected[key][0])
        assert times.counts == expected[key]
        assert times.sums == pytest.approx(sums[key])
