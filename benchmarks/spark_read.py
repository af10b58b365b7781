"""pylog.spark read throughput against what a user would pick instead, in one run.

Data: ``--records`` records (default 5M) of ``--value-bytes`` (100) in ``--partitions`` (4)
partitions, written in Kafka's format with logcore (uncompressed batches of about 16 KiB,
as a producer with Kafka's ``batch.size`` writes them) into a broker's data directory;
then a broker serves that directory.

Every read runs the same query over all rows, ``count(*), sum(length(value)),
max(offset)`` (so values and offsets are really moved into Spark), in a ``local[N]``
session, ``--repeat`` times; the best time counts (the machine is shared). Rows/s of:

- ``direct``: ``spark.read.format("pylog").load(data_dir)`` (segment files, logcore, Arrow);
- ``network``: the same through the broker (``kafka.bootstrap.servers``);
- ``parquet``: Spark reading the same rows from Parquet (written once from the topic);
- ``naive``: a Python data source yielding one tuple per record (``logcore`` records:
  the obvious way to write a source);
- ``ceiling``: a Python data source yielding prebuilt Arrow batches of the same schema
  and size without doing any work: the most the Python data source API passes.

Streaming: a second topic of ``--trigger-batches`` x ``--trigger-records`` records read
in that many micro-batches (``maxOffsetsPerTrigger``, availableNow, direct mode, noop
sink); the median trigger time is the per-trigger overhead.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/spark_read.py            # 5M x 100 B
    .venv/bin/python benchmarks/spark_read.py --records 200000 --repeat 1       # quick look

Prints one JSON object (and a Markdown table on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

QUERY = ["count(*) AS n", "sum(length(value)) AS bytes", "max(offset) AS last"]
TOPIC = "bench"
TRIGGER_TOPIC = "bench-trigger"


def write_topic(data_dir: pathlib.Path, records: int, partitions: int, value_bytes: int,
                topic: str = TOPIC) -> None:
    """The topic's partitions written with logcore as a producer's batches would be."""
    import logcore

    per_batch = max(1, 16384 // (value_bytes + 10))
    value = (b"0123456789abcdefghijklmnopqrstuvwxyz" * (value_bytes // 36 + 1))[:value_bytes]
    ts = int(time.time() * 1000) - 3_600_000
    for p in range(partitions):
        n = records // partitions + (1 if p < records % partitions else 0)
        with logcore.Log(data_dir / f"{topic}-{p}") as log:
            done = 0
            while done < n:
                k = min(per_batch, n - done)
                b = logcore.BatchBuilder()
                b.append_many([value] * k, timestamps_ms=[ts + done + i for i in range(k)])
                log.append(b.build())
                done += k


def start_broker(data_dir: pathlib.Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = data_dir.parent / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pylog", "broker", "--ready-file", str(ready),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={data_dir}"],
        stdout=open(data_dir.parent / "broker.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().strip():
            return proc, ready.read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the broker did not start: " + (data_dir.parent / "broker.log").read_text())


def _sources(records: int, partitions: int, value_bytes: int, data_dir: str) -> tuple[Any, Any]:
    """The two reference Python data sources (defined here so that Spark pickles them)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from pylog.spark.datasource import kafka_schema

    schema = kafka_schema(False)

    class NaiveReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(partitions)]

        def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
            import datetime

            import logcore

            p = partition.value
            ro = logcore.ReadOnlyLog(os.path.join(data_dir, f"{TOPIC}-{p}"))
            pos, utc = 0, datetime.timezone.utc
            while pos < ro.log_end_offset:
                region = ro.read(pos, 8 << 20)
                for batch in logcore.iter_batches(region.read()):
                    for r in batch:
                        yield (r.key, r.value, TOPIC, p, r.offset,
                               datetime.datetime.fromtimestamp(r.timestamp / 1000, utc), 0)
                pos = region.last_offset + 1

    class NaiveSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_naive"

        def schema(self) -> Any:
            return schema

        def reader(self, schema: Any) -> DataSourceReader:
            return NaiveReader()

    class CeilingReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(partitions)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            from pylog.spark import arrow

            n = records // partitions + (1 if partition.value < records % partitions else 0)
            chunk = 16384 // (value_bytes + 10) * 512  # rows of one 8 MiB direct read
            values = pa.array([b"v" * value_bytes] * chunk, pa.binary())
            batch = pa.RecordBatch.from_arrays(
                [pa.nulls(chunk, pa.binary()), values, pa.repeat(TOPIC, chunk),
                 pa.repeat(pa.scalar(partition.value, pa.int32()), chunk),
                 pa.array(range(chunk), pa.int64()),
                 pa.array([0] * chunk, pa.timestamp("us", tz="UTC")),
                 pa.array([0] * chunk, pa.int32())], schema=arrow.schema(False))
            done = 0
            while done < n:
                k = min(chunk, n - done)
                yield batch if k == chunk else batch.slice(0, k)
                done += k

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_ceiling"

        def schema(self) -> Any:
            return schema

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader()

    return NaiveSource, CeilingSource


def timed(df: Any, repeat: int, expect: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        row = df.selectExpr(*QUERY).collect()[0]
        best = min(best, time.perf_counter() - t)
        if row["n"] != expect:
            raise SystemExit(f"read {row['n']} rows, expected {expect}")
    return best


def trigger_overhead(spark: Any, data_dir: str, per_trigger: int, batches: int,
                     ckpt: str) -> dict[str, float]:
    q = (spark.readStream.format("pylog").option("subscribe", TRIGGER_TOPIC)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger))
         .load(data_dir).writeStream.format("noop").option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination(600)
    times = [p["durationMs"]["triggerExecution"] for p in q.recentProgress
             if p["numInputRows"]][1:batches + 1]  # the first one also plans the query
    return {"triggers": len(times), "records_per_trigger": per_trigger,
            "median_trigger_ms": statistics.median(times) if times else float("nan"),
            "min_trigger_ms": min(times) if times else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma-separated: direct,network,parquet,naive,"
                                               "ceiling,streaming")
    ap.add_argument("--trigger-records", type=int, default=10_000)
    ap.add_argument("--trigger-batches", type=int, default=20)
    ap.add_argument("--workdir", default=None, help="keep data here (default: a temp dir)")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="pylog-spark-bench-"))
    data = work / "data"
    if not data.exists():
        data.mkdir(parents=True)
        t = time.perf_counter()
        write_topic(data, args.records, args.partitions, args.value_bytes)
        write_topic(data, args.trigger_records * args.trigger_batches, args.partitions,
                    args.value_bytes, TRIGGER_TOPIC)
        print(f"wrote {args.records} records in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    broker, bootstrap = start_broker(data)

    from pyspark.sql import SparkSession

    import pylog.spark

    spark = (SparkSession.builder.master(args.master).appName("pylog-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    naive, ceiling = _sources(args.records, args.partitions, args.value_bytes, str(data))
    spark.dataSource.register(naive)
    spark.dataSource.register(ceiling)

    results: dict[str, Any] = {"records": args.records, "value_bytes": args.value_bytes,
                               "partitions": args.partitions, "master": args.master,
                               "repeat": args.repeat, "cpus": os.cpu_count()}
    n = args.records
    reads = {
        "direct": lambda: spark.read.format("pylog").option("subscribe", TOPIC).load(str(data)),
        "network": lambda: (spark.read.format("pylog").option("subscribe", TOPIC)
                            .option("kafka.bootstrap.servers", bootstrap).load()),
        "parquet": lambda: spark.read.parquet(str(work / "parquet")),
        "naive": lambda: spark.read.format("bench_naive").load(),
        "ceiling": lambda: spark.read.format("bench_ceiling").load(),
    }
    try:
        if "parquet" not in skip and not (work / "parquet").exists():
            reads["direct"]().write.parquet(str(work / "parquet"))
        for name, make in reads.items():
            if name in skip:
                continue
            secs = timed(make(), args.repeat, n)
            results[name] = {"seconds": round(secs, 3), "rows_per_s": round(n / secs)}
            print(f"{name}: {n / secs / 1e6:.2f}M rows/s ({secs:.2f} s)", file=sys.stderr)
        if "streaming" not in skip:
            results["streaming"] = trigger_overhead(spark, str(data), args.trigger_records,
                                                    args.trigger_batches, str(work / "ckpt"))
    finally:
        spark.stop()
        broker.terminate()
        broker.wait(30)
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if "ceiling" in results:
        for name in ("direct", "network"):
            if name in results:
                results[name]["x_ceiling"] = round(
                    results[name]["rows_per_s"] / results["ceiling"]["rows_per_s"], 2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
