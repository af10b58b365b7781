"""Direct mode while the broker appends: every read is a complete prefix of each partition
(no torn batch, no gap), segments roll under the reader, and once the producer's records
are acknowledged a direct read sees every one of them; a streaming query in direct mode
follows the appends."""

from __future__ import annotations

import threading
import time

import pytest
from _harness.spark_helpers import create_topic, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_direct_batch_reads_while_the_broker_appends(spark, new_broker, tmp_path) -> None:
    from confluent_kafka import Producer

    b = new_broker().start()
    topic = "live-direct"
    # Small segments: they roll (and their indexes are trimmed) while Spark reads.
    create_topic(b.bootstrap, topic, 2, **{"segment.bytes": "65536",
                                           "segment.index.bytes": "4096"})
    stop = threading.Event()
    produced = [0, 0]
    errors: list[str] = []

    def write() -> None:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "batch.size": 16384,
                      "enable.idempotence": True})
        seq = [0, 0]
        while not stop.is_set():
            for part in (0, 1):
                for _ in range(50):
                    p.produce(topic, value=f"{part}:{seq[part]}".encode() + b"." * 80,
                              partition=part,
                              on_delivery=lambda e, m: errors.append(str(e)) if e else None)
                    seq[part] += 1
            p.poll(0)
            time.sleep(0.01)
        assert p.flush(30) == 0
        produced[:] = seq

    t = threading.Thread(target=write)
    t.start()
    try:
        seen = [0, 0]
        for _ in range(4):
            time.sleep(1.0)
            got = (spark.read.format("pylog").option("subscribe", topic).load(str(b.data_dir))
                   .selectExpr("partition", "offset", "CAST(value AS STRING) AS v").collect())
            for part in (0, 1):
                mine = sorted((r["offset"], r["v"]) for r in got if r["partition"] == part)
                assert [o for o, _ in mine] == list(range(len(mine))), "not a prefix"
                bad = [(o, v[:12]) for o, v in mine if not v.startswith(f"{part}:{o}.")]
                assert not bad, (len(mine), bad[:10], errors[:3], len(errors))
                assert len(mine) >= seen[part]
                seen[part] = len(mine)
        assert min(seen) > 0
    finally:
        stop.set()
        t.join()
    assert not errors
    segments = [f for f in (b.data_dir / f"{topic}-0").iterdir() if f.suffix == ".log"]
    assert len(segments) > 2
    # Every acknowledged record is on disk, readable with no broker involved.
    b.stop()
    df = spark.read.format("pylog").option("subscribe", topic).load(str(b.data_dir))
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {0: produced[0], 1: produced[1]}


def test_direct_streaming_follows_the_appends(spark, new_broker, tmp_path) -> None:
    from confluent_kafka import Producer

    b = new_broker().start()
    topic = "live-direct-stream"
    create_topic(b.bootstrap, topic, 1)
    q = (spark.readStream.format("pylog").option("subscribe", topic)
         .option("startingOffsets", "earliest").load(str(b.data_dir))
         .selectExpr("offset", "CAST(value AS STRING) AS v").writeStream.format("memory")
         .queryName("live_direct").trigger(processingTime="500 milliseconds").start())
    try:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 1})
        for i in range(5):
            for j in range(40):
                p.produce(topic, value=f"{i * 40 + j}".encode())
            assert p.flush(30) == 0
            wait_for(lambda n=(i + 1) * 40: spark.sql("SELECT count(*) FROM live_direct")
                     .collect()[0][0] >= n, 60, "the streamed rows")
    finally:
        q.stop()
    got = sorted((r["offset"], r["v"]) for r in spark.sql("SELECT * FROM live_direct").collect())
    assert got == [(i, str(i)) for i in range(200)]
