"""PySpark fixtures: one ``local[2]`` SparkSession for the whole session, with the ``pylog``
data source registered, and helpers to produce with confluent-kafka and read back.

Spark needs a Java 17+ runtime (tools/install-sysdeps.sh installs one). Its Python workers
run this interpreter (``PYSPARK_PYTHON``) and bind to 127.0.0.1 (``SPARK_LOCAL_IP``).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Iterator

import pytest

if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.fail("PySpark needs a Java 17+ runtime on PATH: run tools/install-sysdeps.sh",
                pytrace=False)

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from pyspark.sql import SparkSession

import pylog.spark  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pylog-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(session)
    yield session
    session.stop()
