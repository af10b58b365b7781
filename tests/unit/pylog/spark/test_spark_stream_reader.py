"""pylog.spark.reader.StreamReader's planning with a fake log (pyspark imported, no JVM):
read limits, minOffsetsPerTrigger, AvailableNow, data loss, pickling."""

from __future__ import annotations

import pickle

import pytest

pytest.importorskip("pyspark")
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from pylog.spark import reader as reader_mod  # noqa: E402
from pylog.spark.offsets import DataLoss  # noqa: E402
from pylog.spark.options import parse_source_options  # noqa: E402


class FakeLookup:
    where = "in a fake"

    def __init__(self, parts):
        self.parts = parts  # {(topic, partition): (earliest, latest)}
        self.closed = False

    def topics(self):
        out = {}
        for t, p in self.parts:
            out.setdefault(t, []).append(p)
        return out

    def earliest(self, tps):
        return {tp: self.parts[tp][0] for tp in tps}

    def latest(self, tps):
        return {tp: self.parts[tp][1] for tp in tps}

    def for_times(self, wanted):
        return {tp: None for tp in wanted}

    def close(self):
        self.closed = True


def make(parts, **options):
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                                 "startingOffsets": "earliest", **options}, streaming=True)
    r = reader_mod.StreamReader(opts)
    r._lookup = FakeLookup(parts)
    return r


def test_initial_and_latest_offsets() -> None:
    r = make({("a", 0): (5, 100), ("a", 1): (0, 10)})
    start = r.initialOffset()
    assert start == {"a": {"0": 5, "1": 0}}
    assert r.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 100, "1": 10}}
    assert r.getDefaultReadLimit() == ReadAllAvailable()


def test_max_offsets_per_trigger_and_new_partitions() -> None:
    r = make({("a", 0): (0, 1000), ("a", 1): (0, 10), ("a", 2): (40, 50)},
             maxOffsetsPerTrigger="100")
    assert r.getDefaultReadLimit() == ReadMaxRows(100)
    end = r.latestOffset({"a": {"0": 0, "1": 0}}, ReadMaxRows(100))
    # a-2 is new: it starts at its earliest offset (40) and shares the limit.
    assert end == {"a": {"0": 98, "1": 1, "2": 41}}
    # The engine may still ask for everything (Trigger.Once): the limit is not applied.
    assert r.latestOffset({"a": {"0": 0, "1": 0}}, ReadAllAvailable()) == {
        "a": {"0": 1000, "1": 10, "2": 50}}


def test_min_offsets_per_trigger_waits_for_data_or_the_delay(monkeypatch) -> None:
    r = make({("a", 0): (0, 30)}, minOffsetsPerTrigger="50", maxOffsetsPerTrigger="100",
             maxTriggerDelay="10s")
    clock = [1000.0]
    monkeypatch.setattr(reader_mod.time, "monotonic", lambda: clock[0])
    r._last_trigger = clock[0]
    start = {"a": {"0": 0}}
    assert r.latestOffset(start, ReadMaxRows(100)) == start  # 30 < 50: skip this trigger
    clock[0] += 11  # maxTriggerDelay passed: read what is there
    assert r.latestOffset(start, ReadMaxRows(100)) == {"a": {"0": 30}}


def test_available_now_stops_at_the_target() -> None:
    r = make({("a", 0): (0, 100)})
    r.prepareForTriggerAvailableNow()
    r._lookup.parts[("a", 0)] = (0, 500)  # appended after the query started
    r._lookup.parts[("a", 1)] = (0, 9)    # and a new partition
    assert r.latestOffset({"a": {"0": 0}}, ReadMaxRows(60)) == {"a": {"0": 60}}
    assert r.latestOffset({"a": {"0": 60}}, ReadMaxRows(60)) == {"a": {"0": 100}}
    assert r.latestOffset({"a": {"0": 100}}, ReadMaxRows(60)) == {"a": {"0": 100}}


def test_partitions_and_data_loss() -> None:
    r = make({("a", 0): (0, 100), ("a", 1): (0, 20)}, minPartitions="3")
    parts = r.partitions({"a": {"0": 10}}, {"a": {"0": 70, "1": 20}})
    ranges = sorted((p.value.partition, p.value.from_offset, p.value.until_offset)
                    for p in parts)
    # a-1 is new (read from 0); a-0's 60 offsets are split to reach about 3 tasks.
    assert ranges == [(0, 10, 40), (0, 40, 70), (1, 0, 20)]
    with pytest.raises(DataLoss, match="Added partition a-1 starts from 3 instead of 0"):
        make({("a", 0): (0, 100), ("a", 1): (3, 20)}).partitions(
            {"a": {"0": 10}}, {"a": {"0": 70, "1": 20}})
    lenient = make({("a", 0): (0, 100)}, failOnDataLoss="false")
    got = lenient.partitions({"a": {"0": 10, "1": 5}}, {"a": {"0": 70}})  # a-1 went away
    assert [(p.value.partition, p.value.from_offset) for p in got] == [(0, 10)]


def test_pickled_reader_drops_its_lookup() -> None:
    r = make({("a", 0): (0, 1)})
    copy = pickle.loads(pickle.dumps(r))
    assert copy._lookup is None and copy.options == r.options
    r.stop()
    assert r._lookup is None
