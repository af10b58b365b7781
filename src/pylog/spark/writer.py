"""The ``pylog`` sink: ``df.write`` and ``df.writeStream`` into a topic, through the broker.

Columns as Spark's Kafka sink takes them (``KafkaWriter``): ``value`` (required, string or
binary; null writes a tombstone), ``key`` (string or binary, optional), ``topic`` (string;
required unless the ``topic`` option is set, which overrides it), ``partition`` (int,
optional: else the producer's partitioner, murmur2 of the key as Kafka's), ``headers``
(``array<struct<key string, value binary>>``, optional), ``timestamp`` (timestamp,
optional: else the producer's clock). Other columns are ignored.

Each Spark task writes its rows with one ``pylog.client.Producer`` (idempotent: a batch
the broker already has is not written twice when the producer retries it), waits until
every record is acknowledged (``acks=all``) and fails if any is not, so a task counts as
done only when all its records are in the topic. Spark then retries the failed task,
whose records may already be partly written: the sink is **at-least-once**, as Spark's
Kafka sink states ("duplicates possible on retry"). Exactly-once through transactions (a
task's records in one transaction, committed on Spark's commit, aborted on abort) waits
for transactions in the broker.

Thread-safety: a writer object is used by one task.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from pylog.spark.options import SinkOptions, SparkOptionError

try:  # pyspark >= 4.1: Arrow batches for streaming writes too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamBase
except ImportError:  # pragma: no cover - depends on the installed pyspark
    _StreamBase = DataSourceStreamWriter  # type: ignore[misc,assignment]

log = logging.getLogger("pylog.spark")

__all__ = ["BatchWriter", "StreamWriter", "WriteResult", "validate_sink_schema"]

_HEADERS = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


class SinkSchemaError(SparkOptionError):
    """The DataFrame cannot be written to a topic (Spark's AnalysisException)."""


def _check(schema: StructType, name: str, desired: list[DataType], missing: str | None) -> bool:
    field = next((f for f in schema.fields if f.name == name), None)
    if field is None:
        if missing is not None:
            raise SinkSchemaError(missing)
        return False
    if not any(_same(field.dataType, d) for d in desired):
        raise SinkSchemaError(
            f"{name} attribute unsupported type {field.dataType.simpleString()}. {name} must "
            f"be a(n) {' or '.join(d.simpleString() for d in desired)}")
    return True


def _same(a: DataType, b: DataType) -> bool:
    """Spark's sameType: equal ignoring nullability."""
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same(a.elementType, b.elementType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=True))
    return type(a) is type(b)


def validate_sink_schema(schema: StructType, topic: str | None) -> None:
    """Spark's ``KafkaWriter.validateQuery``, with its messages.

    Raises:
        SinkSchemaError: a missing ``value`` (or ``topic`` without the option), or a column
            of the wrong type.
    """
    if topic is None:
        _check(schema, "topic", [StringType()],
               "topic option required when no 'topic' attribute is present. Use the topic "
               "option for setting a topic.")
    _check(schema, "key", [StringType(), BinaryType()], None)
    _check(schema, "value", [StringType(), BinaryType()], "Required attribute 'value' not found")
    _check(schema, "headers", [_HEADERS], None)
    _check(schema, "partition", [IntegerType()], None)
    _check(schema, "timestamp", [TimestampType()], None)


@dataclasses.dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote: records acknowledged, per topic-partition."""

    records: int
    partitions: dict[str, int]


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _rows(items: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Rows as dicts, from Arrow record batches or Spark Rows."""
    for item in items:
        if hasattr(item, "to_pylist"):  # pyarrow.RecordBatch
            yield from item.to_pylist()
        else:
            yield item.asDict()


def _headers(v: Any) -> list[tuple[str, bytes | None]] | None:
    if not v:
        return None
    out = []
    for h in v:
        key, value = (h["key"], h["value"]) if isinstance(h, dict) else (h.key, h.value)
        out.append((key, _bytes(value)))
    return out


def write_rows(options: SinkOptions, items: Iterable[Any]) -> WriteResult:
    """Send every row with one idempotent producer and wait for every acknowledgement.

    Raises:
        RuntimeError: some records were not written (the first error named); the task fails
            and Spark retries it.
    """
    from pylog.client import Producer

    lock = threading.Lock()
    failed: list[BaseException] = []
    acked: dict[str, int] = {}
    sent = 0

    def on_delivery(err: BaseException | None, meta: Any) -> None:
        with lock:
            if err is not None:
                failed.append(err)
            else:
                key = f"{meta.topic}-{meta.partition}"
                acked[key] = acked.get(key, 0) + 1

    conf = options.producer_config()
    conf.setdefault("client.id", "pylog-spark-sink")
    producer = Producer(conf)
    try:
        for row in _rows(items):
            topic = options.topic or row.get("topic")
            if topic is None:
                raise SinkSchemaError("null topic present in the data. Use the topic option "
                                      "for setting a default topic.")
            ts = row.get("timestamp")
            producer.send(topic, _bytes(row.get("value")), key=_bytes(row.get("key")),
                          headers=_headers(row.get("headers")), partition=row.get("partition"),
                          timestamp_ms=int(ts.timestamp() * 1000) if ts is not None else None,
                          on_delivery=on_delivery)
            sent += 1
        producer.flush(timeout=conf.get("delivery.timeout.ms", 120_000) / 1000 + 5)
    finally:
        producer.close()
    with lock:
        written = sum(acked.values())
        if failed or written != sent:
            first = failed[0] if failed else None
            raise RuntimeError(
                f"pylog sink: {sent - written} of {sent} records were not acknowledged "
                f"(first error: {first!r}); the task fails and Spark retries it (records "
                "already written may then be written again: the sink is at-least-once)")
    return WriteResult(written, dict(acked))


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("pylog")``: every task's rows, acknowledged, or the job fails."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(getattr(m, "records", 0) for m in messages)
        log.info("pylog sink: %d records written by %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = sum(getattr(m, "records", 0) for m in messages)
        log.warning("pylog sink: the write failed; %d records written by tasks that succeeded "
                    "stay in the topic (no transactions: at-least-once)", done)


class StreamWriter(_StreamBase):  # type: ignore[misc,valid-type]
    """``df.writeStream.format("pylog")``: each micro-batch's rows, acknowledged."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(getattr(m, "records", 0) for m in messages)
        log.info("pylog sink: micro-batch %d: %d records written", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = sum(getattr(m, "records", 0) for m in messages)
        log.warning("pylog sink: micro-batch %d failed; %d records written by tasks that "
                    "succeeded stay in the topic (at-least-once)", batchId, done)
