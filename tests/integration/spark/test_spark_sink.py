"""pylog.spark sink (batch and streaming) read back by kcat; Spark's column rules; a task
whose records are not acknowledged fails the job."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from _harness.spark_helpers import create_topic, produce, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed "
                                "(tools/install-sysdeps.sh)")


def kcat_read(bootstrap: str, topic: str, n: int) -> list[dict]:
    """Every record of ``topic`` as kcat (librdkafka) sees it."""
    fmt = '{"p":%p,"o":%o,"k":"%k","v":"%s","h":"%h","kl":%K,"vl":%S}\n'
    out = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-q", "-f", fmt, "-c", str(n)], check=True, capture_output=True,
                         timeout=60).stdout.decode()
    return sorted((json.loads(line) for line in out.splitlines()), key=lambda r: (r["p"], r["o"]))


def _writer(df, broker, **options):
    # Python data sources take Append and Overwrite only (not Spark's default ErrorIfExists).
    w = df.write.format("pylog").mode("append").option("kafka.bootstrap.servers",
                                                         broker.bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    return w


@needs_kcat
def test_batch_write_read_back_by_kcat(spark, broker) -> None:
    topic = "sink-batch"
    create_topic(broker.bootstrap, topic, 3)
    data = [(f"k{i % 5}" if i % 7 else None, f"value {i}", i % 3,
             [(f"h{i}", f"x{i}".encode())] if i % 2 else None) for i in range(90)]
    df = spark.createDataFrame(
        data, "key string, value string, partition int, "
              "headers array<struct<key: string, value: binary>>")
    _writer(df, broker, topic=topic).save()
    got = kcat_read(broker.bootstrap, topic, 90)
    assert len(got) == 90
    by_value = {r["v"]: r for r in got}
    for key, value, partition, headers in data:
        r = by_value[value]
        assert r["p"] == partition
        assert (r["k"], r["kl"]) == (key, len(key)) if key is not None else r["kl"] == -1
        assert r["h"] == ("" if headers is None else f"{headers[0][0]}={headers[0][1].decode()}")
    for p in range(3):
        assert [r["o"] for r in got if r["p"] == p] == list(range(30))


@needs_kcat
def test_topic_column_and_option(spark, broker) -> None:
    create_topic(broker.bootstrap, "sink-col-a", 1)
    create_topic(broker.bootstrap, "sink-col-b", 1)
    df = spark.createDataFrame([("sink-col-a", b"1"), ("sink-col-b", b"2"), ("sink-col-a", b"3")],
                               "topic string, value binary")
    _writer(df, broker).save()
    assert sorted(r["v"] for r in kcat_read(broker.bootstrap, "sink-col-a", 2)) == ["1", "3"]
    assert [r["v"] for r in kcat_read(broker.bootstrap, "sink-col-b", 1)] == ["2"]
    create_topic(broker.bootstrap, "sink-col-c", 1)
    _writer(df, broker, topic="sink-col-c").save()  # the option overrides the column
    assert sorted(r["v"] for r in kcat_read(broker.bootstrap, "sink-col-c", 3)) == ["1", "2", "3"]


def test_spark_column_rules(spark, broker) -> None:
    no_value = spark.createDataFrame([("t", "k")], "topic string, key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        _writer(no_value, broker).save()
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is "
                       "present. Use the topic option for setting a topic."):
        _writer(no_topic, broker).save()
    bad_part = spark.createDataFrame([("v", "1")], "value string, partition string")
    with pytest.raises(Exception, match="partition attribute unsupported type string. "
                       "partition must be a\\(n\\) int"):
        _writer(bad_part, broker, topic="x").save()
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        _writer(no_topic, broker, topic="x").mode("overwrite").save()
    with pytest.raises(Exception, match="Kafka option 'key.serializer' is not supported"):
        _writer(no_topic, broker, topic="x", **{"kafka.key.serializer": "x"}).save()


def test_records_not_acknowledged_fail_the_job(spark, broker) -> None:
    topic = "sink-too-large"
    create_topic(broker.bootstrap, topic, 1, **{"max.message.bytes": "2000"})
    values = [(f"small {i}",) for i in range(20)] + [("x" * 5000,)]
    df = spark.createDataFrame(values, "value string").coalesce(1)
    with pytest.raises(Exception, match=r"\d+ of 21 records were not acknowledged.*"
                       r"MESSAGE_TOO_LARGE.*at-least-once"):
        _writer(df, broker, topic=topic).save()


@needs_kcat
def test_streaming_round_trip(spark, broker, tmp_path) -> None:
    src, dst = "sink-stream-in", "sink-stream-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [{"key": f"k{i}".encode(), "value": f"v{i}".encode(),
                                     "headers": [("n", str(i).encode())]} for i in range(100)])
    q = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest")
         .option("includeHeaders", "true").load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition", "headers")
         .writeStream.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="1 second").start())
    try:
        produce(broker.bootstrap, src, [{"key": f"k{i}".encode(), "value": f"v{i}".encode(),
                                         "headers": [("n", str(i).encode())]}
                                        for i in range(100, 150)])
        wait_for(lambda: len(kcat_read(broker.bootstrap, dst, 150)) == 150, 90,
                 "150 records in the output topic")
    finally:
        q.stop()
    got = kcat_read(broker.bootstrap, dst, 150)
    assert sorted(r["v"] for r in got) == sorted(f"V{i}" for i in range(150))
    assert all(r["h"] == f"n={r['k'][1:]}" for r in got)


@needs_kcat
def test_timestamp_and_null_value_columns(spark, broker) -> None:
    topic = "sink-timestamps"
    create_topic(broker.bootstrap, topic, 1)
    df = spark.createDataFrame([("a", "2024-01-02 03:04:05.678"), (None, "2024-01-02 03:04:06")],
                               "value string, ts string").selectExpr(
        "value", "to_utc_timestamp(CAST(ts AS TIMESTAMP), current_timezone()) AS timestamp")
    _writer(df.coalesce(1), broker, topic=topic).save()
    out = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning",
                          "-e", "-q", "-f", "%T %S\n", "-c", "2"], check=True,
                         capture_output=True, timeout=60).stdout.decode().split()
    assert out == ["1704164645678", "1", "1704164646000", "-1"]  # -1: a null value
