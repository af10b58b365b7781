"""pylog.console.history: rates and lag from consecutive snapshots; pylog.console.charts."""

from __future__ import annotations

from pylog.client import TopicPartition
from pylog.console.charts import HEIGHT, line_chart
from pylog.console.history import History, Snapshot
from pylog.console.metrics import TopicCounters

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
LEADERS = {A0: 1, A1: 2, B0: 1}


def snap(mono: float, ends: dict, committed: dict, counters: TopicCounters | None = None
         ) -> Snapshot:
    return Snapshot(mono, int(mono * 1000), {}, ends, LEADERS, committed, counters)


def test_rates_from_offsets_and_lag_from_commits() -> None:
    h = History()
    h.add(snap(10.0, {A0: 100, A1: 50, B0: 0}, {"g": {A0: 90, A1: 50}}))
    assert h.points("lag:g") == [(10000, 10.0)]
    assert h.latest("produce:a") is None  # a rate needs two samples
    h.add(snap(12.0, {A0: 120, A1: 60, B0: 4}, {"g": {A0: 110, A1: 50}}))
    assert h.latest("produce:a") == 15.0  # (20 + 10) / 2 s
    assert h.latest("produce:b") == 2.0
    assert h.latest("consume:a") == 10.0  # 20 / 2 s
    assert h.latest("consume:b") == 0.0
    assert h.latest("produce:*") == 17.0
    assert h.latest("broker:1") == 12.0  # a-0 and b-0
    assert h.latest("broker:2") == 5.0
    assert h.latest("lag:g") == 20.0  # (120 - 110) + (60 - 50)
    assert h.rates("a") == {"produce": 15.0, "consume": 10.0, "bytes_in": None,
                            "bytes_out": None}


def test_a_recreated_topic_and_a_reset_group_do_not_count_negative() -> None:
    h = History()
    h.add(snap(0.0, {A0: 100}, {"g": {A0: 100}}))
    h.add(snap(1.0, {A0: 5}, {"g": {A0: 0}}))
    assert h.latest("produce:a") == 0.0
    assert h.latest("consume:a") == 0.0
    assert h.latest("lag:g") == 5.0


def test_metrics_counters_win_over_offsets_when_present() -> None:
    h = History()
    c0 = TopicCounters({"a": 1000.0}, {"a": 1e6}, {"a": 5e5}, {"a": 4096.0})
    c1 = TopicCounters({"a": 1100.0}, {"a": 1.5e6}, {"a": 6e5}, {"a": 8192.0})
    h.add(snap(0.0, {A0: 0}, {}, c0))
    h.add(snap(2.0, {A0: 0}, {}, c1))  # offsets did not move; the counters did
    assert h.latest("produce:a") == 50.0
    assert h.latest("bytes_in:a") == 250000.0
    assert h.latest("bytes_out:a") == 50000.0
    assert h.log_size == {"a": 8192.0}


def test_series_of_deleted_topics_and_groups_go() -> None:
    h = History()
    h.add(snap(0.0, {A0: 0, B0: 0}, {"g": {A0: 0}, "h": {B0: 0}}))
    h.add(snap(1.0, {A0: 1, B0: 1}, {"g": {A0: 0}, "h": {B0: 0}}))
    assert {"produce:b", "consume:b", "lag:h"} <= set(h.series)
    h.add(snap(2.0, {A0: 2}, {"g": {A0: 1}}))  # topic b and group h deleted
    assert not {"produce:b", "consume:b", "lag:h"} & set(h.series)
    assert {"produce:a", "produce:*", "lag:g", "broker:1"} <= set(h.series)


def test_series_keep_their_last_points() -> None:
    h = History(keep=3)
    for i in range(6):
        h.add(snap(float(i), {A0: i * 10}, {}))
    assert [v for _, v in h.points("produce:a")] == [10.0, 10.0, 10.0]
    assert [t for t, _ in h.points("produce:a")] == [3000, 4000, 5000]


def test_line_chart_scales_into_the_view_box() -> None:
    chart = line_chart([(0, 0.0), (1000, 5.0), (2000, 10.0)], "t", "u")
    xs_ys = [tuple(map(float, p.split(","))) for p in chart["points"].split()]
    assert xs_ys[0][1] == HEIGHT - 4 and xs_ys[-1][1] == 4.0
    assert xs_ys[0][0] < xs_ys[1][0] < xs_ys[2][0]
    assert chart["last"] == 10.0 and chart["max"] == 10.0 and chart["span_s"] == 2
    flat = line_chart([(0, 0.0), (1000, 0.0)], "t", "u")
    assert flat["points"].split()[0].endswith(f",{HEIGHT - 4:.1f}")
    assert line_chart([], "t", "u")["empty"]
