"""pylog.spark batch reads, network and direct mode, against topics confluent-kafka wrote:
byte-exact rows with offsets, timestamps and headers; every offset option; minPartitions;
errors a user can act on."""

from __future__ import annotations

import json
import random

import pytest
from _harness.spark_helpers import create_topic, produce, pylog_reader, rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODES = ["network", "direct"]
T0 = 1_700_000_000_000


def _records(n: int, partitions: int, seed: int = 7) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 9 == 4 else f"user-{i % 13}".encode()
        if i % 17 == 6:
            value = None
        elif i % 11 == 2:
            value = b""
        else:
            value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
        headers = [("origin", b"test"), ("seq", str(i).encode())] if i % 4 == 0 else None
        if i % 23 == 5:
            headers = [("none", None)]
        out.append({"key": key, "value": value, "headers": headers,
                    "timestamp": T0 + 10 * i, "partition": i % partitions})
    return out


@pytest.fixture(scope="module")
def clicks(broker):
    """A 3-partition topic written by confluent-kafka in zstd-compressed batches, plus the
    rows Spark's Kafka source would give for it."""
    name = "spark-clicks"
    create_topic(broker.bootstrap, name, 3)
    records = _records(600, 3)
    delivered = produce(broker.bootstrap, name, records, **{"compression.type": "zstd"})
    for p in range(3):
        assert sorted(m.offset() for m in delivered if m.partition() == p) == list(range(200))
    expected = []
    next_offset = [0, 0, 0]
    for r in records:  # one producer, in order: partition p's records get offsets 0, 1, ...
        p = r["partition"]
        expected.append((name, p, next_offset[p], r["key"], r["value"], r["timestamp"], 0,
                         r["headers"]))
        next_offset[p] += 1
    expected.sort(key=lambda t: (t[1], t[2]))
    return name, expected


@pytest.mark.parametrize("mode", MODES)
def test_batch_read_is_byte_exact(spark, broker, clicks, mode) -> None:
    name, expected = clicks
    df = pylog_reader(spark, mode, broker, subscribe=name, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert rows(df, headers=True) == expected
    # Without headers: Spark's seven columns, the same rows.
    plain = pylog_reader(spark, mode, broker, subscribe=name)
    assert len(plain.columns) == 7
    assert rows(plain) == [t[:7] for t in expected]


@pytest.mark.parametrize("mode", MODES)
def test_log_append_time_topic(spark, broker, mode) -> None:
    name = f"spark-append-time-{mode}"
    create_topic(broker.bootstrap, name, 1, **{"message.timestamp.type": "LogAppendTime"})
    delivered = produce(broker.bootstrap, name, [{"value": b"x%d" % i, "timestamp": 5}
                                                 for i in range(20)])
    got = rows(pylog_reader(spark, mode, broker, subscribe=name))
    assert [(r[2], r[5], r[6]) for r in got] == [
        (m.offset(), m.timestamp()[1], 1) for m in delivered]
    assert all(r[5] > T0 for r in got)


def _json(per_partition: dict[int, int]) -> str:
    return json.dumps({"spark-clicks": {str(p): v for p, v in per_partition.items()}})


OFFSET_CASES = [
    # (options, wanted offsets per partition as (start, end))
    ({}, {0: (0, 200), 1: (0, 200), 2: (0, 200)}),
    ({"startingOffsets": '{"spark-clicks":{"0":10,"1":-2,"2":199}}',
      "endingOffsets": '{"spark-clicks":{"0":20,"1":5,"2":-1}}'},
     {0: (10, 20), 1: (0, 5), 2: (199, 200)}),
    ({"startingTimestamp": str(T0 + 10 * 300)}, {0: (100, 200), 1: (100, 200), 2: (100, 200)}),
    ({"startingTimestamp": str(T0 + 10 * 300 + 1), "endingTimestamp": str(T0 + 10 * 330)},
     {0: (101, 110), 1: (100, 110), 2: (100, 110)}),
    ({"startingOffsetsByTimestamp": _json({0: T0 + 30, 1: 0, 2: T0 + 10**6}),
      "startingOffsetsByTimestampStrategy": "latest"},
     {0: (1, 200), 1: (0, 200), 2: (200, 200)}),
    ({"endingOffsetsByTimestamp": _json({0: T0 + 30, 1: T0 + 10**6, 2: T0})},
     {0: (0, 1), 1: (0, 200), 2: (0, 0)}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", range(len(OFFSET_CASES)))
def test_offset_options(spark, broker, clicks, mode, case) -> None:
    name, expected = clicks
    options, wanted = OFFSET_CASES[case]
    got = rows(pylog_reader(spark, mode, broker, subscribe=name, **options))
    want = [t[:7] for t in expected if wanted[t[1]][0] <= t[2] < wanted[t[1]][1]]
    assert got == want


@pytest.mark.parametrize("mode", MODES)
def test_min_partitions_split_and_other_strategies(spark, broker, clicks, mode) -> None:
    name, expected = clicks
    df = pylog_reader(spark, mode, broker, subscribe=name, minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert rows(df) == [t[:7] for t in expected]
    df = pylog_reader(spark, mode, broker, assign='{"spark-clicks":[2,0]}',
                      maxRecordsPerPartition="64")
    assert df.rdd.getNumPartitions() == 8  # 2 partitions x ceil(200 / 64)
    assert rows(df) == [t[:7] for t in expected if t[1] in (0, 2)]
    df = pylog_reader(spark, mode, broker, subscribePattern="spark-cl.*")
    assert rows(df) == [t[:7] for t in expected]


def _error(spark, broker, mode, match, **options) -> None:
    with pytest.raises(Exception, match=match) as info:
        pylog_reader(spark, mode, broker, **options).collect()
    # Surfaced through Spark's own exception types.
    assert type(info.value).__module__.startswith(("pyspark", "py4j"))


@pytest.mark.parametrize("mode", MODES)
def test_errors_a_user_can_act_on(spark, broker, clicks, mode) -> None:
    where = f"at {broker.bootstrap}" if mode == "network" else "in data directory"
    _error(spark, broker, mode, f"topic 'no-such-topic' \\(option 'subscribe'\\) does not "
           f"exist {where}", subscribe="no-such-topic")
    _error(spark, broker, mode, r'Expected e.g. \{"topicA":\{"0":23,"1":-1\}', subscribe="x",
           startingOffsets="{oops")
    _error(spark, broker, mode, "Kafka option 'auto.offset.reset' is not supported",
           subscribe="x", **{"kafka.auto.offset.reset": "earliest"})
    _error(spark, broker, mode, "partition 9 of topic 'spark-clicks'",
           assign='{"spark-clicks":[9]}')


def test_unreachable_broker_and_unreadable_path(spark, tmp_path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
          .option("subscribe", "x").option("kafka.default.api.timeout.ms", "1500").load())
    with pytest.raises(Exception, match=f"no broker of kafka.bootstrap.servers=127.0.0.1:{port} "
                       "answered within 1500 ms"):
        df.collect()
    with pytest.raises(Exception, match="does not exist: give the data directory"):
        spark.read.format("pylog").option("subscribe", "x").load(str(tmp_path / "nope")).collect()
    with pytest.raises(Exception, match="exclude each other"):
        (spark.read.format("pylog").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("subscribe", "x").load(str(tmp_path))).collect()
