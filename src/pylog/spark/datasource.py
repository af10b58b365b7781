"""``PylogDataSource``: the Python data source Spark knows as ``pylog``.

Spark 4's ``pyspark.sql.datasource`` API: Spark pickles this class and its options to the
Python processes it starts (the planner, the streaming source runner, the executors'
workers), which call ``schema``, ``reader``/``streamReader`` or
``writer``/``streamWriter``. Options are checked there, so a wrong option fails the query
with Spark's exception (``AnalysisException`` / ``PythonException``) carrying our message.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pylog.spark.options import SparkOptionError, parse_sink_options, parse_source_options

__all__ = ["PylogDataSource", "kafka_schema"]


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter.kafkaSchema``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def _include_headers(options: Any) -> bool:
    value = next((v for k, v in options.items() if str(k).lower() == "includeheaders"), None)
    return str(value).strip().lower() == "true" if value is not None else False


def _overwrite_refused(overwrite: bool) -> None:
    if overwrite:
        raise SparkOptionError("Save mode Overwrite not allowed for Kafka. Allowed save modes "
                               "are Append and ErrorIfExists (default).")


class PylogDataSource(DataSource):
    """Kafka topics, through a broker or from a data directory, as Spark's Kafka source
    and sink see them (``spark.read.format("pylog")``, ``readStream``, ``write``,
    ``writeStream``). See docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self) -> StructType:
        return kafka_schema(_include_headers(self.options))

    def _check_schema(self, schema: StructType) -> None:
        wanted = kafka_schema(_include_headers(self.options))
        if schema is not None and schema != wanted:
            raise SparkOptionError("Kafka source has a fixed schema and cannot be set with a "
                                   f"custom one (expected {wanted.simpleString()})")

    def reader(self, schema: StructType) -> Any:
        from pylog.spark.reader import BatchReader

        self._check_schema(schema)
        return BatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> Any:
        from pylog.spark.reader import StreamReader

        self._check_schema(schema)
        return StreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from pylog.spark.writer import BatchWriter

        _overwrite_refused(overwrite)
        return BatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from pylog.spark.writer import StreamWriter

        return StreamWriter(parse_sink_options(self.options), schema)
