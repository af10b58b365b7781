"""How long one ``/metrics`` scrape of a broker with many partitions takes, and how long it
holds the broker's event loop.

A broker runs in this process (its own event loop on a thread, ``metrics.listener`` on
port 0) with ``--topics`` x ``--partitions`` partitions (default 100 x 100 = 10,000), the
first ``--with-data`` of them with one small batch appended (an append maps the active
segment's two index files: 10,000 partitions with data need some 30,000 open files, more
than the 20,000 this machine allows; the scrape reads every partition the same way, data or
not), and one consumer group with a committed offset on every partition of
``--lag-topics`` topics (consumer-lag samples). A client thread then scrapes ``/metrics`` over HTTP ``--scrapes`` times with
urllib and parses the first one with prometheus_client's parser (a check, not timed).

Two figures per scrape:

- ``scrape_ms``: wall time of the HTTP request, from connect to the last byte read;
- ``loop_stall_ms``: the longest the event loop went without running a probe task that
  wakes every 0 s during the scrape (how long the scrape held the loop in one piece:
  requests of other connections wait at most that long). The scrape gives the loop back
  after each ``pylog.metrics.collectors.SLICE`` partitions.

Output: JSON with the medians and maxima. Example (the figure in RESULTS.md, "Metrics")::

    python benchmarks/metrics_scrape.py --topics 100 --partitions 100 --scrapes 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

import logcore
from pylog.broker.server import Broker
from pylog.config import BrokerConfig


class LoopProbe:
    """A task that yields to the loop continuously and records the longest gap between two
    of its wake-ups while ``armed``."""

    def __init__(self) -> None:
        self.armed = False
        self.max_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter()
            if self.armed:
                self.max_gap = max(self.max_gap, now - last)
            last = now

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


async def populate(broker: Broker, topics: int, partitions: int, lag_topics: int,
                   with_data: int) -> None:
    builder = logcore.BatchBuilder()
    builder.append(b"value", key=b"key", timestamp_ms=0)
    batch = bytes(builder.build())
    for t in range(topics):
        await broker.log_manager.create_topic_async(broker.executor, f"topic-{t:03d}", partitions)
    for p in broker.log_manager.all_partitions()[:with_data]:
        p.log.append(bytearray(batch), leader_epoch=0)
    if lag_topics:
        await commit_offsets(broker, [f"topic-{t:03d}" for t in range(lag_topics)], partitions)


async def commit_offsets(broker: Broker, topics: list[str], partitions: int) -> None:
    """Commit offset 0 for group ``bench`` on every partition of ``topics`` through the
    broker's own request path (OffsetCommit v8 after FindCoordinator)."""
    from pylog.broker.handlers import RequestContext, dispatch
    from pylog.protocol.messages import FindCoordinatorRequest, OffsetCommitRequest

    for _ in range(200):
        ctx = RequestContext(broker, FindCoordinatorRequest.API_KEY, 3, 1, "bench", "bench")
        resp = await dispatch(ctx, FindCoordinatorRequest(key="bench", key_type=0))
        if resp.error_code == 0:
            break
        await asyncio.sleep(0.1)
    req = OffsetCommitRequest(
        group_id="bench", generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=0, committed_leader_epoch=-1,
                committed_metadata="") for p in range(partitions)]) for t in topics])
    for _ in range(200):
        ctx = RequestContext(broker, OffsetCommitRequest.API_KEY, 8, 2, "bench", "bench")
        resp = await dispatch(ctx, req)
        codes = {p.error_code for t in resp.topics for p in t.partitions}
        if codes == {0}:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"OffsetCommit failed: {codes}")


def scrape(port: int) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
        body = resp.read()
    return time.perf_counter() - started, body


async def run(args: argparse.Namespace, data: str) -> dict[str, Any]:
    config = BrokerConfig({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0",
                           "metrics.listener": "http://127.0.0.1:0",
                           "offsets.topic.num.partitions": "1",
                           "group.initial.rebalance.delay.ms": "0"})
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    try:
        t0 = time.perf_counter()
        await populate(broker, args.topics, args.partitions, args.lag_topics, args.with_data)
        setup_s = time.perf_counter() - t0
        port = broker.metrics_server.address[1]
        probe = LoopProbe()
        probe.start()
        scrapes, stalls = [], []
        body = b""
        for _ in range(args.scrapes):
            probe.max_gap = 0.0
            probe.armed = True
            seconds, body = await loop.run_in_executor(None, scrape, port)
            probe.armed = False
            scrapes.append(seconds * 1000)
            stalls.append(probe.max_gap * 1000)
        probe.stop()
        families = list(text_string_to_metric_families(body.decode()))
        samples = sum(len(f.samples) for f in families)
        partitions = len(broker.log_manager.all_partitions())
    finally:
        await broker.shutdown()
    return {
        "partitions": partitions, "setup_s": round(setup_s, 1), "bytes": len(body),
        "families": len(families), "samples": samples,
        "scrape_ms": {"median": round(statistics.median(scrapes), 1),
                      "max": round(max(scrapes), 1), "min": round(min(scrapes), 1)},
        "loop_stall_ms": {"median": round(statistics.median(stalls), 2),
                          "max": round(max(stalls), 2)},
        "scrapes": args.scrapes,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100, help="per topic")
    ap.add_argument("--lag-topics", type=int, default=10,
                    help="topics whose every partition has a committed offset of one group")
    ap.add_argument("--with-data", type=int, default=1000,
                    help="partitions that get one batch (the others stay empty)")
    ap.add_argument("--scrapes", type=int, default=20)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pylog-scrape-bench-") as data:
        result: list[dict[str, Any]] = []
        thread = threading.Thread(target=lambda: result.append(asyncio.run(run(args, data))))
        thread.start()
        thread.join()
    if not result:  # the thread printed its traceback
        print("metrics_scrape: the run failed (see above); an open-files limit too low for "
              "the partitions asked for is the usual cause", file=sys.stderr)
        return 1
    print(json.dumps({"options": vars(args), **result[0]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
