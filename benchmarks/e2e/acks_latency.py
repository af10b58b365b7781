"""acks=all ack latency of one producer pattern at fixed offered rates, on a fresh local
cluster (3 brokers, an RF=3 topic with ``min.insync.replicas=2``, 6 partitions), with
librdkafka's own statistics beside it. ``cluster.py --scenario latency`` searches the rate
a pattern sustains; this runs the rates given, e.g. to check a figure measured elsewhere.

Each rate: ``--seconds`` of paced records from ``--producers`` confluent-kafka processes
(``harness.run_confluent_produce``: batch.size 1,000,000, no idempotence, delivery-report
latency), printed as one JSON line: offered and achieved records/s, ack p50/p99 and
librdkafka's int_latency / outbuf_latency / rtt and requests awaiting an answer.

Example (one producer, linger.ms 1)::

    python benchmarks/e2e/acks_latency.py --rates 2000,20000,96000 --linger-ms 1 --producers 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import LocalCluster, create_topic  # noqa: E402
from harness import git_commit, run_confluent_produce  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="2000,20000", help="offered records/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--linger-ms", type=int, default=1)
    ap.add_argument("--record-size", type=int, default=100)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="acks-latency-") as wd:
        cluster = LocalCluster(wd, 3, 6000)
        try:
            create_topic(cluster.bootstrap, "rf3", 6, 3, {"min.insync.replicas": "2"})
            for rate in (float(r) for r in args.rates.split(",")):
                ns = argparse.Namespace(
                    num_records=int(rate * args.seconds), record_size=args.record_size,
                    partitions=6, producers=args.producers, acks="all", linger_ms=args.linger_ms,
                    batch_size=1_000_000, compression="none", throughput=rate, stats_ms=1000)
                res = run_confluent_produce(cluster.bootstrap, "rf3", ns, wd)
                print(json.dumps({"offered": round(rate),
                                  "achieved": res["sum_of_producer_records_per_s"],
                                  "ack_p50_ms": res["p50_ms"], "ack_p99_ms": res["p99_ms"],
                                  "librdkafka": res.get("librdkafka")}), flush=True)
        finally:
            cluster.stop()
    print(f"commit {git_commit()}, {args.producers} producer(s), linger.ms {args.linger_ms}, "
          f"{args.seconds} s per rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
