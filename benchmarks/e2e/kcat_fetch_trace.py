"""What kcat waits for when it consumes: per-run client CPU and page faults, and a trace of
its fetch round trips, against pylog or Tansu.

Starts one broker as ``harness.py`` does (fresh pylog data dir, or Tansu in memory),
writes ``--num-records`` records with kcat, then consumes them ``--runs`` times with the
harness's kcat consumer command, printing for each run: wall seconds, the broker's CPU
seconds, and kcat's user and system CPU seconds, minor page faults and context switches
(``getrusage(RUSAGE_CHILDREN)`` around the run). A last run adds
``-X debug=fetch,protocol,msg`` and summarises librdkafka's log: per Fetch round trip, the
response size, the round trip (request sent to response read, librdkafka's ``rtt``), the
time librdkafka spends parsing and enqueueing the records before it sends the next Fetch,
and the records enqueued. See RESULTS.md, "Consume path cost".

Examples::

    python benchmarks/e2e/kcat_fetch_trace.py --broker pylog --runs 4
    python benchmarks/e2e/kcat_fetch_trace.py --broker tansu --runs 4
    python benchmarks/e2e/kcat_fetch_trace.py --broker pylog \
        --kcat-consumer-prop max.partition.fetch.bytes=2097152
    python benchmarks/e2e/kcat_fetch_trace.py --broker pylog \
        --pylog-override socket.send.buffer.bytes=-1
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

_LINE = re.compile(r"^%7\|(?P<ts>[0-9.]+)\|(?P<fac>[A-Z]+)\|[^|]*\| \[[^]]*\]: (?P<msg>.*)$")
_RECV = re.compile(r"Received FetchResponse \(v\d+, (?P<size>\d+) bytes, CorrId \d+, rtt (?P<rtt>[0-9.]+)ms\)")
_ENQ = re.compile(r"Enqueue (?P<n>\d+) message\(s\)")


def fetch_trace(log_text: str) -> list[dict[str, Any]]:
    """Fetch round trips from a librdkafka debug log: response bytes, rtt (ms), parse (ms:
    response read to records enqueued) and records."""
    trips: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for line in log_text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        ts, msg = float(m["ts"]), m["msg"]
        r = _RECV.search(msg)
        if r is not None:
            pending = {"bytes": int(r["size"]), "rtt_ms": float(r["rtt"]), "received": ts}
            continue
        e = _ENQ.search(msg)
        if e is not None and pending is not None:
            pending["parse_ms"] = round((ts - pending.pop("received")) * 1000, 1)
            pending["records"] = int(e["n"])
            trips.append(pending)
            pending = None
    return trips


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", choices=["pylog", "tansu"], default="pylog")
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kcat-consumer-prop", action="append", default=["fetch.queue.backoff.ms=10"],
                    metavar="KEY=VALUE", help="-X for the consumer (default: fetch.queue.backoff.ms=10)")
    ap.add_argument("--pylog-override", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    # What run_kcat_produce / run_kcat_consume read (one partition, one process each).
    args.partitions, args.producers, args.consumers = 1, 1, 1
    args.linger_ms, args.batch_size, args.acks, args.compression = 5, 1_000_000, 1, "none"

    workdir = tempfile.mkdtemp(prefix="kcat-trace-")
    env = harness.kcat_env("confluent", workdir)
    broker = harness.BrokerProc(args.broker, workdir, args.pylog_override)
    try:
        topic = "trace"
        harness.create_topic(broker.bootstrap, topic, 1)
        harness.run_kcat_produce(broker.bootstrap, topic, args, os.path.join(workdir, "data"), env)
        for i in range(args.runs):
            cpu0, ru0 = broker.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN)
            res = harness.run_kcat_consume(broker.bootstrap, topic, args, env)
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            print(f"{args.broker} run {i + 1}: {res['seconds']:.3f} s, {res['records']} records, "
                  f"broker CPU {broker.cpu() - cpu0:.3f} s, kcat user {ru1.ru_utime - ru0.ru_utime:.3f} s "
                  f"sys {ru1.ru_stime - ru0.ru_stime:.3f} s, minor faults {ru1.ru_minflt - ru0.ru_minflt}, "
                  f"voluntary/involuntary switches {ru1.ru_nvcsw - ru0.ru_nvcsw}/"
                  f"{ru1.ru_nivcsw - ru0.ru_nivcsw}", flush=True)
        cmd = [harness.kcat(), "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
               "-f", "%o\n", "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760",
               "-c", str(args.num_records), "-X", "debug=fetch,protocol,msg"]
        for prop in args.kcat_consumer_prop:
            cmd += ["-X", prop]
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                              text=True, timeout=900, check=True)
        print(f"{args.broker} traced run: {time.perf_counter() - start:.3f} s")
        trips = fetch_trace(proc.stderr)
        for t in trips:
            print(f"  fetch: {t['bytes']:>10} bytes  rtt {t['rtt_ms']:6.2f} ms  "
                  f"parse {t['parse_ms']:6.1f} ms  {t['records']} records")
        print(f"  {len(trips)} round trips, {sum(t['rtt_ms'] for t in trips):.0f} ms in rtt, "
              f"{sum(t['parse_ms'] for t in trips):.0f} ms parsing")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
