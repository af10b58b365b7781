"""pylog.spark: a PySpark data source and sink named ``pylog``, Spark's Kafka connector in
Python (no JVM jar), plus direct reads of a data directory with no broker.

Usage::

    import pylog.spark
    pylog.spark.register(spark)

    # Through a broker, with Spark's Kafka options and columns:
    df = (spark.read.format("pylog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "clicks")
          .load())
    # Directly from a broker's data directory (log.dirs), read with logcore:
    df = spark.read.format("pylog").option("subscribe", "clicks").load("/var/lib/pylog")

    query = (spark.readStream.format("pylog")
             .option("kafka.bootstrap.servers", "127.0.0.1:9092")
             .option("subscribe", "clicks").load()
             .writeStream.format("pylog")
             .option("kafka.bootstrap.servers", "127.0.0.1:9092")
             .option("topic", "clicks-copy")
             .option("checkpointLocation", "/tmp/ckpt").start())

pyspark (4.0 or later) and pyarrow are the optional extra ``pip install 'pylog-kafka[spark]'``;
importing ``pylog`` or this package does not import them (``register`` does). See
docs/spark.md for the options, the semantics and the numbers.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "FORMAT"]

#: The name the source and sink are registered under.
FORMAT = "pylog"


def register(spark: Any) -> None:
    """Register the ``pylog`` data source (reads, streaming reads, writes) with ``spark``.

    Args:
        spark: a ``pyspark.sql.SparkSession``.

    Raises:
        ImportError: pyspark or pyarrow is missing (install ``pylog-kafka[spark]``).
    """
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"pylog.spark needs pyspark (4.0 or later) and pyarrow: {exc}; install them with "
            "pip install 'pylog-kafka[spark]'") from exc
    from pylog.spark.datasource import PylogDataSource

    spark.dataSource.register(PylogDataSource)
