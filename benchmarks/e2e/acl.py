"""The authorizer's cost on produce: two pylog brokers in one run, one without an authorizer
and one with ``authorizer.class.name`` and a realistic ACL set, kcat producing to each in
turn (alternating which goes first) and the consumer reading back.

The ACL broker holds ``--acls`` bindings (literal and prefixed, for other principals, on
topics, groups and transactional ids) plus the ones that let kcat's principal
(``User:ANONYMOUS`` on PLAINTEXT) create, describe and write the benchmark's topics through a
PREFIXED pattern, so every Produce, Metadata and Fetch goes through the index: a prefixed
lookup that finds the entry among the others, then the per-(principal, host, operation,
resource) cache. ``--batch-messages`` sets kcat's batch size: smaller batches mean more
Produce requests per record and so more checks per MB. Prints the medians and the
ACL/no-ACL ratios (the goal: produce at or above 0.97).

Example (the figure in RESULTS.md)::

    python benchmarks/e2e/acl.py --num-records 1000000 --record-size 100 --repeat 5
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
import harness  # noqa: E402  (benchmarks/e2e/harness.py: ports, CPU, kcat, data files)

PREFIX = "acl-bench-"


def acl_file(path: str, count: int) -> None:
    """``acls.json`` (the single node's ACL store) with ``count`` unrelated bindings and
    the benchmark principal's prefixed ones."""
    rows = []
    for i in range(count):
        kind = ("Topic", "Group", "TransactionalId")[i % 3]
        rows.append({"resourceType": kind, "name": f"team{i % 97}-{kind.lower()}-{i}",
                     "patternType": "PREFIXED" if i % 4 == 0 else "LITERAL",
                     "principal": f"User:svc{i % 50}", "permissionType": "Allow",
                     "operation": ("Read", "Write", "Describe")[i % 3], "host": "*"})
    for op in ("Create", "Write", "Read"):
        rows.append({"resourceType": "Topic", "name": PREFIX, "patternType": "PREFIXED",
                     "principal": "User:ANONYMOUS", "permissionType": "Allow", "operation": op,
                     "host": "*"})
    with open(path, "w") as f:
        json.dump({"version": 1, "acls": rows}, f)


def start_broker(workdir: str, name: str, with_acls: bool, acls: int) -> tuple[subprocess.Popen[bytes], int]:
    port = harness.free_port()
    data = os.path.join(workdir, name)
    os.makedirs(data)
    overrides = [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}"]
    if with_acls:
        acl_file(os.path.join(data, "acls.json"), acls)
        overrides += ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                      "super.users=User:CN=admin"]
    log = open(os.path.join(workdir, name + ".log"), "wb")  # noqa: SIM115 - the broker's lifetime
    cmd = [sys.executable, "-m", "pylog", "broker", "--log-level", "WARNING"]
    for item in overrides:
        cmd += ["--override", item]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    harness.wait_port(port)
    return proc, port


def one_round(port: int, args: argparse.Namespace, data_file: str, pid: int,
              env: dict[str, str] | None) -> dict[str, Any]:
    topic = f"{PREFIX}{int(time.time() * 1000)}"
    base = [harness.kcat(), "-b", f"127.0.0.1:{port}"]
    harness.create_topic(f"127.0.0.1:{port}", topic, 1)
    produce = base + ["-P", "-t", topic, "-p", "0", "-X", "linger.ms=5",
                      "-X", f"batch.num.messages={args.batch_messages}",
                      "-X", "batch.size=1000000", "-X", "queue.buffering.max.messages=2000000",
                      "-X", "queue.buffering.max.kbytes=2097151", "-X", "acks=1", "-l", data_file]
    consume = base + ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\n",
                      "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760",
                      "-c", str(args.num_records)]
    mb = args.num_records * args.record_size / 1e6
    out = {}
    for phase, cmd in (("produce", produce), ("consume", consume)):
        cpu0 = harness.cpu_seconds(pid)
        seconds, outs = harness._run_all([cmd], env)
        cpu = harness.cpu_seconds(pid) - cpu0
        lines = outs[0].count(b"\n")
        if phase == "consume" and lines != args.num_records:
            raise SystemExit(f"consumer read {lines} of {args.num_records} records")
        out[phase] = {"seconds": round(seconds, 3), "records_per_s": round(args.num_records / seconds),
                      "mb_per_s": round(mb / seconds, 1), "broker_cpu_s": round(cpu, 3)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--acls", type=int, default=1000, help="unrelated ACLs on the ACL broker")
    ap.add_argument("--batch-messages", type=int, default=10000,
                    help="kcat's batch.num.messages (smaller: more requests, more checks)")
    ap.add_argument("--kcat-librdkafka", choices=["system", "confluent"], default="system")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pylog-acl-bench-") as workdir:
        env = harness.kcat_env(args.kcat_librdkafka, workdir)
        data_file = harness._kcat_data(os.path.join(workdir, "records"), args.num_records,
                                       args.record_size)
        brokers = {"none": start_broker(workdir, "none", False, 0),
                   "acls": start_broker(workdir, "acls", True, args.acls)}
        runs: dict[str, list[dict[str, Any]]] = {"none": [], "acls": []}
        try:
            for r in range(args.repeat):  # alternate which goes first
                for kind in (["none", "acls"] if r % 2 == 0 else ["acls", "none"]):
                    proc, port = brokers[kind]
                    runs[kind].append(one_round(port, args, data_file, proc.pid, env))
        finally:
            for proc, _port in brokers.values():
                proc.terminate()
                proc.wait(30)
    medians = {kind: {phase: {k: statistics.median(r[phase][k] for r in rs) for k in rs[0][phase]}
                      for phase in ("produce", "consume")}
               for kind, rs in runs.items()}
    ratio = {phase: round(medians["acls"][phase]["mb_per_s"] / medians["none"][phase]["mb_per_s"], 3)
             for phase in ("produce", "consume")}
    print(json.dumps({
        "num_records": args.num_records, "record_size": args.record_size, "repeat": args.repeat,
        "acls": args.acls + 3, "batch_messages": args.batch_messages,
        "commit": harness.git_commit(), "implementation": harness.implementation(),
        "kcat_librdkafka": harness.kcat_librdkafka_version(env),
        "median": medians, "acls_over_none": ratio, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
