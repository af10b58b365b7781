"""How fast the console's pages answer for a cluster of many partitions (issue 23: within
200 ms for 1,000 partitions).

Starts a broker (``pylog broker``) and ``pylog console`` as subprocesses, creates
``--topics`` topics of ``--partitions`` partitions each, writes ``--records`` records to
every partition, commits offsets for ``--groups`` consumer groups (each on one topic), then
fetches every page over HTTP ``--repeat`` times after one warm-up request and reports the
median, 90th percentile and maximum latency per page. The console's sampler runs meanwhile
(every 5 s, as by default), as it would for a user.

Usage::

    .venv/bin/python benchmarks/console_pages.py                          # 50 x 20 partitions
    .venv/bin/python benchmarks/console_pages.py --topics 1 --partitions 1000

Prints one JSON object (and a Markdown table on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def start(cmd: list[str], ready: pathlib.Path, log: pathlib.Path, timeout: float = 60.0
          ) -> tuple[subprocess.Popen[bytes], str]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().strip():
            return proc, ready.read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{cmd[3]} did not start; log:\n{log.read_text()}")


def populate(bootstrap: str, topics: list[str], partitions: int, records: int,
             groups: int) -> None:
    from pylog.client import Admin, Consumer, NewTopic, Producer, TopicPartition

    with Admin(bootstrap_servers=bootstrap, request_timeout_ms=120000) as admin:
        for i in range(0, len(topics), 10):
            admin.create_topics([NewTopic(t, partitions, 1) for t in topics[i:i + 10]])
    with Producer(bootstrap_servers=bootstrap, linger_ms=20) as p:
        for t in topics:
            for part in range(partitions):
                for r in range(records):
                    p.send(t, b'{"n": %d, "text": "a record of the benchmark"}' % r,
                           key=b"key-%d" % r, partition=part)
        p.flush(300)
    for g in range(groups):
        topic = topics[g % len(topics)]
        with Consumer(bootstrap_servers=bootstrap, group_id=f"bench-group-{g}") as c:
            c.commit({TopicPartition(topic, part): records // 2 for part in range(partitions)})


def timed_get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as resp:
        resp.read()
        if resp.status != 200:
            raise SystemExit(f"{url}: HTTP {resp.status}")
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--records", type=int, default=10, help="records per partition")
    ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sample-interval", type=float, default=5.0,
                    help="the console's --sample-interval (default 5, its default)")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="console-bench-"))
    env_py = sys.executable
    broker, bootstrap = start(
        [env_py, "-m", "pylog", "broker", "--ready-file", str(work / "broker.ready"),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={work / 'data'}",
         "--override", "offsets.topic.num.partitions=1",
         "--override", "group.initial.rebalance.delay.ms=0"],
        work / "broker.ready", work / "broker.log")
    console = None
    try:
        topics = [f"bench-{i:03d}" for i in range(args.topics)]
        t0 = time.monotonic()
        populate(bootstrap, topics, args.partitions, args.records, args.groups)
        print(f"populated in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        console, url = start(
            [env_py, "-m", "pylog", "console", "-b", bootstrap, "--port", "0",
             "--ready-file", str(work / "console.ready"),
             "--sample-interval", str(args.sample_interval)],
            work / "console.ready", work / "console.log")
        pages = {"overview": "/", "topics": "/topics", "topic": f"/topics/{topics[0]}",
                 "messages (newest 50, all partitions)": f"/topics/{topics[0]}/messages",
                 "messages (one partition, from offset)":
                     f"/topics/{topics[0]}/messages?partition=0&mode=offset&offset=0",
                 "groups": "/groups", "group": "/groups/bench-group-0",
                 "brokers": "/brokers", "chart": "/chart?series=produce%3A%2A"}
        results: dict[str, dict[str, float]] = {}
        for name, path in pages.items():
            timed_get(url + path)  # warm-up: connections, metadata, templates
            times = sorted(timed_get(url + path) for _ in range(args.repeat))
            results[name] = {"median_ms": round(statistics.median(times), 1),
                             "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1),
                             "max_ms": round(times[-1], 1)}
        out = {"topics": args.topics, "partitions_per_topic": args.partitions,
               "partitions": args.topics * args.partitions, "records_per_partition":
               args.records, "groups": args.groups, "repeat": args.repeat,
               "sample_interval": args.sample_interval, "pages": results,
               "cpu_count": os.cpu_count()}
        print(json.dumps(out, indent=2))
        print("| page | median ms | p90 ms | max ms |\n| --- | --- | --- | --- |",
              file=sys.stderr)
        for name, r in results.items():
            print(f"| {name} | {r['median_ms']} | {r['p90_ms']} | {r['max_ms']} |",
                  file=sys.stderr)
    finally:
        for proc in (console, broker):
            if proc is not None:
                proc.terminate()
                proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
