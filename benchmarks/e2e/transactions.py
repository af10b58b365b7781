"""Transactions benchmark (issue 10): transactional produce and read_committed consume,
through confluent-kafka (librdkafka), against pylog and Tansu in the same run.

Scenarios, each in a child process timed on its own wall clock:

- ``txn-produce``: one transactional producer runs ``--transactions`` transactions of
  ``--per-txn`` records (100) of ``--record-size`` bytes over ``--partitions`` partitions
  (begin, produce, commit_transaction: a full round of AddPartitionsToTxn, Produce, EndTxn
  and markers per transaction); every ``--abort-every``-th transaction is aborted instead.
  Figures: transactions/s and records/s.
- ``idem-produce``: the same records from an idempotent, non-transactional producer with
  the same linger and batch settings, flushed once per "transaction" worth of records
  (the same request pattern without the transaction; linger.ms=1 for both): the price of transactions on the
  same broker in the same run.
- ``consume``: after one untimed read, one consumer reads the whole topic (what ``txn-produce`` wrote) with
  ``isolation.level=read_committed`` and then ``read_uncommitted``: records/s of each
  (read_committed returns fewer records: the aborted ones, flushed to the broker before
  each abort, are dropped by the client from the broker's aborted-transaction list; both
  read the same bytes).

Examples::

    python benchmarks/e2e/transactions.py --broker both --repeat 3
    python benchmarks/e2e/transactions.py --broker pylog --transactions 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BrokerProc, _spawn_all, create_topic, git_commit  # noqa: E402

_PRODUCER = r"""
import json, sys, time
from confluent_kafka import Producer
a = json.loads(sys.argv[1])
conf = {"bootstrap.servers": a["bootstrap"], "linger.ms": 1, "enable.idempotence": True}
if a["transactional"]:
    conf["transactional.id"] = a["txn_id"]
p = Producer(conf)
if a["transactional"]:
    p.init_transactions(60)
value = b"x" * a["record_size"]
nparts = a["partitions"]
aborted = 0
start = time.time()
for t in range(a["transactions"]):
    abort = a["abort_every"] > 0 and t % a["abort_every"] == a["abort_every"] - 1
    if a["transactional"]:
        p.begin_transaction()
    for i in range(a["per_txn"]):
        p.produce(a["topic"], value, partition=i % nparts)
    if not a["transactional"]:
        assert p.flush(60) == 0
    elif abort:
        assert p.flush(60) == 0  # abort_transaction purges unsent records: let them land first
        p.abort_transaction(60)
        aborted += 1
    else:
        p.commit_transaction(60)
end = time.time()
print(json.dumps({"start": start, "end": end, "aborted": aborted}))
"""

_CONSUMER = r"""
import json, sys, time
from confluent_kafka import Consumer, TopicPartition, KafkaError
a = json.loads(sys.argv[1])
c = Consumer({"bootstrap.servers": a["bootstrap"], "group.id": "bench", "enable.auto.commit": False,
              "isolation.level": a["isolation"], "enable.partition.eof": True,
              "fetch.wait.max.ms": 100})
c.assign([TopicPartition(a["topic"], p, 0) for p in range(a["partitions"])])
# Timed from the first record to the last partition's end: connecting is not the subject.
eof, got, start, end = set(), 0, None, None
while len(eof) < a["partitions"]:
    for m in c.consume(1000, 0.05):
        if m.error() is None:
            if start is None:
                start = time.time()
            got += 1
        elif m.error().code() == KafkaError._PARTITION_EOF:
            eof.add(m.partition())
            end = time.time()
c.close()
print(json.dumps({"start": start, "end": end, "records": got}))
"""


def bench_one(kind: str, args: argparse.Namespace, workdir: str, run: int) -> dict[str, Any]:
    broker = BrokerProc(kind, workdir)
    try:
        out: dict[str, Any] = {"broker": kind}
        base = dict(bootstrap=broker.bootstrap, record_size=args.record_size, per_txn=args.per_txn,
                    transactions=args.transactions, partitions=args.partitions,
                    abort_every=args.abort_every)
        for name, transactional in (("txn", True), ("idem", False)):
            topic = f"bench-{name}-{run}"
            create_topic(broker.bootstrap, topic, args.partitions)
            cpu0 = broker.cpu()  # the producer's whole life: its start and init are small
            (res,) = _spawn_all(_PRODUCER, [dict(base, topic=topic, transactional=transactional,
                                                 txn_id=f"bench-{kind}-{run}")])
            # Broker CPU per transaction (per 100 records for the idempotent run).
            out[f"{name}_broker_cpu_us_per_txn"] = (broker.cpu() - cpu0) / args.transactions * 1e6
            secs = res["end"] - res["start"]
            out[f"{name}_seconds"] = secs
            out[f"{name}_records_per_s"] = args.transactions * args.per_txn / secs
            if transactional:
                out["txn_per_s"] = args.transactions / secs
        # One untimed pass first: the first reader after the writes pays for cold caches
        # (ours and the client's), which would be charged to whichever isolation ran first.
        for iso in ("warm-up", "read_committed", "read_uncommitted"):
            (res,) = _spawn_all(_CONSUMER, [dict(
                bootstrap=broker.bootstrap, topic=f"bench-txn-{run}", partitions=args.partitions,
                isolation="read_uncommitted" if iso == "warm-up" else iso)])
            if iso == "warm-up":
                continue
            secs = res["end"] - res["start"]
            out[f"{iso}_records"] = res["records"]
            out[f"{iso}_seconds"] = secs
            out[f"{iso}_records_per_s"] = res["records"] / secs
        return out
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=("pylog", "tansu", "both"), default="both")
    ap.add_argument("--transactions", type=int, default=500)
    ap.add_argument("--per-txn", type=int, default=100)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--abort-every", type=int, default=10,
                    help="abort every Nth transaction (0: never)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="also write the runs to this file")
    args = ap.parse_args(argv)
    kinds = ["pylog", "tansu"] if args.broker == "both" else [args.broker]
    runs: list[dict[str, Any]] = []
    for r in range(args.repeat):
        for kind in kinds:
            with tempfile.TemporaryDirectory(prefix=f"txn-bench-{kind}-") as wd:
                res = bench_one(kind, args, wd, r)
                print(json.dumps(res), flush=True)
                runs.append(res)
    print(f"commit {git_commit()}, {args.transactions} x {args.per_txn} records of "
          f"{args.record_size} B, {args.partitions} partitions, abort every {args.abort_every}")
    keys = ("txn_per_s", "txn_records_per_s", "txn_broker_cpu_us_per_txn", "idem_records_per_s",
            "idem_broker_cpu_us_per_txn", "read_committed_records_per_s",
            "read_uncommitted_records_per_s")
    for kind in kinds:
        mine = [x for x in runs if x["broker"] == kind]
        med = {k: statistics.median(x[k] for x in mine) for k in keys}
        print(f"{kind:6s} " + "  ".join(f"{k}={v:,.0f}" for k, v in med.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
