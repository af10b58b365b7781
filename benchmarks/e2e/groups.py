"""Consumer-group benchmark: rebalance time and commit throughput through real
confluent-kafka consumers, against pylog and Tansu in the same run (issue 7).

Scenarios, each timed on the wall clock of this process:

- ``join``: ``--members`` consumers (10) subscribe at once to a topic of ``--partitions``
  partitions (100); the time from the first ``subscribe()`` until every member holds its
  share of one assignment that covers every partition exactly once.
- ``leave``: from that stable group one member closes (LeaveGroup); the time until the
  others cover every partition again.
- ``join-one``: a new member subscribes to the stable group; the time until the members
  again cover every partition with the newcomer holding some.
- ``commits``: one consumer of the group commits one offset at a time, synchronously
  (``commit(asynchronous=False)``, one round trip each), for ``--seconds``; and then
  asynchronously (``asynchronous=True``, librdkafka pipelines them), counting the
  acknowledged commits from its ``on_commit`` callback: commits/s.

The members are confluent-kafka consumers (librdkafka) in threads of one child process per
scenario run, all with ``partition.assignment.strategy=range`` (eager: an assignment is
whole) and the heartbeat at 500 ms so that a rebalance is noticed quickly; the broker runs
in its own process (harness.BrokerProc). pylog runs with ``group.initial.rebalance.delay.ms``
as given by ``--initial-delay-ms`` (0 by default so that the join figure measures the
protocol and not Kafka's deliberate 3 s wait; Tansu has no such delay).

- ``--settle`` (issue 25, pylog only): classic vs KIP-848 in the same run, interleaved per
  round. A group of ``--members`` confluent-kafka consumers (10) on ``--partitions`` (100)
  forms; then one member joins, and once that settled one of the first members leaves.
  *Settled*: every partition held by exactly one member and the split balanced (member
  counts differ by at most one). Classic members use ``partition.assignment.strategy``
  ``--classic-strategy`` (range: eager, the usual stop-the-world) with a 500 ms heartbeat;
  KIP-848 members ``group.protocol=consumer`` with the broker's uniform assignor and its
  heartbeat interval set to 500 ms too. Each member keeps what it holds from its rebalance
  callbacks; while the group settles the main thread samples them every 2 ms and records
  how many members that were there before were left holding nothing by a revocation
  (stopped consuming) and the partition-seconds during which a partition had no owner.

Examples::

    python benchmarks/e2e/groups.py --broker both --repeat 3
    python benchmarks/e2e/groups.py --broker pylog --members 4 --partitions 12 --seconds 2
    python benchmarks/e2e/groups.py --settle --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BrokerProc, create_topic, git_commit  # noqa: E402

_GROUP_CLIENT = r"""
import json, os, sys, threading, time
from confluent_kafka import Consumer, TopicPartition
a = json.loads(sys.argv[1])
topic, nparts = a["topic"], a["partitions"]
conf = {"bootstrap.servers": a["bootstrap"], "group.id": a["group"], "enable.auto.commit": False,
        "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"}


class Member:
    def __init__(self, i):
        self.owned = set()
        self.lock = threading.Lock()
        self.stop = False
        self.c = Consumer(dict(conf, **{"client.id": f"m{i}"}))
        self.t = threading.Thread(target=self.run, daemon=True)

    def on_assign(self, c, parts):
        with self.lock:
            self.owned = {p.partition for p in parts}

    def on_revoke(self, c, parts):
        with self.lock:
            self.owned = set()

    def start(self):
        self.c.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        self.t.start()

    def run(self):
        while not self.stop:
            self.c.poll(0.05)

    def close(self):
        self.stop = True
        self.t.join()
        self.c.close()


def broker_cpu():  # the broker process's CPU seconds (utime + stime, all its threads)
    with open(f"/proc/{a['broker_pid']}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def covered(members, need_nonempty=()):
    seen = []
    for m in members:
        with m.lock:
            seen.extend(m.owned)
    if len(seen) != nparts or set(seen) != set(range(nparts)):
        return False
    return all(m.owned for m in need_nonempty)


def wait(members, need_nonempty=(), timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if covered(members, need_nonempty):
            return True
        time.sleep(0.002)
    return False


out = {}
if a["mode"] == "rebalance":
    members = [Member(i) for i in range(a["members"])]
    for m in members:  # connected, metadata known: not part of the timing
        m.c.list_topics(topic, timeout=30)
    t0 = time.monotonic()
    for m in members:
        m.start()
    ok = wait(members, need_nonempty=members if a["members"] <= nparts else ())
    out["join_s"] = time.monotonic() - t0 if ok else None
    gone = members.pop()
    t0 = time.monotonic()
    gone.close()
    # the others first lose their partitions (eager revoke), then get the new assignment
    ok = wait(members, need_nonempty=members if len(members) <= nparts else ())
    out["leave_s"] = time.monotonic() - t0 if ok else None
    new = Member(len(members) + 1)
    new.c.list_topics(topic, timeout=30)
    t0 = time.monotonic()
    new.start()
    ok = wait(members + [new], need_nonempty=[new])
    out["join_one_s"] = time.monotonic() - t0 if ok else None
    for m in members + [new]:
        m.close()
else:
    acked = [0]
    errors = [0]

    def on_commit(err, parts):
        if err is not None:
            errors[0] += 1
        else:
            acked[0] += 1

    c = Consumer(dict(conf, on_commit=on_commit))
    c.list_topics(topic, timeout=30)
    tp0 = [TopicPartition(topic, 0, 0)]
    c.assign(tp0)
    c.commit(offsets=tp0, asynchronous=False)  # coordinator found: not part of the timing
    secs = a["seconds"]
    n, t0, cpu0 = 0, time.monotonic(), broker_cpu()
    while time.monotonic() - t0 < secs:
        n += 1
        c.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
    out["sync_commits_per_s"] = n / (time.monotonic() - t0)
    out["sync_broker_cpu_us_per_commit"] = (broker_cpu() - cpu0) / n * 1e6
    sync_n = n
    acked[0] = 0
    n, t0, cpu0 = sync_n, time.monotonic(), broker_cpu()
    while time.monotonic() - t0 < secs:
        n += 1
        c.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=True)
        if n % 1000 == 0:
            c.poll(0)
            while n - sync_n - acked[0] - errors[0] > 20000:  # bound what is outstanding
                c.poll(0.001)
    deadline = time.monotonic() + 60
    while acked[0] + errors[0] < n - sync_n and time.monotonic() < deadline:
        c.poll(0.01)
    out["async_commits_per_s"] = acked[0] / (time.monotonic() - t0)
    out["async_broker_cpu_us_per_commit"] = (broker_cpu() - cpu0) / max(acked[0], 1) * 1e6
    out["async_errors"] = errors[0]
    out["async_unacked"] = n - sync_n - acked[0] - errors[0]
    got = c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    out["last_committed_ok"] = got == n
    c.close()
print(json.dumps(out))
"""


_SETTLE_CLIENT = r"""
import json, sys, threading, time
from confluent_kafka import Consumer
a = json.loads(sys.argv[1])
topic, nparts = a["topic"], a["partitions"]
conf = {"bootstrap.servers": a["bootstrap"], "group.id": a["group"], "enable.auto.commit": False,
        "auto.offset.reset": "earliest"}
if a["protocol"] == "classic":
    conf.update({"group.protocol": "classic", "partition.assignment.strategy": a["strategy"],
                 "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
else:
    conf.update({"group.protocol": "consumer"})
EAGER = a["protocol"] == "classic" and a["strategy"] != "cooperative-sticky"


class Member:
    # Each member polls on its own thread; its rebalance callbacks (run inside poll) keep
    # what it holds: eager assignments replace it, incremental ones (KIP-848, cooperative)
    # add to it; a revocation that leaves it holding nothing counts as a stop.
    def __init__(self, i):
        self.owned = frozenset()
        self.stops = 0
        self.lock = threading.Lock()
        self.stop = False
        self.c = Consumer(dict(conf, **{"client.id": f"m{i}"}))
        self.c.list_topics(topic, timeout=30)  # connected, metadata known: not timed
        self.t = threading.Thread(target=self.run, daemon=True)

    def on_assign(self, c, parts):
        got = frozenset(tp.partition for tp in parts)
        with self.lock:
            self.owned = got if EAGER else self.owned | got

    def on_revoke(self, c, parts):
        with self.lock:
            left = self.owned - frozenset(tp.partition for tp in parts)
            if self.owned and not left:
                self.stops += 1
            self.owned = left

    def start(self):
        self.c.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        self.t.start()

    def run(self):
        while not self.stop:
            self.c.poll(0.02)

    def held(self):
        with self.lock:
            return self.owned, self.stops

    def close(self):
        self.stop = True
        self.t.join()
        self.c.close()


def settle(members, before, timeout=120.0):
    # Sample until settled; returns (seconds, members of `before` left holding nothing by a
    # revocation meanwhile, partition-seconds without an owner).
    t0 = last = time.monotonic()
    stops0 = {m: m.held()[1] for m in before}
    unowned_ps = 0.0

    def stopped():
        return sum(1 for m in before if m in members and m.held()[1] > stops0[m])

    while time.monotonic() - t0 < timeout:
        now = time.monotonic()
        held = [m.held()[0] for m in members]
        unowned_ps += (nparts - len(frozenset().union(*held))) * (now - last)
        last = now
        counts = [len(h) for h in held]
        if sum(counts) == nparts and len(frozenset().union(*held)) == nparts and max(counts) - min(counts) <= 1:
            return now - t0, stopped(), unowned_ps
        time.sleep(0.002)
    return None, stopped(), unowned_ps


members = [Member(i) for i in range(a["members"])]
for m in members:
    m.start()
formed, _s, _u = settle(members, set())
out = {"form_s": formed}
first = set(members)
new = Member(len(members))
new.start()
members.append(new)
out["join_settle_s"], out["join_stopped_members"], out["join_unowned_partition_s"] = settle(members, first)
gone = members.pop(0)
first = set(members)
gone.close()
out["leave_settle_s"], out["leave_stopped_members"], out["leave_unowned_partition_s"] = settle(members, first)
for m in members:
    m.close()
print(json.dumps(out))
"""


def run_settle(protocol: str, args: argparse.Namespace, round_no: int) -> dict[str, Any]:
    """One settle run (see the module docstring) on a fresh pylog broker."""
    with tempfile.TemporaryDirectory(prefix=f"settle-{protocol}-") as workdir:
        overrides = [f"group.initial.rebalance.delay.ms={args.initial_delay_ms}",
                     "group.consumer.heartbeat.interval.ms=500",
                     "group.consumer.min.heartbeat.interval.ms=100",
                     "offsets.topic.num.partitions=50"]
        broker = BrokerProc("pylog", workdir, overrides)
        load0 = os.getloadavg()[0]
        try:
            topic = f"settle-{round_no}"
            create_topic(broker.bootstrap, topic, args.partitions)
            cpu0 = broker.cpu()
            params = dict(bootstrap=broker.bootstrap, topic=topic, partitions=args.partitions,
                          group=f"settle-{protocol}-{round_no}", members=args.members, protocol=protocol,
                          strategy=args.classic_strategy)
            proc = subprocess.run([sys.executable, "-c", _SETTLE_CLIENT, json.dumps(params)],
                                  capture_output=True, text=True, timeout=900)
            if proc.returncode:
                raise RuntimeError(f"settle client failed ({proc.returncode}): {proc.stderr[-2000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["broker_cpu_s"] = broker.cpu() - cpu0
        finally:
            broker.stop()
    result.update(protocol=protocol, load_before=load0, load_after=os.getloadavg()[0])
    return result


def settle_main(args: argparse.Namespace) -> int:
    protocols = ("classic", "consumer")
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in protocols}
    for r in range(args.repeat):
        for proto in protocols if r % 2 == 0 else protocols[::-1]:  # interleaved A/B
            res = run_settle(proto, args, r)
            runs[proto].append(res)
            print(json.dumps(res), file=sys.stderr, flush=True)
    keys = ("form_s", "join_settle_s", "join_stopped_members", "join_unowned_partition_s",
            "leave_settle_s", "leave_stopped_members", "leave_unowned_partition_s", "broker_cpu_s")
    med = {p: {k: _median(v, k) for k in keys} for p, v in runs.items()}
    ratios = {k: round(med["classic"][k] / med["consumer"][k], 3)
              for k in ("join_settle_s", "leave_settle_s")
              if med["classic"][k] and med["consumer"][k]}
    print(json.dumps({"commit": git_commit(), "members": args.members, "partitions": args.partitions,
                      "classic_strategy": args.classic_strategy, "repeat": args.repeat,
                      "median": med, "ratio_classic_vs_consumer": ratios, "runs": runs}, indent=2))
    return 0


def run_client(params: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _GROUP_CLIENT, json.dumps(params)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"group client failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_one(kind: str, args: argparse.Namespace, round_no: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"groups-{kind}-") as workdir:
        overrides = [f"group.initial.rebalance.delay.ms={args.initial_delay_ms}",
                     "offsets.topic.num.partitions=50"] if kind == "pylog" else []
        broker = BrokerProc(kind, workdir, overrides)
        try:
            topic = f"groups-{round_no}"
            create_topic(broker.bootstrap, topic, args.partitions)
            base = dict(bootstrap=broker.bootstrap, topic=topic, partitions=args.partitions,
                        broker_pid=broker.proc.pid)
            cpu0 = broker.cpu()
            result = {}
            if not args.commits_only:
                result = run_client(dict(base, mode="rebalance", group=f"rb-{round_no}",
                                         members=args.members))
            result.update(run_client(dict(base, mode="commits", group=f"cm-{round_no}",
                                          seconds=args.seconds)))
            result["broker_cpu_s"] = broker.cpu() - cpu0
        finally:
            broker.stop()
    result["broker"] = kind
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", choices=("pylog", "tansu", "both"), default="both")
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--seconds", type=float, default=10.0, help="length of each commit phase")
    p.add_argument("--initial-delay-ms", type=int, default=0,
                   help="pylog's group.initial.rebalance.delay.ms (Kafka's default is 3000)")
    p.add_argument("--repeat", type=int, default=1, help="rounds, alternating the brokers")
    p.add_argument("--commits-only", action="store_true", help="skip the rebalance scenarios")
    p.add_argument("--settle", action="store_true",
                   help="classic vs KIP-848: settle time after a join and a leave (pylog only)")
    p.add_argument("--classic-strategy", default="range",
                   help="partition.assignment.strategy of the classic members in --settle")
    args = p.parse_args(argv)
    if args.settle:
        return settle_main(args)
    kinds = ["tansu", "pylog"] if args.broker == "both" else [args.broker]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for r in range(args.repeat):
        for kind in kinds:
            res = run_one(kind, args, r)
            runs[kind].append(res)
            print(json.dumps(res), file=sys.stderr, flush=True)
    keys = ("join_s", "leave_s", "join_one_s", "sync_commits_per_s", "async_commits_per_s",
            "sync_broker_cpu_us_per_commit", "async_broker_cpu_us_per_commit", "broker_cpu_s")
    summary: dict[str, Any] = {"commit": git_commit(), "members": args.members,
                               "partitions": args.partitions, "seconds": args.seconds,
                               "initial_delay_ms": args.initial_delay_ms, "repeat": args.repeat,
                               "median": {k: {key: _median(v, key) for key in keys}
                                          for k, v in runs.items()},
                               "runs": runs}
    if len(kinds) == 2:
        med = summary["median"]
        ratios = {}
        for key in keys:
            a, b = med["pylog"][key], med["tansu"][key]
            if a and b:
                # times: Tansu / pylog (above 1 = pylog faster); rates: pylog / Tansu
                # (CPU per commit: Tansu / pylog, above 1 = pylog cheaper)
                ratios[key] = round(a / b if key.endswith("_per_s") else b / a, 3)
        summary["ratio_pylog_vs_tansu"] = ratios
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
