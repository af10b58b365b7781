"""pylog.spark Structured Streaming reads: availableNow and processingTime triggers,
restarts from the checkpoint with no duplicates and no gaps, a broker restart in the
middle, new partitions, maxOffsetsPerTrigger, failOnDataLoss."""

from __future__ import annotations

import pytest
from _harness.spark_helpers import create_topic, produce, wait_for

from pylog.client import Admin

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODES = ["network", "direct"]


def _stream(spark, broker, mode, **options):
    r = spark.readStream.format("pylog").option("startingOffsets", "earliest")
    for k, v in options.items():
        r = r.option(k, v)
    if mode == "network":
        return r.option("kafka.bootstrap.servers", broker.bootstrap).load()
    return r.option("path", str(broker.data_dir)).load()


def _to_parquet(df, out, trigger):
    return (df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet").option("path", str(out / "rows"))
            .option("checkpointLocation", str(out / "checkpoint")).trigger(**trigger).start())


def _written(spark, out) -> list[tuple[int, int, str]]:
    if not (out / "rows" / "_spark_metadata").exists():
        return []
    df = spark.read.schema("partition INT, offset LONG, value STRING").parquet(str(out / "rows"))
    return sorted(tuple(r) for r in df.collect())


def _values(n: int, start: int, partitions: int) -> list[dict]:
    return [{"value": f"v{i}".encode(), "partition": i % partitions}
            for i in range(start, start + n)]


def _check_exactly_once(got, produced_values: set[str]) -> None:
    keys = [(p, o) for p, o, _ in got]
    assert len(keys) == len(set(keys)), "duplicates"
    for p in {p for p, _ in keys}:
        offs = sorted(o for q, o in keys if q == p)
        assert offs == list(range(offs[0], offs[0] + len(offs))), f"gap in partition {p}"
    assert {v for _, _, v in got} == produced_values


@pytest.mark.parametrize("mode", MODES)
def test_available_now_resumes_from_checkpoint(spark, new_broker, tmp_path, mode) -> None:
    b = new_broker({"auto.create.topics.enable": "false"}).start()
    topic = "s-avail"
    create_topic(b.bootstrap, topic, 2)
    produce(b.bootstrap, topic, _values(300, 0, 2))
    q = _to_parquet(_stream(spark, b, mode, subscribe=topic, maxOffsetsPerTrigger="120"),
                    tmp_path, {"availableNow": True})
    q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 300 and len(sizes) >= 3 and max(sizes) <= 120, sizes
    assert len(_written(spark, tmp_path)) == 300
    # More records, a new partition, and a broker restart before the query resumes.
    produce(b.bootstrap, topic, _values(200, 300, 2))
    with Admin({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_partitions({topic: 3})
    produce(b.bootstrap, topic, [{"value": f"v{i}".encode(), "partition": 2}
                                 for i in range(500, 550)])
    b.stop()
    b.start()
    q = _to_parquet(_stream(spark, b, mode, subscribe=topic), tmp_path, {"availableNow": True})
    q.awaitTermination(120)
    assert q.exception() is None
    got = _written(spark, tmp_path)
    assert len(got) == 550
    assert {p for p, _, _ in got} == {0, 1, 2}
    _check_exactly_once(got, {f"v{i}" for i in range(550)})


def test_processing_time_survives_a_broker_restart_and_resumes(spark, new_broker,
                                                               tmp_path) -> None:
    b = new_broker().start()
    topic = "s-live"
    create_topic(b.bootstrap, topic, 2)
    df = _stream(spark, b, "network", subscribe=topic,
                 **{"kafka.default.api.timeout.ms": "60000"})
    q = _to_parquet(df, tmp_path, {"processingTime": "1 second"})
    try:
        produce(b.bootstrap, topic, _values(100, 0, 2))
        wait_for(lambda: len(_written(spark, tmp_path)) == 100, 90, "the first 100 rows")
        b.stop()  # the query keeps running while the broker is down
        b.start()
        produce(b.bootstrap, topic, _values(100, 100, 2))
        wait_for(lambda: len(_written(spark, tmp_path)) == 200, 90,
                 "the rows produced after the restart")
        assert q.exception() is None and q.isActive
    finally:
        q.stop()
    produce(b.bootstrap, topic, _values(100, 200, 2))
    q = _to_parquet(_stream(spark, b, "network", subscribe=topic), tmp_path,
                    {"processingTime": "1 second"})
    try:
        wait_for(lambda: len(_written(spark, tmp_path)) >= 300, 90, "the resumed query")
    finally:
        q.stop()
    got = _written(spark, tmp_path)
    assert len(got) == 300
    _check_exactly_once(got, {f"v{i}" for i in range(300)})


@pytest.mark.parametrize("mode", MODES)
def test_fail_on_data_loss(spark, new_broker, tmp_path, mode) -> None:
    # The log start offset a DeleteRecords sets reaches the disk within 100 ms (direct mode
    # reads it from log-start-offset-checkpoint).
    b = new_broker({"log.flush.start.offset.checkpoint.interval.ms": "100"}).start()
    topic = "s-loss"
    create_topic(b.bootstrap, topic, 1)
    produce(b.bootstrap, topic, _values(100, 0, 1))
    q = _to_parquet(_stream(spark, b, mode, subscribe=topic), tmp_path, {"availableNow": True})
    q.awaitTermination(120)
    produce(b.bootstrap, topic, _values(100, 100, 1))
    with Admin({"bootstrap.servers": b.bootstrap}) as admin:
        assert admin.delete_records({(topic, 0): 150}) == {(topic, 0): 150}
    if mode == "direct":
        wait_for(lambda: (b.data_dir / f"{topic}-0" / "log-start-offset-checkpoint")
                 .read_text().split()[-1] == "150", 10, "the checkpointed log start")
    q = _to_parquet(_stream(spark, b, mode, subscribe=topic), tmp_path, {"availableNow": True})
    with pytest.raises(Exception, match=r"Cannot fetch offsets \[100, 150\) of s-loss-0.*"
                       r"the log now starts at 150.*failOnDataLoss"):
        q.awaitTermination(120)
    q = _to_parquet(_stream(spark, b, mode, subscribe=topic, failOnDataLoss="false"),
                    tmp_path, {"availableNow": True})
    q.awaitTermination(120)
    assert q.exception() is None
    got = _written(spark, tmp_path)
    assert [o for _, o, _ in got] == list(range(100)) + list(range(150, 200))
