"""What the metrics cost the produce path: the same produce load against three brokers in one
run, interleaved, repeated; figures are medians.

Arms:

- ``before``: the source tree of ``--baseline`` (default: the commit before the metrics
  work, ``71e93a4``), extracted with ``git archive`` into a temporary directory, with this
  tree's compiled ``logcore`` extensions copied in (logcore's compiled units are the same);
- ``counters``: this tree (copied at the start, so edits during the run do not leak in),
  no ``metrics.listener`` (the request path counts anyway);
- ``scraped``: this tree with ``metrics.listener`` on and ``/metrics`` fetched every
  ``--scrape-interval`` seconds during the run (1 s: far more often than Prometheus's
  usual 15-60 s);
- ``again``: the ``before`` tree once more, an A/A control: how far two runs of the same
  code drift apart here (``--arms before,again,counters``).

The load is kcat (librdkafka, C: the broker, not the client, is the bottleneck) producing
``--num-records`` records of ``--record-size`` bytes over ``--partitions`` partitions with
``batch.size`` 16 KiB (Kafka's default, many small requests: the pessimistic case for costs
paid per request and per partition), acks=1. Each run starts a fresh broker
(``benchmarks/e2e/harness.py``'s ``BrokerProc``) on a fresh data directory; the broker's
CPU seconds come from /proc. Output: JSON with the medians per arm, and the median over
repetitions of each arm's throughput and CPU per record relative to ``before`` in the same
repetition (paired, so that load from other processes moving between repetitions cancels).

On a machine shared with other work those end-to-end figures move by more than the cost
being measured, so the output also has ``cost_model``: the CPU the metrics' request-path
code takes per Produce request and per partition of one (timeit, best of 7, in a child
process on this tree), times the requests and partitions the ``scraped`` arm's last scrape
counted, over the broker CPU the ``before`` arm spent on the same records: the share of
produce CPU the counting costs, without the noise of whole runs.

Example (the figure in RESULTS.md, "Metrics")::

    python benchmarks/metrics_overhead.py --repeat 9
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
import harness  # noqa: E402

REPO = harness.REPO


def current_tree(workdir: str) -> str:
    """A copy of this tree's ``src/`` (with its compiled extensions)."""
    out = os.path.join(workdir, "current", "src")
    shutil.copytree(os.path.join(REPO, "src"), out,
                    ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.html"))
    return out


_MICRO = r"""
import json, timeit
from pylog.metrics.registry import BrokerMetrics
m = BrokerMetrics()
m.record_request(0, 9, 0.0001, 0.002, 0.0, 0.0003)
def request():
    m.record_request(0, 9, 0.0001, 0.002, 0.0, 0.0003)
def partition():
    stats = m.topic("t")
    stats.total_produce_requests += 1
    stats.messages_in += 150
    stats.bytes_in += 16000
n = 200000
print(json.dumps({
    "request_us": min(timeit.repeat(request, number=n, repeat=7)) / n * 1e6,
    "partition_us": min(timeit.repeat(partition, number=n, repeat=7)) / n * 1e6,
    "call_us": min(timeit.repeat(lambda: None, number=n, repeat=7)) / n * 1e6,
}))
"""


def micro_costs(src: str) -> dict[str, float]:
    """The metrics' request-path costs in us (call overhead of timeit's callable removed)."""
    out = subprocess.run([sys.executable, "-c", _MICRO], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": src}).stdout
    raw = json.loads(out)
    return {k: round(max(raw[k] - raw["call_us"], 0.0), 3) for k in ("request_us", "partition_us")}


def produce_counts(body: bytes) -> tuple[float, float]:
    """(Produce requests, partitions of Produce requests) in a scrape."""
    requests = partitions = 0.0
    for line in body.decode().splitlines():
        if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'):
            requests += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kafka_server_brokertopicmetrics_totalproducerequests_total "):
            partitions = float(line.rsplit(" ", 1)[1])
    return requests, partitions


def baseline_tree(rev: str, workdir: str) -> str:
    """``src/`` of ``rev`` in ``workdir``, with this tree's compiled extensions."""
    out = os.path.join(workdir, "baseline")
    os.makedirs(out)
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "src"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", out], input=archive, check=True)
    for so in glob.glob(os.path.join(REPO, "src", "logcore", "*.so")):
        shutil.copy2(so, os.path.join(out, "src", "logcore"))
    return os.path.join(out, "src")


class Scraper(threading.Thread):
    """GET /metrics every ``interval`` seconds until stopped; counts the scrapes."""

    def __init__(self, port: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.done = threading.Event()
        self.scrapes = 0
        self.bytes = 0
        self.last = b""

    def run(self) -> None:
        while not self.done.wait(self.interval):
            try:
                with urllib.request.urlopen(self.url, timeout=10) as resp:
                    self.last = resp.read()
                    self.bytes = len(self.last)
                self.scrapes += 1
            except OSError:
                continue


def one_run(arm: str, src: str, args: argparse.Namespace, workdir: str, data_file: str,
            env: dict[str, str] | None) -> dict[str, Any]:
    overrides = []
    scraper = None
    port = 0
    if arm == "scraped":
        port = harness.free_port()
        overrides.append(f"metrics.listener=http://127.0.0.1:{port}")
    os.environ["PYTHONPATH"] = src
    run_dir = tempfile.mkdtemp(dir=workdir)
    broker = harness.BrokerProc("pylog", run_dir, overrides)
    topic = f"bench-{int(time.time() * 1000)}"
    try:
        harness.create_topic(broker.bootstrap, topic, args.partitions)
        if port:
            scraper = Scraper(port, args.scrape_interval)
            scraper.start()
        cpu0 = broker.cpu()
        res = harness.run_kcat_produce(broker.bootstrap, topic, args, data_file, env)
        cpu = broker.cpu() - cpu0
        if scraper is not None:  # one more scrape: every request of the run counted
            scraper.done.set()
            scraper.join()
            scraper.interval = 0
            with urllib.request.urlopen(scraper.url, timeout=10) as resp:
                scraper.last = resp.read()
    finally:
        if scraper is not None:
            scraper.done.set()
            scraper.join()
        broker.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    out = {"records_per_s": round(args.num_records / res["seconds"]),
           "broker_cpu_us_per_record": round(cpu / args.num_records * 1e6, 4),
           "seconds": round(res["seconds"], 3)}
    if scraper is not None:
        out["scrapes"] = scraper.scrapes
        out["scrape_bytes"] = scraper.bytes
        out["produce_requests"], out["produce_partitions"] = produce_counts(scraper.last)
        out["broker_cpu_s"] = round(cpu, 4)
    else:
        out["broker_cpu_s"] = round(cpu, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="71e93a4", help="git revision of the 'before' arm")
    ap.add_argument("--num-records", type=int, default=600_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16384)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    ap.add_argument("--arms", default="before,counters,scraped",
                    help="comma-separated, 'before' first: before, again, counters, scraped")
    ap.add_argument("--output", help="also write the JSON here")
    args = ap.parse_args(argv)
    # What harness.run_kcat_produce reads besides the above.
    args.producers, args.acks, args.compression = 1, 1, "none"
    args.kcat_librdkafka = "system"
    arms = args.arms.split(",")
    if arms[0] != "before" or not set(arms) <= {"before", "again", "counters", "scraped"}:
        raise SystemExit("--arms: 'before' first, then any of again, counters, scraped")
    runs: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory(prefix="pylog-metrics-bench-") as workdir:
        current = current_tree(workdir)
        before = baseline_tree(args.baseline, workdir)
        srcs = {"before": before, "again": before, "counters": current, "scraped": current}
        micro = micro_costs(current)
        env = harness.kcat_env(args.kcat_librdkafka, workdir)
        data_file = os.path.join(workdir, "records.txt")
        harness._kcat_data(data_file, args.num_records, args.record_size)
        for rep in range(args.repeat):
            order = arms[rep % len(arms):] + arms[:rep % len(arms)]  # no arm always first
            for arm in order:
                runs[arm].append(one_run(arm, srcs[arm], args, workdir, data_file, env))
            print(json.dumps({"rep": rep, **{a: runs[a][-1] for a in arms}}), file=sys.stderr)

    def med(arm: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[arm])

    def paired(arm: str, key: str) -> float:
        return round(statistics.median(a[key] / b[key] for a, b in zip(runs[arm], runs["before"],
                                                                          strict=True)), 4)

    cost_model: dict[str, Any] = {}
    if "scraped" in runs:
        scraped = runs["scraped"][-1]
        metrics_cpu_s = (scraped["produce_requests"] * micro["request_us"]
                         + scraped["produce_partitions"] * micro["partition_us"]) / 1e6
        before_cpu_s = statistics.median(r["broker_cpu_s"] for r in runs["before"])
        cost_model = {
            **micro, "produce_requests": scraped["produce_requests"],
            "produce_partitions": scraped["produce_partitions"],
            "records_per_request": round(args.num_records / scraped["produce_requests"], 1),
            "metrics_cpu_ms": round(metrics_cpu_s * 1000, 2),
            "before_broker_cpu_ms": round(before_cpu_s * 1000, 1),
            "share_of_produce_cpu_percent": round(100 * metrics_cpu_s / before_cpu_s, 3),
        }
    result = {
        "commit": harness.git_commit(), "baseline": args.baseline, "cost_model": cost_model,
        "options": {k: v for k, v in vars(args).items() if k != "output"},
        "median": {a: {"records_per_s": med(a, "records_per_s"),
                       "broker_cpu_us_per_record": med(a, "broker_cpu_us_per_record")}
                   for a in arms},
        "relative_to_before": {a: {"throughput": paired(a, "records_per_s"),
                                   "broker_cpu_per_record": paired(a, "broker_cpu_us_per_record")}
                               for a in arms[1:]},
        "runs": runs,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
