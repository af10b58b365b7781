"""Client benchmark: pylog's own producer and consumer against confluent-kafka and
kafka-python, in one run against one pylog broker.

One broker process (``pylog broker`` on a fresh data dir) serves the whole run. Each client
runs in a child process of its own (so that no client's threads share an interpreter with
another's), one at a time; the child connects and loads the topic's metadata first, then
times itself. After each produce run the harness checks, with its own ListOffsets, that the
topic holds exactly the records sent.

Workloads (the issue's): ``1M x 100 B`` and ``100k x 10 KiB`` records, keyless, values of
``x`` bytes, one partition (``--quick``: 50k x 100 B and 5k x 10 KiB).

Steady state: a producer first sends one record and flushes (connection, producer id),
then times ``n`` records; a consumer's clock starts when its first records arrive and it
counts the records after those (``first_answer_s`` is how long the first answer took:
connection, offsets, first fetch; ``whole_read_records_per_s`` counts everything from the
first call). The ratios are of the steady-state figures. ``--quick`` figures
are dominated by warm-up effects: a smoke test, not a measurement.

Producers (same settings for all three, written out in the JSON under ``settings``):
acks=all with idempotence on (Kafka 3+'s default; kafka-python ``enable_idempotence``,
librdkafka ``enable.idempotence``), ``linger.ms`` 5, ``batch.size`` 524288 (half a MiB:
one batch stays under the broker's ``message.max.bytes``), no compression, 32 MiB of
buffer (``buffer.memory``; librdkafka ``queue.buffering.max.kbytes`` 32768 with the
message-count bound lifted; kafka-python 3 has no such bound), ``max.request.size`` 1 MiB. No per-record delivery callback:
send everything, then flush (librdkafka's queue is served with ``poll(0)`` every 1000
records and on ``BufferError``).

Consumers read the topic our producer wrote, from offset 0, by manual assignment, with
Kafka's fetch defaults (``fetch.min.bytes`` 1, ``fetch.max.wait.ms`` 500,
``max.partition.fetch.bytes`` 1 MiB, ``fetch.max.bytes`` 50 MiB), CRC checks on (Kafka's
default), and up to 10000 records per call (never more than are left to read:
confluent-kafka's ``consume`` waits for as many as it is asked, so asking for more than
the log holds would add its timeout to the run): ours ``poll(max_records=10000)`` and
``poll_columns()`` (``pylog poll_columns views``: ``poll_columns(copy_values=False)``,
values left in the fetched response where uncompressed), confluent-kafka
``consume(num_messages=10000)``, kafka-python ``poll(max_records=10000)``. Each touches
every record's value length (the columns paths: one numpy subtraction over the value
offsets, or a sum of ``value_lengths``), so a record counts only once its value is in the
application's hands.

librdkafka (2.2+) stops fetching for ``fetch.queue.backoff.ms`` (default 1000 ms) whenever
its local queue passes ``queued.min.messages`` or ``queued.max.messages.kbytes``, which a
broker that answers a whole ``max.partition.fetch.bytes`` at once triggers on every fetch:
with the default, confluent-kafka reads 1M x 100 B at ~0.2M records/s here instead of
~1.2M (RESULTS.md, "Consume stalls"). The harness sets it to 10 ms, so that the comparison
is with confluent-kafka at its best; ``--confluent-defaults`` keeps librdkafka's 1000 ms.

Figures per client and workload: seconds, records/s, MB/s (10^6 bytes of values, as
``harness.py``), the CPU seconds of the client process (all its threads, over the timed
part) and of the broker, and
the ratios against the issues' targets: ours >= 3x kafka-python, produce >= 1.0x and
``poll`` >= 0.7x confluent-kafka, ``send_many`` (columns of 100,000 records) >= 3x and
``poll_columns`` >= 2x confluent-kafka.
``--repeat N`` rotates the clients' order run by run and reports medians.

Examples::

    python benchmarks/e2e/clients.py --quick
    python benchmarks/e2e/clients.py --repeat 3 --output benchmarks/e2e/runs/issue8-clients.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, BrokerProc, git_commit, implementation  # noqa: E402

SETTINGS = {
    "acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 524288,
    "compression.type": "none", "buffer.memory": 32 * 1024 * 1024, "max.request.size": 1048576,
    "fetch.min.bytes": 1, "fetch.max.wait.ms": 500, "max.partition.fetch.bytes": 1048576,
    "fetch.max.bytes": 52428800, "check.crcs": True, "records_per_call": 10000,
    "confluent fetch.queue.backoff.ms": 10, "send_many chunk": 100_000,
}

WORKLOADS = {"1M x 100 B": (1_000_000, 100), "100k x 10 KiB": (100_000, 10240)}
QUICK = {"1M x 100 B": (50_000, 100), "100k x 10 KiB": (5_000, 10240)}

PRODUCERS = ("pylog", "pylog send_many", "confluent", "kafka-python")
CONSUMERS = ("pylog poll", "pylog poll_columns", "pylog poll_columns views", "confluent",
             "kafka-python")

# --- child processes: each prints one JSON line {"start", "end", "records", "bytes", "cpu"} ---

_PRELUDE = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
a = json.loads(sys.argv[1])
S = a["settings"]
topic, n, size = a["topic"], a["num_records"], a["record_size"]
value = b"x" * size
cpu0 = [0.0]
def begin():
    cpu0[0] = time.process_time()
    return time.perf_counter()
def done(start, end, records, nbytes):
    print(json.dumps({"start": start, "end": end, "records": records, "bytes": nbytes,
                      "total": records, "total_bytes": nbytes,
                      "cpu": time.process_time() - cpu0[0]}))
class Meter:
    # A consumer's clock: starts when the first records arrive (those are not counted).
    def __init__(self):
        self.called = time.perf_counter()
        self.start = None
        self.got = self.nbytes = self.skip = self.skip_bytes = 0
    def add(self, count, nbytes):
        self.got += count
        self.nbytes += nbytes
        if self.start is None and count:
            self.start = begin()
            self.skip, self.skip_bytes = self.got, self.nbytes
    def done(self):
        end = time.perf_counter()
        print(json.dumps({"start": self.start, "end": end, "records": self.got - self.skip,
                          "bytes": self.nbytes - self.skip_bytes, "total": self.got,
                          "total_bytes": self.nbytes, "first_answer_s": self.start - self.called,
                          "whole_read_s": end - self.called,
                          "cpu": time.process_time() - cpu0[0]}))
"""

_PRODUCE = {
    "pylog": r"""
from pylog.client import Producer
p = Producer({"bootstrap.servers": a["bootstrap"], "acks": S["acks"],
              "enable.idempotence": S["enable.idempotence"], "linger.ms": S["linger.ms"],
              "batch.size": S["batch.size"], "compression.type": S["compression.type"],
              "buffer.memory": S["buffer.memory"], "max.request.size": S["max.request.size"]})
p.send(topic, value, partition=0)  # warm-up: connection, producer id, first batch
p.flush()
send = p.send
start = begin()
for _ in range(n):
    send(topic, value, partition=0)
p.flush()
end = time.perf_counter()
p.close()
done(start, end, n, n * size)
""",
    "pylog send_many": r"""
from pylog.client import Producer
p = Producer({"bootstrap.servers": a["bootstrap"], "acks": S["acks"],
              "enable.idempotence": S["enable.idempotence"], "linger.ms": S["linger.ms"],
              "batch.size": S["batch.size"], "compression.type": S["compression.type"],
              "buffer.memory": S["buffer.memory"], "max.request.size": S["max.request.size"]})
p.send(topic, value, partition=0)  # warm-up: connection, producer id, first batch
p.flush()
chunk = min(n, S["send_many chunk"])
column = [value] * chunk  # the caller's column (built before the clock starts)
send_many = p.send_many
start = begin()
left = n
while left:
    k = min(left, chunk)
    send_many(topic, column if k == chunk else column[:k], partition=0)
    left -= k
p.flush()
end = time.perf_counter()
p.close()
done(start, end, n, n * size)
""",
    "confluent": r"""
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": a["bootstrap"], "acks": S["acks"],
              "enable.idempotence": S["enable.idempotence"], "linger.ms": S["linger.ms"],
              "batch.size": S["batch.size"], "compression.type": S["compression.type"],
              "queue.buffering.max.kbytes": S["buffer.memory"] // 1024,
              "queue.buffering.max.messages": 2147483647,
              "message.max.bytes": S["max.request.size"]})
p.produce(topic, value, partition=0)  # warm-up: connection, producer id, first batch
p.flush(60)
produce, poll = p.produce, p.poll
start = begin()
for i in range(n):
    while True:
        try:
            produce(topic, value, partition=0)
            break
        except BufferError:  # queue.buffering.max.kbytes reached: wait for deliveries
            poll(0.005)
    if i % 1000 == 0:
        poll(0)
left = p.flush(300)
end = time.perf_counter()
assert left == 0, f"{left} records not delivered"
done(start, end, n, n * size)
""",
    "kafka-python": r"""
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=a["bootstrap"], acks=S["acks"],
                  enable_idempotence=S["enable.idempotence"], linger_ms=S["linger.ms"],
                  batch_size=S["batch.size"], compression_type=None,
                  max_request_size=S["max.request.size"])  # 3.x has no buffer_memory bound
p.send(topic, value, partition=0)  # warm-up: connection, producer id, first batch
p.flush()
send = p.send
start = begin()
for _ in range(n):
    send(topic, value, partition=0)
p.flush()
end = time.perf_counter()
p.close()
done(start, end, n, n * size)
""",
}

_CONSUME = {
    "pylog poll": r"""
from pylog.client import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": a["bootstrap"], "auto.offset.reset": "earliest",
              "fetch.min.bytes": S["fetch.min.bytes"], "fetch.max.wait.ms": S["fetch.max.wait.ms"],
              "max.partition.fetch.bytes": S["max.partition.fetch.bytes"],
              "fetch.max.bytes": S["fetch.max.bytes"], "check.crcs": S["check.crcs"]})
c.assign([TopicPartition(topic, 0)])
c.seek(TopicPartition(topic, 0), 0)
poll, per_call = c.poll, S["records_per_call"]
m = Meter()
while m.got < n:
    recs = poll(1.0, min(per_call, n - m.got))
    m.add(len(recs), sum([len(r.value) for r in recs]))
m.done()
c.close()
""",
    "pylog poll_columns": r"""
from pylog.client import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": a["bootstrap"], "auto.offset.reset": "earliest",
              "fetch.min.bytes": S["fetch.min.bytes"], "fetch.max.wait.ms": S["fetch.max.wait.ms"],
              "max.partition.fetch.bytes": S["max.partition.fetch.bytes"],
              "fetch.max.bytes": S["fetch.max.bytes"], "check.crcs": S["check.crcs"]})
c.assign([TopicPartition(topic, 0)])
c.seek(TopicPartition(topic, 0), 0)
poll_columns = c.poll_columns
m = Meter()
while m.got < n:
    for cols in poll_columns(1.0).values():
        m.add(cols.num_records, int(cols.value_offsets[-1] - cols.value_offsets[0]))
m.done()
c.close()
""",
    "pylog poll_columns views": r"""
from pylog.client import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": a["bootstrap"], "auto.offset.reset": "earliest",
              "fetch.min.bytes": S["fetch.min.bytes"], "fetch.max.wait.ms": S["fetch.max.wait.ms"],
              "max.partition.fetch.bytes": S["max.partition.fetch.bytes"],
              "fetch.max.bytes": S["fetch.max.bytes"], "check.crcs": S["check.crcs"]})
c.assign([TopicPartition(topic, 0)])
c.seek(TopicPartition(topic, 0), 0)
def poll_columns(t):
    return c.poll_columns(t, copy_values=False)
m = Meter()
while m.got < n:
    for cols in poll_columns(1.0).values():
        m.add(cols.num_records, int(cols.value_lengths.sum()))
m.done()
c.close()
""",
    "confluent": r"""
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": "bench-" + topic,
              "enable.auto.commit": False, "fetch.min.bytes": S["fetch.min.bytes"],
              "fetch.wait.max.ms": S["fetch.max.wait.ms"],
              "max.partition.fetch.bytes": S["max.partition.fetch.bytes"],
              "fetch.max.bytes": S["fetch.max.bytes"], "check.crcs": S["check.crcs"],
              "fetch.queue.backoff.ms": S["confluent fetch.queue.backoff.ms"]})
c.list_topics(topic, timeout=30)
c.assign([TopicPartition(topic, 0, 0)])
consume, per_call = c.consume, S["records_per_call"]
m = Meter()
while m.got < n:
    msgs = consume(min(per_call, n - m.got), 1.0)  # it waits for all it asks for
    for msg in msgs:
        if msg.error() is not None:
            raise SystemExit(f"consume error: {msg.error()}")
    m.add(len(msgs), sum([len(msg.value()) for msg in msgs]))
m.done()
c.close()
""",
    "kafka-python": r"""
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=a["bootstrap"], enable_auto_commit=False,
                  auto_offset_reset="earliest", fetch_min_bytes=S["fetch.min.bytes"],
                  fetch_max_wait_ms=S["fetch.max.wait.ms"],
                  max_partition_fetch_bytes=S["max.partition.fetch.bytes"],
                  fetch_max_bytes=S["fetch.max.bytes"], check_crcs=S["check.crcs"])
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek(tp, 0)
poll, per_call = c.poll, S["records_per_call"]
m = Meter()
while m.got < n:
    for recs in poll(timeout_ms=1000, max_records=min(per_call, n - m.got)).values():
        m.add(len(recs), sum([len(r.value) for r in recs]))
m.done()
c.close()
""",
}


def _child(script: str, params: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _PRELUDE + script, json.dumps(params)],
                          capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode:
        raise RuntimeError(f"client failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _end_offset(bootstrap: str, topic: str) -> int:
    from pylog.client import Admin, TopicPartition

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.list_offsets({(topic, 0): "latest"})[TopicPartition(topic, 0)][0]


def _create(bootstrap: str, topic: str) -> None:
    from pylog.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])


def _figures(out: dict[str, Any], broker_cpu: float) -> dict[str, Any]:
    extra = {}
    if "first_answer_s" in out:  # consumers: also the whole read, first call to last record
        extra = {"first_answer_s": round(out["first_answer_s"], 4),
                 "whole_read_records_per_s": round(out["total"] / out["whole_read_s"])}
    if not out["records"]:  # everything came in the first answer (small --quick runs)
        return {"seconds": None, "records": 0, "records_per_s": None, "mb_per_s": None,
                "client_cpu_s": None, "client_cpu_us_per_record": None,
                "broker_cpu_s": round(broker_cpu, 3), **extra}
    s = out["end"] - out["start"]
    return {"seconds": round(s, 4), "records": out["records"],
            "records_per_s": round(out["records"] / s), "mb_per_s": round(out["bytes"] / s / 1e6, 2),
            "client_cpu_s": round(out["cpu"], 3),
            "client_cpu_us_per_record": round(out["cpu"] / out["records"] * 1e6, 3),
            "broker_cpu_s": round(broker_cpu, 3), **extra}


def run_once(broker: BrokerProc, workloads: dict[str, tuple[int, int]], producers: list[str],
             consumers: list[str], rotation: int, env: dict[str, str]) -> dict[str, Any]:
    """Every producer, then every consumer, for every workload; clients rotated by
    ``rotation`` so that no client always runs first."""
    out: dict[str, Any] = {}
    for wname, (n, size) in workloads.items():
        res: dict[str, Any] = {"produce": {}, "consume": {}}
        base = dict(bootstrap=broker.bootstrap, num_records=n, record_size=size, settings=SETTINGS)
        written = None
        order = producers[rotation % len(producers):] + producers[:rotation % len(producers)]
        for client in order:
            topic = f"clients-{client.replace(' ', '_')}-{size}-{time.monotonic_ns()}"
            _create(broker.bootstrap, topic)
            cpu0 = broker.cpu()
            got = _child(_PRODUCE[client], dict(base, topic=topic), env)
            figures = _figures(got, broker.cpu() - cpu0)
            end = _end_offset(broker.bootstrap, topic)
            if end != n + 1:  # and the warm-up record
                raise RuntimeError(f"{client} produced {end} records to {topic}, not {n + 1}")
            res["produce"][client] = figures
            if client == "pylog" or written is None:
                written = topic
        turn = rotation % max(len(consumers), 1)  # --consumers '' measures producers only
        order = consumers[turn:] + consumers[:turn]
        for client in order:
            cpu0 = broker.cpu()
            got = _child(_CONSUME[client], dict(base, topic=written, num_records=n + 1), env)
            if got["total"] != n + 1 or got["total_bytes"] != (n + 1) * size:
                raise RuntimeError(f"{client} read {got['total']} records, "
                                   f"{got['total_bytes']} bytes; expected {n + 1}, {(n + 1) * size}")
            res["consume"][client] = _figures(got, broker.cpu() - cpu0)
        out[wname] = res
    return out


def _median_of(values: list[Any]) -> Any:
    numbers = [v for v in values if v is not None]
    return round(statistics.median(numbers), 4) if numbers else None


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    if len(runs) == 1:
        return runs[0]
    merged: dict[str, Any] = {}
    for wname, res in runs[0].items():
        merged[wname] = {}
        for phase, clients in res.items():
            merged[wname][phase] = {
                client: {k: _median_of([r[wname][phase][client][k] for r in runs])
                         for k in figures}
                for client, figures in clients.items()}
    return merged


TARGETS = [
    # (phase, ours, theirs, target ratio)
    ("produce", "pylog", "kafka-python", 3.0),
    ("produce", "pylog", "confluent", 1.0),
    ("produce", "pylog send_many", "confluent", 3.0),
    ("consume", "pylog poll", "kafka-python", 3.0),
    ("consume", "pylog poll", "confluent", 0.7),
    ("consume", "pylog poll_columns", "confluent", 2.0),
    ("consume", "pylog poll_columns views", "confluent", 2.0),
]


def ratios(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for wname, res in results.items():
        for phase, ours, theirs, target in TARGETS:
            a, b = res[phase].get(ours), res[phase].get(theirs)
            if a is None or b is None or not a["records_per_s"] or not b["records_per_s"]:
                continue
            r = a["records_per_s"] / b["records_per_s"]
            rows.append({"workload": wname, "phase": phase, "ours": ours, "theirs": theirs,
                         "ratio": round(r, 3), "target": target, "met": r >= target})
    return rows


def client_versions() -> dict[str, str]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import confluent_kafka
        import kafka

        import pylog
    return {"pylog": pylog.__version__, "confluent-kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0], "kafka-python": kafka.__version__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small workloads: a smoke test")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs, rotating the clients' order; figures are medians")
    ap.add_argument("--producers", default=",".join(PRODUCERS),
                    help=f"comma-separated subset of {', '.join(PRODUCERS)}")
    ap.add_argument("--consumers", default=",".join(CONSUMERS),
                    help=f"comma-separated subset of {', '.join(CONSUMERS)}")
    ap.add_argument("--workload", action="append", choices=list(WORKLOADS),
                    help="run only this workload (repeatable)")
    ap.add_argument("--confluent-defaults", action="store_true",
                    help="leave librdkafka's fetch.queue.backoff.ms at its default (1000 ms)")
    ap.add_argument("--output", help="also write the JSON here")
    args = ap.parse_args(argv)
    if args.confluent_defaults:
        SETTINGS["confluent fetch.queue.backoff.ms"] = 1000
    producers = [c.strip() for c in args.producers.split(",") if c.strip()]
    consumers = [c.strip() for c in args.consumers.split(",") if c.strip()]
    for c in producers:
        if c not in PRODUCERS:
            ap.error(f"unknown producer {c!r}: one of {', '.join(PRODUCERS)}")
    for c in consumers:
        if c not in CONSUMERS:
            ap.error(f"unknown consumer {c!r}: one of {', '.join(CONSUMERS)}")
    if consumers and "pylog" not in producers:
        ap.error("the consumers read what the pylog producer wrote: keep it in --producers")
    table = QUICK if args.quick else WORKLOADS
    workloads = {k: v for k, v in table.items() if not args.workload or k in args.workload}
    # Children (the broker and the clients) run this checkout's pylog.
    env = dict(os.environ)
    src = os.path.join(REPO, "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    sys.path.insert(0, src)
    result: dict[str, Any] = {
        "commit": git_commit(), "implementation": implementation(), "versions": client_versions(),
        "quick": args.quick, "settings": SETTINGS,
        "workloads": {k: {"records": n, "record_size": s} for k, (n, s) in workloads.items()},
    }
    runs = []
    with tempfile.TemporaryDirectory(prefix="pylog-clients-") as workdir:
        broker = BrokerProc("pylog", workdir)
        try:
            for rep in range(args.repeat):
                runs.append(run_once(broker, workloads, producers, consumers, rep, env))
        finally:
            broker.stop()
    result["results"] = _median(runs)
    if len(runs) > 1:
        result["runs"] = runs
    result["ratios"] = ratios(result["results"])
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
