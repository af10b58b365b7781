"""pylog.spark.offsets: resolving offset options, splitting ranges, rate limits (no Spark)."""

from __future__ import annotations

import random

import pytest

from pylog.spark.offsets import OffsetRange, check_transition, plan_ranges, rate_limit, resolve
from pylog.spark.options import OffsetSpec, SparkOptionError


class FakeLog:
    """A Lookup over in-memory partitions: {tp: (earliest, latest, [(offset, ts), ...])}."""

    def __init__(self, parts):
        self.parts = parts
        self.asked: list[str] = []

    def earliest(self, tps):
        self.asked.append("earliest")
        return {tp: self.parts[tp][0] for tp in tps}

    def latest(self, tps):
        self.asked.append("latest")
        return {tp: self.parts[tp][1] for tp in tps}

    def for_times(self, wanted):
        self.asked.append("times")
        out = {}
        for tp, ts in wanted.items():
            out[tp] = next((o for o, t in self.parts[tp][2] if t >= ts), None)
        return out


A0, A1 = ("a", 0), ("a", 1)
LOG = FakeLog({A0: (5, 50, [(5, 100), (20, 200), (49, 300)]),
               A1: (0, 10, [(0, 150), (9, 160)])})


def test_resolve_earliest_latest_and_json() -> None:
    assert resolve(OffsetSpec("earliest"), [A0, A1], LOG, starting=True) == {A0: 5, A1: 0}
    assert resolve(OffsetSpec("latest"), [A0, A1], LOG, starting=True) == {A0: 50, A1: 10}
    spec = OffsetSpec("offsets", per_partition={A0: -2, A1: -1})
    assert resolve(spec, [A0, A1], LOG, starting=True) == {A0: 5, A1: 10}
    spec = OffsetSpec("offsets", per_partition={A0: 7, A1: 3})
    assert resolve(spec, [A1, A0], LOG, starting=False) == {A0: 7, A1: 3}


def test_json_must_name_every_partition() -> None:
    spec = OffsetSpec("offsets", per_partition={A0: 7})
    with pytest.raises(SparkOptionError, match=r"(?s)you must specify all TopicPartitions.*"
                       r"Specified: \['a-0'\] Assigned: \['a-0', 'a-1'\]"):
        resolve(spec, [A0, A1], LOG, starting=True)


def test_resolve_timestamps() -> None:
    spec = OffsetSpec("timestamp", timestamp=150)
    assert resolve(spec, [A0, A1], LOG, starting=True) == {A0: 20, A1: 0}
    spec = OffsetSpec("timestamps", per_partition={A0: 300, A1: 155})
    assert resolve(spec, [A0, A1], LOG, starting=True) == {A0: 49, A1: 9}
    late = OffsetSpec("timestamp", timestamp=250)
    with pytest.raises(SparkOptionError, match="No offset matched from request of "
                       "topic-partition a-1 and timestamp 250"):
        resolve(late, [A0, A1], LOG, starting=True)
    assert resolve(late, [A0, A1], LOG, starting=True, strategy_on_no_match="latest") == {
        A0: 49, A1: 10}
    assert resolve(late, [A0, A1], LOG, starting=False) == {A0: 49, A1: 10}  # ends: latest


def test_one_range_per_partition_by_default() -> None:
    ranges = plan_ranges({A0: 5, A1: 0, ("b", 0): 3}, {A0: 50, A1: 0, ("b", 0): 9})
    assert ranges == [OffsetRange("a", 0, 5, 50), OffsetRange("b", 0, 3, 9)]  # empty dropped
    assert plan_ranges({A0: 5}, {A0: 50, A1: 9}) == [OffsetRange("a", 0, 5, 50)]


def test_min_partitions_splits_large_ranges_in_proportion() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite cases.
    start = {("t1", 1): 1, ("t2", 1): 1}
    end = {("t1", 1): 1000, ("t2", 1): 2}
    assert plan_ranges(start, end, min_partitions=3) == [
        OffsetRange("t1", 1, 1, 500), OffsetRange("t1", 1, 500, 1000),
        OffsetRange("t2", 1, 1, 2)]
    assert plan_ranges({("t", 0): 1}, {("t", 0): 5}, min_partitions=3) == [
        OffsetRange("t", 0, 1, 2), OffsetRange("t", 0, 2, 3), OffsetRange("t", 0, 3, 5)]
    # Enough ranges already: no split.
    assert len(plan_ranges({A0: 0, A1: 0}, {A0: 10**6, A1: 10}, min_partitions=2)) == 2
    # Even split of two equal ranges.
    got = plan_ranges({A0: 0, A1: 0}, {A0: 100, A1: 100}, min_partitions=4)
    assert [(r.tp, r.from_offset, r.until_offset) for r in got] == [
        (A0, 0, 50), (A0, 50, 100), (A1, 0, 50), (A1, 50, 100)]


@pytest.mark.parametrize("seed", range(20))
def test_split_ranges_cover_exactly_the_input(seed: int) -> None:
    rnd = random.Random(seed)
    start = {("t", p): rnd.randrange(0, 1000) for p in range(rnd.randrange(1, 6))}
    end = {tp: s + rnd.choice([0, 1, 2, 10, 1000, 12345]) for tp, s in start.items()}
    got = plan_ranges(start, end, min_partitions=rnd.randrange(1, 40),
                      max_records_per_partition=rnd.choice([None, 1, 7, 500]))
    for tp in start:
        pieces = sorted((r.from_offset, r.until_offset) for r in got if r.tp == tp)
        covered = [o for a, b in pieces for o in range(a, b)]
        assert covered == list(range(start[tp], end[tp])), (seed, tp)


def test_max_records_per_partition() -> None:
    got = plan_ranges({A0: 0}, {A0: 10}, max_records_per_partition=4)
    assert [(r.from_offset, r.until_offset) for r in got] == [(0, 3), (3, 6), (6, 10)]


def test_rate_limit_is_proportional_and_never_starves() -> None:
    start = {A0: 0, A1: 0, ("b", 0): 100}
    latest = {A0: 1000, A1: 10, ("b", 0): 100}
    assert rate_limit(100, start, latest) == {A0: 99, A1: 1, ("b", 0): 100}
    assert rate_limit(10**9, start, latest) == latest  # limit above the backlog
    assert rate_limit(5, {A0: 3}, {A0: 3}) == {A0: 3}  # nothing new
    assert rate_limit(5, {A0: 0}, {A0: 10, A1: 4}) == {A0: 5, A1: 4}  # unknown start: no limit


def test_transition_findings() -> None:
    t = check_transition({A0: 5, A1: 9, ("gone", 0): 3}, {A0: 8, A1: 4, ("new", 0): 6},
                         {("new", 0): 2})
    assert t.ranges == [OffsetRange("a", 0, 5, 8), OffsetRange("new", 0, 2, 6)]
    assert any("gone-0 is gone" in m for m in t.losses)
    assert any("Partition a-1's offset was changed from 9 to 4" in m for m in t.losses)
    assert any("Added partition new-0 starts from 2 instead of 0" in m for m in t.losses)
    t = check_transition({A0: 5}, {A0: 5, A1: 3}, {A1: 0})
    assert t.ranges == [OffsetRange("a", 1, 0, 3)] and t.losses == []


def test_select_partitions() -> None:
    from pylog.spark.offsets import UnknownTopicError, select_partitions

    topics = {"clicks": [0, 1], "clicks-eu": [0], "__consumer_offsets": [0, 1], "views": [0]}
    assert select_partitions("subscribe", topics, subscribe=["views", "clicks"],
                             streaming=False, where="here") == [
        ("clicks", 0), ("clicks", 1), ("views", 0)]
    with pytest.raises(UnknownTopicError, match="topic 'nope' \\(option 'subscribe'\\) does "
                       "not exist at 1.2.3.4:9: create it"):
        select_partitions("subscribe", topics, subscribe=["nope"], streaming=False,
                          where="at 1.2.3.4:9")
    assert select_partitions("subscribe", topics, subscribe=["nope"], streaming=True,
                             where="") == []
    assert select_partitions("subscribePattern", topics, pattern="clicks.*|__.*",
                             streaming=True, where="") == [
        ("clicks", 0), ("clicks", 1), ("clicks-eu", 0)]
    assert select_partitions("subscribePattern", topics, pattern="click", streaming=True,
                             where="") == []  # whole names only
    assert select_partitions("assign", topics, assign={"clicks": [1]}, streaming=False,
                             where="") == [("clicks", 1)]
    with pytest.raises(UnknownTopicError, match="partition 5 of topic 'clicks'.*partitions "
                       "\\[0, 1\\]"):
        select_partitions("assign", topics, assign={"clicks": [5]}, streaming=True, where="")
