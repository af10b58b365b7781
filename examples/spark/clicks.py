"""A click-stream pipeline on pylog and PySpark: copy it and change what you need.

Three parts, each a subcommand:

- ``produce``: a producer writing click events (``{"user": ..., "page": ...}``, keyed by
  user, the record timestamp the click's time) to the topic ``clicks``;
- ``stream``: a Structured Streaming job reading ``clicks`` from pylog, counting clicks per
  page and one-minute window (event time, two-minute watermark), writing the counts back
  to pylog (topic ``clicks-per-page``, key ``page@window``, JSON value; the last record of
  a key is the current count) and the finished windows to Parquet;
- ``backfill``: a batch job computing the same counts from the broker's data directory in
  direct mode (segment files read with logcore, no broker needed), written to Parquet.

``demo`` runs the three in turn and checks that the streamed counts equal the backfilled
ones. With a broker running (``make run``: 127.0.0.1:9092, data in ./pylog-data)::

    .venv/bin/python examples/spark/clicks.py demo

Spark needs a Java 17+ runtime; pyspark and pyarrow come with ``pip install
'pylog-kafka[spark]'`` (``make run`` installs them too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any

PAGES = ["/", "/search", "/cart", "/checkout", "/help", "/account"]
WINDOW = "1 minute"
WATERMARK = "2 minutes"


def produce(bootstrap: str, topic: str, events: int, minutes: int, seed: int = 1) -> None:
    """``events`` clicks spread evenly over the last ``minutes`` minutes, in time order."""
    from pylog.client import Admin, NewTopic, Producer
    from pylog.errors import TopicAlreadyExistsError

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        try:
            admin.create_topics([NewTopic(topic, num_partitions=2)])
        except TopicAlreadyExistsError:
            pass
    rnd = random.Random(seed)
    start = int(time.time() * 1000) - minutes * 60_000
    step = minutes * 60_000 / events
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as p:
        for i in range(events):
            user = f"user-{rnd.randrange(500)}"
            page = rnd.choice(PAGES)
            p.send(topic, json.dumps({"user": user, "page": page}).encode(), key=user.encode(),
                   timestamp_ms=int(start + i * step))
        p.flush(timeout=60)
    print(f"produced {events} clicks to {topic}")


def _session(app: str) -> Any:
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SystemExit("Spark needs a Java 17+ runtime: sudo apt-get install "
                         "openjdk-17-jre-headless (or bash tools/install-sysdeps.sh)")
    # Spark's Python workers must be this interpreter (it has pylog, pyspark, pyarrow),
    # not whatever python3 comes first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pylog.spark

    spark = (SparkSession.builder.appName(app).master(os.environ.get("SPARK_MASTER", "local[2]"))
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    return spark


def _per_page(clicks: Any) -> Any:
    """Clicks per page and window, from rows of the pylog source."""
    from pyspark.sql import functions as F

    page = F.get_json_object(F.col("value").cast("string"), "$.page")
    return clicks.select(page.alias("page"), F.col("timestamp"))


def stream(spark: Any, bootstrap: str, topic: str, out_topic: str, out: str,
           available_now: bool) -> None:
    """The streaming job: counts to ``out_topic`` and to Parquet.

    The topic gets every count at every trigger (complete mode; the last record of a key
    is its current count: Spark's Python data source sinks take append and complete, not
    update); Parquet gets a window once the watermark has passed it (append mode).
    """
    from pyspark.sql import functions as F

    clicks = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "5000").load())
    counts = (_per_page(clicks).withWatermark("timestamp", WATERMARK)
              .groupBy(F.window("timestamp", WINDOW), "page").count())
    trigger = {"availableNow": True} if available_now else {"processingTime": "5 seconds"}
    to_topic = (counts.select(
        F.concat_ws("@", "page", F.col("window.start").cast("string")).alias("key"),
        F.to_json(F.struct(F.col("page"), F.col("window.start").alias("window"),
                           F.col("count"))).alias("value"))
        .writeStream.format("pylog").outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
        .option("checkpointLocation", os.path.join(out, "checkpoints", "topic"))
        .trigger(**trigger).start())
    to_parquet = (counts.select("page", F.col("window.start").alias("window"), "count")
                  .writeStream.format("parquet").outputMode("append")
                  .option("path", os.path.join(out, "stream"))
                  .option("checkpointLocation", os.path.join(out, "checkpoints", "parquet"))
                  .trigger(**trigger).start())
    if available_now:
        to_topic.awaitTermination()
        to_parquet.awaitTermination()
        print(f"stream: counts in topic {out_topic} and {os.path.join(out, 'stream')}")
    else:
        print("stream: running; Ctrl-C stops it")
        try:
            spark.streams.awaitAnyTermination()
        except KeyboardInterrupt:
            to_topic.stop()
            to_parquet.stop()


def backfill(spark: Any, data_dir: str, topic: str, out: str) -> Any:
    """The batch job: every click in the data directory, read in direct mode."""
    from pyspark.sql import functions as F

    clicks = spark.read.format("pylog").option("subscribe", topic).load(data_dir)
    counts = (_per_page(clicks).groupBy(F.window("timestamp", WINDOW), "page").count()
              .select("page", F.col("window.start").alias("window"), "count"))
    counts.write.mode("overwrite").parquet(os.path.join(out, "backfill"))
    print(f"backfill: {counts.count()} (page, window) counts in {os.path.join(out, 'backfill')}")
    return counts


def check(spark: Any, bootstrap: str, out_topic: str, out: str) -> None:
    """The streamed counts (last update per key in the topic, and the Parquet windows)
    equal the backfilled ones."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    full = {(r["page"], r["window"]): r["count"]
            for r in spark.read.parquet(os.path.join(out, "backfill")).collect()}
    latest = (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", out_topic).load()
              .withColumn("n", F.row_number().over(
                  Window.partitionBy("key").orderBy(F.col("partition"), F.desc("offset"))))
              .where("n = 1").select(F.from_json(F.col("value").cast("string"),
                                                 "page string, window timestamp, count long")
                                     .alias("v")).select("v.*"))
    streamed = {(r["page"], r["window"]): r["count"] for r in latest.collect()}
    if streamed != full:
        raise SystemExit(f"streamed counts differ from the backfill: {len(streamed)} vs "
                         f"{len(full)} windows")
    finalized = spark.read.parquet(os.path.join(out, "stream")).collect()
    wrong = [r for r in finalized if full.get((r["page"], r["window"])) != r["count"]]
    if not finalized or wrong:
        raise SystemExit(f"Parquet windows differ from the backfill: {wrong[:3]}")
    print(f"check: {len(full)} (page, window) counts agree: topic {out_topic}, "
          f"{len(finalized)} finalized windows in Parquet, and the backfill")


def _fresh(args: argparse.Namespace) -> None:
    """The demo compares a stream with a backfill of the same clicks: it needs an empty
    topic and no earlier checkpoints (older clicks would arrive behind the watermark)."""
    from pylog.client import Admin

    if os.path.exists(args.out):
        raise SystemExit(f"{args.out} exists (an earlier run): remove it, or pass --out DIR")
    with Admin({"bootstrap.servers": args.bootstrap}) as admin:
        if args.topic in admin.list_topics():
            raise SystemExit(f"topic {args.topic} exists (an earlier run): pass --topic NAME "
                             "and --out-topic NAME, or start from an empty broker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["produce", "stream", "backfill", "demo"],
                        help="produce clicks, run the streaming job, run the backfill, or all "
                             "three and check that they agree")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092",
                        help="the broker (default %(default)s)")
    parser.add_argument("--data-dir", default="./pylog-data",
                        help="the broker's log.dirs, for the backfill (default %(default)s)")
    parser.add_argument("--out", default="./clicks-out",
                        help="Parquet output and checkpoints (default %(default)s)")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--out-topic", default="clicks-per-page")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--minutes", type=int, default=30,
                        help="the clicks' times span this many minutes up to now")
    parser.add_argument("--follow", action="store_true",
                        help="stream: keep running (5 s triggers) instead of reading what "
                             "is there and stopping")
    args = parser.parse_args(argv)
    if args.command == "demo":
        _fresh(args)
    if args.command in ("produce", "demo"):
        produce(args.bootstrap, args.topic, args.events, args.minutes)
    if args.command == "produce":
        return 0
    spark = _session(f"pylog-clicks-{args.command}")
    try:
        if args.command in ("stream", "demo"):
            stream(spark, args.bootstrap, args.topic, args.out_topic, args.out,
                   available_now=not args.follow)
        if args.command in ("backfill", "demo"):
            backfill(spark, args.data_dir, args.topic, args.out)
        if args.command == "demo":
            check(spark, args.bootstrap, args.out_topic, args.out)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
