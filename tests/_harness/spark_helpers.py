"""Helpers of the PySpark tests (tests/integration/spark): produce with confluent-kafka,
read with the pylog data source, compare rows."""

from __future__ import annotations

import time
from typing import Any


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    from pylog.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or None)])


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> list[Any]:
    """Produce with confluent-kafka; returns the delivered messages (offsets, timestamps)."""
    from confluent_kafka import Producer

    delivered: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append(msg)

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for r in records:
        p.produce(topic, on_delivery=on_delivery, **r)
        p.poll(0)
    assert p.flush(30) == 0
    return delivered


def pylog_reader(spark: Any, mode: str, broker: Any, **options: str) -> Any:
    """``spark.read.format("pylog")`` in network mode (the broker) or direct mode (its data
    directory)."""
    r = spark.read.format("pylog")
    for k, v in options.items():
        r = r.option(k, v)
    if mode == "network":
        return r.option("kafka.bootstrap.servers", broker.bootstrap).load()
    return r.load(str(broker.data_dir))


def rows(df: Any, headers: bool = False) -> list[tuple[Any, ...]]:
    """(topic, partition, offset, key, value, timestamp ms, timestampType[, headers]) sorted."""
    from pyspark.sql import functions as F

    cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("key"), F.col("value"),
            F.unix_millis("timestamp").alias("ts"), F.col("timestampType")]
    if headers:
        cols.append(F.col("headers"))
    out = []
    for r in df.select(*cols).collect():
        t = tuple(r)
        if headers:
            t = t[:-1] + (None if r["headers"] is None
                          else [(h["key"], h["value"]) for h in r["headers"]],)
        out.append(t)
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def wait_for(pred: Any, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
