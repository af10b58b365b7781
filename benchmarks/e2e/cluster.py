"""Replication benchmark (issue 11): a local ZooKeeper cluster started the way a user
starts it (``pylog cluster start``), confluent-kafka (librdkafka) clients in child
processes, every figure a ratio against another figure of the same run.

Scenarios (``--scenario``, default all):

- ``throughput``: on one 3-broker cluster, the same records produced to an RF=1 topic with
  acks=1 and to an RF=3 topic (min.insync.replicas=2) with acks=all: records/s of each and
  the ratio (the price of replication).
- ``latency``: per producer pattern (``--producers`` processes, and a single producer),
  the largest acks=all rate the cluster sustains with that pattern, paced (probes from the
  unpaced figure down), then the RF=3 acks=all topic at half of it: produce (ack) latency
  p50/p99 from the delivery reports (``msg.latency()``, produce() to the callback),
  librdkafka's own per-broker statistics beside them (``int_latency``, ``outbuf_latency``,
  ``rtt``), and end-to-end latency p50/p99 (from the record's CreateTime to its arrival
  at a consumer that polls throughout).
- ``failover``: an RF=3 acks=all producer sends a record to every partition every 5 ms;
  the leader of some partitions is killed (SIGKILL, then in a second round stopped with
  SIGTERM: controlled shutdown); figure: the longest silence between two acknowledgements
  on a partition it led, from the last one before the signal on (the worst partition:
  the time the partition could not take an acks=all record), against the goal
  ``zookeeper.session.timeout.ms`` + 1 s (SIGKILL) and 1 s (controlled shutdown).
- ``scaling``: the same RF=1 acks=1 load on a cluster of one broker process and on a
  cluster of two (the partitions shared): records/s of each and the ratio (pylog's
  multi-core story: one Python process per core).

Examples::

    python benchmarks/e2e/cluster.py
    python benchmarks/e2e/cluster.py --scenario failover --session-timeout-ms 6000
    python benchmarks/e2e/cluster.py --scenario throughput --num-records 500000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import free_port, git_commit, run_confluent_produce  # noqa: E402

#: The producers' linger.ms in every scenario (batch.size 1,000,000).
LINGER_MS = 5
#: A latency probe with a larger ack p50 has a standing queue (20 lingers): not sustained,
#: even when a short probe still ends within 5% of its offered rate.
SUSTAINED_P50_MS = 100
#: The search gives up below this offered rate (records/s).
MIN_PROBE_RATE = 1000


class LocalCluster:
    """``pylog cluster start|stop`` in a work directory, with the processes it records."""

    def __init__(self, workdir: str, brokers: int, session_timeout_ms: int,
                 overrides: list[str] = ()) -> None:  # type: ignore[assignment]
        self.data_dir = os.path.join(workdir, f"cluster-{brokers}-{time.monotonic_ns()}")
        zk_port = free_port()
        # Consecutive free ports from a random base (the launcher uses base + id).
        base = free_port()
        cmd = [sys.executable, "-m", "pylog", "cluster", "start", "--brokers", str(brokers),
               "--data-dir", self.data_dir, "--base-port", str(base),
               "--zookeeper-port", str(zk_port),
               "--override", f"zookeeper.session.timeout.ms={session_timeout_ms}"]
        for item in overrides:
            cmd += ["--override", item]
        subprocess.run(cmd, check=True, capture_output=True, timeout=180)
        with open(os.path.join(self.data_dir, "cluster.json")) as f:
            self.state = json.load(f)
        self.brokers = {b["id"]: b for b in self.state["brokers"]}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b['host']}:{b['port']}" for b in self.brokers.values())

    def stop(self) -> None:
        subprocess.run([sys.executable, "-m", "pylog", "cluster", "stop", "--data-dir", self.data_dir],
                       capture_output=True, timeout=180)


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(60)
    # Every partition led, with its full ISR, before anything is timed.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: partitions not led with a full ISR after 60 s")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:  # a broker whose metadata lags may answer the topic without its partitions
        md = admin.list_topics(topic, timeout=10).topics[topic]
        found = {p.id: p.leader for p in md.partitions.values()}
        if (found and all(v >= 0 for v in found.values())) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, args: argparse.Namespace, workdir: str, acks: str,
            throughput: float = -1, producers: int | None = None, num_records: int | None = None,
            stats_ms: int = 0) -> dict[str, Any]:
    n = num_records or args.num_records
    ns = argparse.Namespace(num_records=n, record_size=args.record_size,
                            partitions=args.partitions, producers=producers or args.producers,
                            acks=acks, linger_ms=LINGER_MS, batch_size=1_000_000, compression="none",
                            throughput=throughput, stats_ms=stats_ms)
    res = run_confluent_produce(bootstrap, topic, ns, workdir)
    if res["failed"] or res["undelivered"]:
        raise RuntimeError(f"produce to {topic}: {res['failed']} failed, {res['undelivered']} undelivered")
    res["records_per_s"] = round(n / res["seconds"])
    return res


_E2E_CONSUMER = r"""
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
a = json.loads(sys.argv[1])
c = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": "bench-e2e", "enable.auto.commit": False,
              "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})
c.assign([TopicPartition(a["topic"], p, 0) for p in range(a["partitions"])])
lat, deadline = [], time.time() + a["seconds"]
open(a["ready_file"], "w").close()
while len(lat) < a["records"] and time.time() < deadline:
    for m in c.consume(10000, 0.1):
        if m.error() is None:
            lat.append(time.time() * 1000 - m.timestamp()[1])
c.close()
lat.sort()
pick = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else None
print(json.dumps({"records": len(lat), "p50_ms": pick(0.5), "p99_ms": pick(0.99)}))
"""


def scenario_throughput(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    cluster = LocalCluster(workdir, 3, args.session_timeout_ms)
    try:
        bs = cluster.bootstrap
        create_topic(bs, "rf1", args.partitions, 1, {})
        create_topic(bs, "rf3", args.partitions, 3, {"min.insync.replicas": "2"})
        rf1 = produce(bs, "rf1", args, workdir, "1")
        rf3 = produce(bs, "rf3", args, workdir, "all")
        out = {"rf1_acks1_records_per_s": rf1["records_per_s"],
               "rf3_acksall_records_per_s": rf3["records_per_s"],
               "rf3_over_rf1": round(rf3["records_per_s"] / rf1["records_per_s"], 3)}
        if "latency" in args.scenarios:
            out["latency"] = _latency(args, workdir, bs, rf3["records_per_s"])
        return out
    finally:
        cluster.stop()


def _max_paced(args: argparse.Namespace, workdir: str, bs: str, producers: int,
               start: float) -> tuple[float | None, list[dict[str, Any]]]:
    """The largest acks=all rate the cluster sustains with the latency run's own producer
    pattern (``producers`` processes, paced, linger and batch size as there), found by
    probes of ``--probe-seconds`` each: from ``start`` (half the unpaced records/s, the rate
    this benchmark used to call half load) down by 0.7x
    until a probe is sustained (each producer process, from its first record to its last
    acknowledgement, at >= 95% of its share of the offered rate, and no standing queue:
    ack p50 <= ``SUSTAINED_P50_MS``), then once up to the geometric middle of the last two. Why not the unpaced
    figure: unpaced, librdkafka's queue is always full and every request carries up to
    batch.size; paced, each carries what ``linger.ms`` gathered, and an acks=all request
    holds its connection until the ISR has it (Kafka's rule), so the rate a connection
    sustains is what one linger gathers per replication round."""
    probes: list[dict[str, Any]] = []

    def probe(rate: float) -> bool:
        n = max(1000, int(rate * args.probe_seconds))
        res = produce(bs, "rf3-probe", args, workdir, "all", throughput=rate, producers=producers,
                      num_records=n)
        achieved = res["sum_of_producer_records_per_s"]
        ok = achieved >= 0.95 * rate and res["p50_ms"] <= SUSTAINED_P50_MS
        probes.append({"offered": round(rate), "achieved": achieved, "sustained": ok,
                       "ack_p50_ms": res["p50_ms"], "ack_p99_ms": res["p99_ms"]})
        return ok

    rate, failed = start, None
    while not probe(rate):
        failed, rate = rate, rate * 0.7
        if rate < MIN_PROBE_RATE:
            return None, probes
    if failed is not None:
        middle = (rate * failed) ** 0.5
        if probe(middle):
            rate = middle
    return rate, probes


def _latency(args: argparse.Namespace, workdir: str, bs: str, unpaced: float) -> dict[str, Any]:
    """Per producer pattern (the throughput run's ``--producers`` processes, and one): its
    sustained maximum (``_max_paced``), then ``--latency-seconds`` at half of it with
    librdkafka's statistics on and an end-to-end consumer."""
    create_topic(bs, "rf3-probe", args.partitions, 3, {"min.insync.replicas": "2"})
    out: dict[str, Any] = {}
    for name, nprod in (("harness_pattern", args.producers), ("single_producer", 1)):
        maximum, probes = _max_paced(args, workdir, bs, nprod, unpaced / 2)
        if maximum is None:
            out[name] = {"producers": nprod, "linger_ms": LINGER_MS, "probes": probes,
                         "max_paced_records_per_s": None}
            continue
        run = _paced_latency(args, workdir, bs, f"rf3-lat-{nprod}", maximum / 2, nprod)
        out[name] = {"producers": nprod, "linger_ms": LINGER_MS,
                     "max_paced_records_per_s": round(maximum),
                     "max_paced_over_unpaced": round(maximum / unpaced, 3), "probes": probes, **run,
                     "ack_p50_over_goal_10ms": round(run["produce_ack_p50_ms"] / 10, 2),
                     "ack_p99_over_goal_50ms": round(run["produce_ack_p99_ms"] / 50, 2)}
    return out


def _paced_latency(args: argparse.Namespace, workdir: str, bs: str, topic: str, rate: float,
                   producers: int) -> dict[str, Any]:
    create_topic(bs, topic, args.partitions, 3, {"min.insync.replicas": "2"})
    n = int(rate * args.latency_seconds)
    ready = os.path.join(workdir, f"e2e-ready-{topic}")
    seconds = args.latency_seconds + 60
    consumer = subprocess.Popen(
        [sys.executable, "-c", _E2E_CONSUMER, json.dumps(dict(
            bootstrap=bs, topic=topic, partitions=args.partitions, records=n,
            seconds=seconds, ready_file=ready))], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the consumer's first fetches are in flight
    prod = produce(bs, topic, args, workdir, "all", throughput=rate, producers=producers,
                   num_records=n, stats_ms=1000)
    out, _ = consumer.communicate(timeout=seconds + 60)
    e2e = json.loads(out.strip().splitlines()[-1])
    return {"half_load_records_per_s": round(rate),
            "achieved_records_per_s": prod["sum_of_producer_records_per_s"],
            "produce_ack_p50_ms": prod["p50_ms"], "produce_ack_p99_ms": prod["p99_ms"],
            "librdkafka": prod.get("librdkafka"),
            "end_to_end_p50_ms": e2e["p50_ms"], "end_to_end_p99_ms": e2e["p99_ms"],
            "end_to_end_records": e2e["records"]}


_TICKER = r"""
import json, sys, time
from confluent_kafka import Producer
a = json.loads(sys.argv[1])
acks = {}  # partition -> ack times
def cb(err, msg):
    if err is None:
        acks.setdefault(msg.partition(), []).append(time.time())
p = Producer({"bootstrap.servers": a["bootstrap"], "acks": "all", "enable.idempotence": True,
              "linger.ms": 0, "message.timeout.ms": 120000, "on_delivery": cb,
              "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50,
              "retry.backoff.max.ms": 200})
p.list_topics(a["topic"], timeout=30)
open(a["ready_file"], "w").close()
end = time.time() + a["seconds"]
while time.time() < end:
    for part in range(a["partitions"]):
        p.produce(a["topic"], b"x" * 100, partition=part)
    p.poll(0.005)
p.flush(120)
print(json.dumps({str(k): v for k, v in acks.items()}))
"""


def _failover_round(args: argparse.Namespace, workdir: str, sig: int) -> dict[str, Any]:
    cluster = LocalCluster(workdir, 3, args.session_timeout_ms,
                           ["controlled.shutdown.enable=true", "replica.lag.time.max.ms=10000"])
    try:
        bs = cluster.bootstrap
        create_topic(bs, "fo", args.partitions, 3, {"min.insync.replicas": "2"})
        before = leaders(bs, "fo")
        victim = before[0]
        led = sorted(p for p, b in before.items() if b == victim)
        ready = os.path.join(workdir, f"ticker-ready-{sig}")
        seconds = args.session_timeout_ms / 1000 + 20
        ticker = subprocess.Popen(
            [sys.executable, "-c", _TICKER, json.dumps(dict(
                bootstrap=bs, topic="fo", partitions=args.partitions, seconds=seconds,
                ready_file=ready))], stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3.0)  # steady state
        t_signal = time.time()
        os.kill(cluster.brokers[victim]["pid"], sig)
        out, _ = ticker.communicate(timeout=seconds + 180)
        acks = {int(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()}
        # Unavailability: the longest silence between two acknowledgements on the partition
        # from the last one before the signal on (records are sent every 5 ms throughout).
        per_partition = {}
        for p in led:
            times = sorted(acks.get(p, []))
            before_signal = [t for t in times if t <= t_signal]
            window = ([before_signal[-1]] if before_signal else [t_signal]) + \
                [t for t in times if t > t_signal]
            gaps = [b - a for a, b in zip(window, window[1:], strict=False)]
            per_partition[p] = round(max(gaps), 3) if gaps else None
        worst = max((v for v in per_partition.values() if v is not None), default=None)
        goal = args.session_timeout_ms / 1000 + 1 if sig == signal.SIGKILL else 1.0
        return {"signal": signal.Signals(sig).name, "partitions_led": led,
                "unavailable_s": per_partition, "worst_s": worst, "goal_s": goal,
                "worst_over_goal": round(worst / goal, 3) if worst is not None else None}
    finally:
        cluster.stop()


def scenario_failover(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    return {"sigkill": _failover_round(args, workdir, signal.SIGKILL),
            "controlled_shutdown": _failover_round(args, workdir, signal.SIGTERM),
            "session_timeout_ms": args.session_timeout_ms}


def scenario_scaling(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (1, 2):
        cluster = LocalCluster(workdir, n, args.session_timeout_ms)
        try:
            create_topic(cluster.bootstrap, "scale", args.partitions, 1, {})
            res = produce(cluster.bootstrap, "scale", args, workdir, "1")
            out[f"brokers_{n}_records_per_s"] = res["records_per_s"]
        finally:
            cluster.stop()
    out["two_over_one"] = round(out["brokers_2_records_per_s"] / out["brokers_1_records_per_s"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", action="append", choices=("throughput", "latency", "failover", "scaling"),
                    help="run these (repeatable; default: all)")
    ap.add_argument("--num-records", type=int, default=300_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000,
                    help="zookeeper.session.timeout.ms of the brokers (default 6000)")
    ap.add_argument("--probe-seconds", type=float, default=6.0,
                    help="latency: length of each probe for the sustained maximum (default 6)")
    ap.add_argument("--latency-seconds", type=float, default=15.0,
                    help="latency: length of each half-load run (default 15)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="also write the runs to this file")
    args = ap.parse_args(argv)
    args.scenarios = args.scenario or ["throughput", "latency", "failover", "scaling"]
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="cluster-bench-") as wd:
            run: dict[str, Any] = {}
            if "throughput" in args.scenarios or "latency" in args.scenarios:
                run["throughput"] = scenario_throughput(args, wd)
            if "failover" in args.scenarios:
                run["failover"] = scenario_failover(args, wd)
            if "scaling" in args.scenarios:
                run["scaling"] = scenario_scaling(args, wd)
            print(json.dumps(run), flush=True)
            runs.append(run)
    print(f"commit {git_commit()}, {args.num_records} records of {args.record_size} B, "
          f"{args.partitions} partitions, {args.producers} producer processes")
    if len(runs) > 1:
        for section in ("throughput", "scaling"):
            if section in runs[0]:
                keys = [k for k, v in runs[0][section].items() if isinstance(v, (int, float))]
                print(section, {k: statistics.median(r[section][k] for r in runs) for k in keys})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
