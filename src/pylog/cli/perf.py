"""`pylog perf produce|consume`: throughput and latency of pylog's client against a broker,
after Kafka's ``kafka-producer-perf-test`` and ``kafka-consumer-perf-test`` (their options,
and their output lines, so that figures compare).

``perf produce`` sends ``--num-records`` records of ``--record-size`` bytes (uppercase
letters, 64 seeded random payloads in turn; or payloads from ``--payload-file``) as fast
as it can or paced to ``--throughput`` records/s. Latency is a record's time from
``send()`` to its acknowledgement. Every ``--reporting-interval`` it prints Kafka's window
line (rewritten in place on a terminal)::

    52118 records sent, 10423.6 records/sec (0.99 MB/sec), 3.1 ms avg latency, 8.0 ms max latency.

and at the end Kafka's summary, with latencies to 0.01 ms (Kafka prints whole ms)::

    100000 records sent, 10388.9 records/sec (0.99 MB/sec), 2.93 ms avg latency, 9.00 ms max latency, 2.71 ms 50th, 5.02 ms 95th, 7.40 ms 99th, 8.80 ms 99.9th.

``perf consume`` reads ``--messages`` records from the start of the topic (or the end,
``--from-latest``) with ``poll()`` (or ``poll_columns()``, ``--poll-columns``) and prints
Kafka's CSV (``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec``); bytes are key
plus value bytes, as Kafka counts them. ``--show-detailed-stats`` prints a row per interval;
otherwise a live line goes to stderr when it is a terminal.

``--json`` prints one JSON object instead (for benchmark harnesses; progress lines then
go to stderr): records, bytes, seconds, records_per_sec, mb_per_sec, latency_ms
(avg/max/p50/p95/p99/p999; for consume, end-to-end: receive time minus the record's
timestamp, meaningful while a producer writes) and the client settings used.

Exit codes as every pylog command (``pylog.cli._common``); a run that delivered or
received fewer records than asked exits 1 (Kafka's tools warn and exit 0).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from array import array
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pylog.cli._common import CliError, parse_properties, read_properties_file, run_command

__all__ = ["add_parser", "run"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "-b", default=None, metavar="HOST:PORT",
                   help=f"broker to connect to (default: bootstrap.servers from the properties, "
                   f"else {DEFAULT_BOOTSTRAP})")


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    perf = sub.add_parser("perf", help="producer and consumer throughput and latency tests",
                          description="Throughput and latency of pylog's client, as Kafka's "
                          "kafka-producer-perf-test and kafka-consumer-perf-test.")
    psub = perf.add_subparsers(dest="perf_command", metavar="ACTION", required=True)

    p = psub.add_parser("produce", help="send records as fast as possible or at a paced rate",
                        description="Send --num-records records and report records/s, MB/s "
                        "and send-to-acknowledgement latency (as kafka-producer-perf-test).")
    p.add_argument("--topic", required=True, metavar="TOPIC", help="produce to this topic")
    p.add_argument("--num-records", type=int, required=True, metavar="N",
                   help="number of records to produce")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="BYTES", help="value size in bytes")
    payload.add_argument("--payload-file", metavar="FILE",
                         help="UTF-8 file of payloads, one picked at random per record")
    p.add_argument("--payload-delimiter", default="\\n", metavar="TEXT",
                   help="separates payloads in --payload-file (default: newline)")
    p.add_argument("--throughput", type=float, default=-1, metavar="RECORDS_PER_SEC",
                   help="pace sends to about this many records/s (-1, the default: no limit)")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
                   help="producer settings by Kafka name (win over --producer.config)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="a properties file of producer settings")
    p.add_argument("--acks", choices=["all", "-1", "0", "1"],
                   help="acks (wins over the properties; default: the producer's, all)")
    p.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                   help="compression.type (wins over the properties; default none)")
    _common(p)

    c = psub.add_parser("consume", help="read records as fast as possible",
                        description="Read --messages records and report records/s and MB/s "
                        "(as kafka-consumer-perf-test).")
    c.add_argument("--topic", required=True, metavar="TOPIC", help="consume from this topic")
    c.add_argument("--messages", "--num-records", dest="messages", type=int, required=True,
                   metavar="N", help="number of records to consume")
    c.add_argument("--group", metavar="GROUP",
                   help="consume in this group (subscribe); default: assign every partition")
    c.add_argument("--from-latest", action="store_true",
                   help="start at the end of the log rather than its start")
    c.add_argument("--fetch-size", type=int, default=1024 * 1024, metavar="BYTES",
                   help="max.partition.fetch.bytes (default 1048576)")
    c.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                   help="give up after this long without a record (default 10000)")
    c.add_argument("--poll-columns", action="store_true",
                   help="use poll_columns() (numpy columns) instead of poll()")
    c.add_argument("--consumer-props", nargs="+", default=[], metavar="KEY=VALUE",
                   help="consumer settings by Kafka name (win over --consumer.config)")
    c.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="a properties file of consumer settings")
    c.add_argument("--show-detailed-stats", action="store_true",
                   help="print a CSV row per reporting interval")
    c.add_argument("--hide-header", action="store_true", help="do not print the CSV header")
    c.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f", metavar="STRFTIME",
                   help="format of the time columns (default %%Y-%%m-%%d %%H:%%M:%%S:%%f)")
    _common(c)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                   help="progress every MS milliseconds (default 5000)")
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON object (progress goes to stderr)")
    _bootstrap(p)


def run(args: argparse.Namespace) -> int:
    if args.perf_command == "produce":
        return run_command("perf produce", perf_produce, args)
    return run_command("perf consume", perf_consume, args)


def _settings(args: argparse.Namespace, config_file: str | None, props: list[str],
              what: str) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if config_file:
        settings.update(read_properties_file(config_file, f"--{what}.config"))
    settings.update(parse_properties(props, f"--{what}-props"))
    if args.bootstrap_server is not None:
        settings["bootstrap.servers"] = args.bootstrap_server
    settings.setdefault("bootstrap.servers", DEFAULT_BOOTSTRAP)
    settings.setdefault("client.id", f"perf-{what}-client")
    if args.reporting_interval <= 0:
        raise CliError("--reporting-interval must be > 0 ms")
    return settings


# --- produce -----------------------------------------------------------------------------


def _payloads(args: argparse.Namespace) -> list[bytes]:
    rng = random.Random(0)
    if args.record_size is not None:
        if args.record_size <= 0:
            raise CliError("--record-size must be > 0")
        return [bytes(rng.choices(range(65, 91), k=args.record_size)) for _ in range(64)]
    delimiter = args.payload_delimiter.replace("\\n", "\n")
    try:
        with open(args.payload_file, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--payload-file {args.payload_file}: {exc}") from None
    items = [s.encode() for s in text.split(delimiter) if s]
    if not items:
        raise CliError(f"--payload-file {args.payload_file} has no payloads")
    return [items[rng.randrange(len(items))] for _ in range(max(64, len(items)))]


def perf_produce(args: argparse.Namespace) -> int:
    import numpy as np

    from pylog.cli._stats import Progress, Window, jsonable, latency_summary
    from pylog.client import Admin, Producer

    if args.num_records <= 0:
        raise CliError("--num-records must be > 0")
    settings = _settings(args, args.producer_config, args.producer_props, "producer")
    if args.acks is not None:
        settings["acks"] = args.acks
    if args.compression is not None:
        settings["compression.type"] = args.compression
    payloads = _payloads(args)
    n, rate, topic = args.num_records, args.throughput, args.topic
    sizes = np.array([len(x) for x in payloads], dtype=np.int64)
    same_size = int(sizes[0]) if (sizes == sizes[0]).all() else None
    out = sys.stderr if args.json else sys.stdout
    progress = Progress(out, args.reporting_interval / 1000, total=n)
    sent_at = array("d", bytes(8 * n))  # perf_counter() at each send()
    latency = np.full(n, np.nan)  # ms, filled as batches complete
    done: collections.deque[tuple[int, int, float, BaseException | None]] = collections.deque()
    clock = time.perf_counter

    with Admin({"bootstrap.servers": settings["bootstrap.servers"]}) as admin:
        admin.describe_cluster()  # a wrong address fails now, not after max.block.ms
    with Producer(settings) as producer:
        producer.partitions_for(topic)  # metadata (and the topic) before the clock starts

        def on_done(first: int, end: int, fut: Any) -> None:  # on the client's I/O thread
            done.append((first, end, clock(), fut.exception(0)))

        total = Window()
        window = Window()
        failed: list[BaseException] = []
        completed = 0
        times = np.frombuffer(sent_at, dtype=np.float64)

        def drain() -> None:
            nonlocal completed
            while done:
                first, end, t, err = done.popleft()
                completed += end - first
                if err is not None:
                    failed.append(err)
                    continue
                lat = (t - times[first:end]) * 1000.0
                latency[first:end] = lat
                if same_size is not None:
                    nbytes = (end - first) * same_size
                else:
                    nbytes = int(sizes[np.arange(first, end) % len(sizes)].sum())
                total.add(end - first, nbytes)
                window.add(end - first, nbytes, lat)

        def report(now: float) -> None:
            nonlocal window
            drain()
            progress.show(window.line("sent", now), now)
            window = Window(now)

        send = producer.send
        npay = len(payloads)
        step = max(1, int(rate / 1000)) if rate > 0 else 0  # pace in ~1 ms steps
        current: Any = None
        run_start = 0
        last: Any = None
        sent = 0
        start = clock()
        total.start = window.start = start
        progress.restart(start)
        for i in range(n):
            if step and i % step == 0:
                ahead = start + i / rate - clock()
                if ahead > 0:
                    time.sleep(ahead)
            sent_at[i] = clock()
            fut = send(topic, payloads[i % npay])
            # Records of one batch share its result: one callback per run of them.
            batch = fut._batch
            if batch is not current:
                if last is not None:
                    last.add_done_callback(_bind(on_done, run_start, i))
                current, run_start = batch, i
            last = fut
            sent = i + 1
            if i & 1023 == 0:
                now = clock()
                progress.advance(sent, now)
                if progress.due(now):
                    report(now)
                if failed:
                    break  # as the Java tool would keep printing errors: stop at the first
        last.add_done_callback(_bind(on_done, run_start, sent))
        while completed < sent:
            time.sleep(0.005)
            drain()
            now = clock()
            progress.advance(sent, now)
            if progress.due(now):
                report(now)
        end = clock()
        drain()
        producer.flush()
    progress.end()
    if failed:
        raise CliError(f"{len(failed)} batch(es) failed, {total.count} of {n} records were "
                       f"delivered: {failed[0]}")
    elapsed = end - start
    rps, mbps = total.rates(end)
    lat = latency_summary(latency[~np.isnan(latency)])
    if args.json:
        print(json.dumps(jsonable({
            "tool": "perf produce", "topic": topic, "records": total.count,
            "bytes": total.bytes, "seconds": elapsed, "records_per_sec": rps,
            "mb_per_sec": mbps, "latency_ms": lat, "throughput_target": rate,
            "settings": {k: v for k, v in settings.items()},
        })))
    else:
        print(f"{total.count} records sent, {rps:f} records/sec ({mbps:.2f} MB/sec), "
              f"{lat['avg']:.2f} ms avg latency, {lat['max']:.2f} ms max latency, "
              f"{lat['p50']:.2f} ms 50th, {lat['p95']:.2f} ms 95th, {lat['p99']:.2f} ms 99th, "
              f"{lat['p999']:.2f} ms 99.9th.")
    return 0


def _bind(fn: Callable[..., None], first: int, end: int) -> Callable[[Any], None]:
    return lambda fut: fn(first, end, fut)


# --- consume -----------------------------------------------------------------------------

CSV_HEADER = ("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
              "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def perf_consume(args: argparse.Namespace) -> int:
    import numpy as np

    from pylog.cli._stats import MB, Progress, Window, jsonable, latency_summary
    from pylog.client import Admin, Consumer, TopicPartition

    if args.messages <= 0:
        raise CliError("--messages must be > 0")
    settings = _settings(args, args.consumer_config, args.consumer_props, "consumer")
    settings.setdefault("max.partition.fetch.bytes", args.fetch_size)
    settings.setdefault("check.crcs", "false")  # as kafka-consumer-perf-test
    settings["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    if args.group is not None:
        settings["group.id"] = args.group
    fmt = args.date_format

    def stamp(t: float) -> str:
        text = datetime.fromtimestamp(t).strftime(fmt)
        return text[:-3] if fmt.endswith("%f") else text  # milliseconds, as Kafka's SSS

    if not args.hide_header and not args.json:
        first = "time, threadId" if args.show_detailed_stats else "start.time, end.time"
        print(f"{first}, {CSV_HEADER}")
    live = Progress(sys.stderr, args.reporting_interval / 1000,
                    total=None if args.show_detailed_stats else args.messages)
    if not args.show_detailed_stats and not live.live:
        live.next_at = float("inf")  # nothing to show: no live line, no CSV rows
    e2e: list[Any] = []
    clock = time.perf_counter
    with Admin({"bootstrap.servers": settings["bootstrap.servers"]}) as admin:
        (topic,) = admin.describe_topics([args.topic]).values()
    with Consumer(settings) as consumer:
        wall_start = time.time()
        start = clock()
        join_ms = 0.0
        if args.group is not None:
            consumer.subscribe([args.topic])
        else:
            consumer.assign([TopicPartition(args.topic, p.partition) for p in topic.partitions])
            if args.from_latest:
                consumer.seek_to_end()
            else:
                consumer.seek_to_beginning()
        total = Window(start)
        window = Window(start)
        live.restart(start)
        last_record = start
        joined = args.group is None

        def detailed_row(now: float) -> None:
            elapsed = max(now - window.start, 1e-9)
            mb = window.bytes / MB
            print(f"{stamp(time.time())}, 0, {total.bytes / MB:.4f}, {mb / elapsed:.4f}, "
                  f"{total.count}, {window.count / elapsed:.4f}, 0, "
                  f"{elapsed * 1000:.0f}, {mb / elapsed:.4f}, {window.count / elapsed:.4f}",
                  file=sys.stderr if args.json else sys.stdout)

        while total.count < args.messages and (clock() - last_record) * 1000 <= args.timeout:
            now_ms = time.time() * 1000
            # Exactly --messages records are counted: a poll asks for at most what is left
            # (poll_columns hands out whole fetches: the surplus is left uncounted).
            need = args.messages - total.count
            if args.poll_columns:
                cols = consumer.poll_columns(0.1)
                count = nbytes = 0
                for c in cols.values():
                    k = min(c.num_records, need - count)
                    if k <= 0:
                        break
                    count += k
                    nbytes += int(c.key_offsets[k] - c.key_offsets[0]
                                  + c.value_offsets[k] - c.value_offsets[0])
                    e2e.append(now_ms - c.timestamps[:k])
            else:
                recs = consumer.poll(0.1, max_records=need)
                count = len(recs)
                nbytes = sum([len(r.value) for r in recs if r.value is not None]
                             + [len(r.key) for r in recs if r.key is not None])
                if recs:
                    e2e.append(now_ms - np.array([r.timestamp for r in recs], dtype=np.float64))
            now = clock()
            if not joined and consumer.assignment():
                joined = True
                join_ms = (now - start) * 1000
            if count:
                last_record = now
                total.add(count, nbytes)
                window.add(count, nbytes)
            live.advance(total.count, now)
            if live.due(now):
                if args.show_detailed_stats:
                    detailed_row(now)
                    live.next_at = now + live.interval
                else:
                    live.show(window.line("received", now), now)
                window = Window(now)
        end = clock()
        if args.show_detailed_stats and window.count:
            detailed_row(end)  # the last, partial interval: the rows add up to the total
    live.end()
    elapsed = max(end - start, 1e-9)
    fetch_s = max(elapsed - join_ms / 1000, 1e-9)
    mb = total.bytes / MB
    lat = latency_summary(np.concatenate(e2e) if e2e else np.zeros(0))
    if args.json:
        print(json.dumps(jsonable({
            "tool": "perf consume", "topic": args.topic, "api": (
                "poll_columns" if args.poll_columns else "poll"),
            "records": total.count, "bytes": total.bytes, "seconds": elapsed,
            "records_per_sec": total.count / elapsed, "mb_per_sec": mb / elapsed,
            "rebalance_ms": join_ms, "fetch_ms": fetch_s * 1000, "latency_ms": lat,
            "settings": settings,
        })))
    elif not args.show_detailed_stats:
        print(f"{stamp(wall_start)}, {stamp(wall_start + elapsed)}, {mb:.4f}, {mb / elapsed:.4f}, "
              f"{total.count}, {total.count / elapsed:.4f}, {join_ms:.0f}, {fetch_s * 1000:.0f}, "
              f"{mb / fetch_s:.4f}, {total.count / fetch_s:.4f}")
    if total.count < args.messages:
        raise CliError(f"only {total.count} of {args.messages} records arrived: none came "
                       f"within --timeout ({args.timeout} ms); is the topic that long?")
    return 0
