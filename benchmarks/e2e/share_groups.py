"""Share-group benchmark (KIP-932, issue 25): acknowledged records per second with
``--consumers`` confluent-kafka ``ShareConsumer``s (4) on one partition.

``--num-records`` records (200,000) of ``--record-size`` bytes (100) are produced to a topic
of ``--partitions`` partitions (1) first; then the consumers, each in its own process (one
librdkafka instance each, as separate workers would be), join one share group with
``share.auto.offset.reset=earliest`` (a group config, IncrementalAlterConfigs on the GROUP
resource) and poll in implicit acknowledgement mode (the records of a poll are accepted by
the next one). The clock runs from the moment every consumer has subscribed until the
records are all accepted, i.e. until the share-partition start offset reached the end: each
process reports what it received, and the run ends when the union covers every record
(``--seconds`` bounds it). Reported: records/s (distinct records over the elapsed time),
records delivered more than once (0 expected: a lock expires only after 30 s), each
consumer's share, and the broker's CPU seconds.

Example::

    python benchmarks/e2e/share_groups.py --num-records 200000 --consumers 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BrokerProc, create_topic, git_commit  # noqa: E402

_PRODUCER = r"""
import sys
from confluent_kafka import Producer
bs, topic, n, size, parts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 262144, "acks": "1"})
for i in range(n):
    v = str(i).encode().ljust(size, b".")
    while True:
        try:
            p.produce(topic, value=v, partition=i % parts)
            break
        except BufferError:
            p.poll(0.05)
    if i % 10000 == 0:
        p.poll(0)
assert p.flush(60) == 0
"""

_CONSUMER = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
from confluent_kafka import ShareConsumer
a = json.loads(sys.argv[1])
c = ShareConsumer({"bootstrap.servers": a["bootstrap"], "group.id": a["group"],
                   "client.id": a["client_id"], "log_level": 3})
c.subscribe([a["topic"]])
print("ready", flush=True)
got = 0
seen = set()
dups = 0
last = time.monotonic()
end = time.monotonic() + a["seconds"]
while time.monotonic() < end:
    for m in c.poll(0.2):
        if m.error() is not None:
            continue
        key = (m.partition(), m.offset())
        if key in seen:
            dups += 1
        seen.add(key)
        got += 1
    now = time.monotonic()
    if now - last > 0.2:
        print(json.dumps({"got": got, "dups": dups, "offsets": len(seen)}), flush=True)
        last = now
    if sys.stdin.closed:
        break
c.poll(0.5)  # accepts the last batch (implicit mode)
c.close()
print(json.dumps({"got": got, "dups": dups, "offsets": len(seen), "final": True}), flush=True)
"""


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as work:
        overrides = [f"group.share.partition.max.record.locks={args.max_record_locks}"]
        broker = BrokerProc("pylog", work, overrides)
        try:
            bs = broker.bootstrap
            create_topic(bs, "share-bench", args.partitions)
            subprocess.run([sys.executable, "-c", _PRODUCER, bs, "share-bench", str(args.num_records),
                            str(args.record_size), str(args.partitions)], check=True, timeout=600)
            group = "share-bench-group"
            _set_group_config(bs, group)
            cpu0 = broker.cpu()
            procs = []
            for i in range(args.consumers):
                a = {"bootstrap": bs, "group": group, "topic": "share-bench", "client_id": f"w{i}",
                     "seconds": args.seconds}
                procs.append(subprocess.Popen([sys.executable, "-c", _CONSUMER, json.dumps(a)],
                                              stdout=subprocess.PIPE, text=True, bufsize=1))
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            start = time.monotonic()
            latest: list[dict[str, Any]] = [{"got": 0, "dups": 0, "offsets": 0} for _ in procs]
            import selectors

            sel = selectors.DefaultSelector()
            for i, p in enumerate(procs):
                sel.register(p.stdout, selectors.EVENT_READ, i)  # type: ignore[arg-type]
            done_at = None
            while time.monotonic() - start < args.seconds + 30:
                for key, _ in sel.select(1.0):
                    line = key.fileobj.readline()  # type: ignore[union-attr]
                    if line:
                        latest[key.data] = json.loads(line)
                if done_at is None and sum(s["offsets"] for s in latest) >= args.num_records:
                    done_at = time.monotonic()
                    break
            elapsed = (done_at or time.monotonic()) - start
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
            cpu = broker.cpu() - cpu0
        finally:
            broker.stop()
    got = sum(s["got"] for s in latest)
    distinct = sum(s["offsets"] for s in latest)
    return {
        "consumers": args.consumers, "partitions": args.partitions, "num_records": args.num_records,
        "record_size": args.record_size, "max_record_locks": args.max_record_locks,
        "complete": done_at is not None,
        "elapsed_s": round(elapsed, 3), "records_per_s": round(distinct / elapsed),
        "delivered": got, "distinct": distinct, "per_consumer": [s["got"] for s in latest],
        "broker_cpu_s": round(cpu, 2), "commit": git_commit(),
    }


def _set_group_config(bootstrap: str, group: str) -> None:
    from pylog.client import Admin
    from pylog.client.aio.admin import ConfigResource

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_configs(ConfigResource("group", group), {"share.auto.offset.reset": "earliest"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--num-records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--max-record-locks", type=int, default=2000,
                    help="group.share.partition.max.record.locks (the in-flight window)")
    args = ap.parse_args()
    for _ in range(args.repeat):
        print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
