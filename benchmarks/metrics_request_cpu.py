"""The event loop's CPU time per Produce request, for an A/B of two source trees.

A broker runs in this process on a thread of its own (``listeners`` on port 0, a topic of
4 partitions); this thread sends ``N`` Produce requests (v9, acks=1, one 149-record batch of
100-byte values each, partitions in turn) one at a time over a socket, after 300 to warm
up, and prints the broker loop thread's CPU time per request
(``time.pthread_getcpuclockid``), and the whole broker's (the process's CPU time minus this
client thread's): the client's work is in neither.
Run it alternately on two trees (``PYTHONPATH``) and compare the minima, which other load
on the machine can only raise::

    for i in 1 2 3 4 5 6; do for t in /tmp/base/src src; do
        echo "$t $(PYTHONPATH=$t python benchmarks/metrics_request_cpu.py 3000)"; done; done

(``/tmp/base/src``: ``git archive 71e93a4 src | tar -x -C /tmp/base`` plus this tree's
compiled ``src/logcore/*.so``).

``--calls`` counts instead the Python and C function calls the loop makes per request
(``sys.setprofile`` on the loop's thread, 500 requests): a figure the machine's load does
not move, and the list of functions called at least 0.9 times per request, to diff between
the trees.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))

from _harness.wire import BrokerConnection  # noqa: E402

import logcore  # noqa: E402
from pylog.broker.server import Broker  # noqa: E402
from pylog.config import BrokerConfig  # noqa: E402
from pylog.protocol.messages import ProduceRequest  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("requests", type=int, nargs="?", default=3000)
    ap.add_argument("--calls", action="store_true", help="count calls per request instead")
    args = ap.parse_args()
    n = 500 if args.calls else args.requests
    data = tempfile.mkdtemp(prefix="pylog-request-cpu-")
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    def serve() -> None:
        asyncio.set_event_loop(loop)
        broker = Broker(BrokerConfig({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0"}))
        loop.run_until_complete(broker.start())
        loop.run_until_complete(broker.log_manager.create_topic_async(broker.executor, "t", 4))
        box["broker"], box["thread"] = broker, threading.get_ident()
        ready.set()
        loop.run_forever()
        loop.run_until_complete(broker.shutdown())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait()
    broker = box["broker"]
    clock = time.pthread_getcpuclockid(box["thread"])
    builder = logcore.BatchBuilder()
    for _ in range(149):
        builder.append(b"x" * 100)
    batch = bytes(builder.build())

    def request(p: int) -> Any:
        return ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name="t", partition_data=[
                ProduceRequest.PartitionProduceData(index=p, records=batch)])])

    requests = [request(i % 4) for i in range(n)]
    calls: collections.Counter[tuple[str, str]] = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            calls[(code.co_filename.rsplit("/src/", 1)[-1], code.co_name)] += 1
        elif event == "c_call":
            calls[("C", getattr(arg, "__qualname__", str(arg)))] += 1

    def on_loop(fn: Any) -> None:
        done = threading.Event()
        loop.call_soon_threadsafe(lambda: (fn(), done.set()))
        done.wait()

    with BrokerConnection(*broker.bound[0], timeout=10) as conn:
        for r in requests[:300]:
            conn.request(r, version=9)
        if args.calls:
            on_loop(lambda: sys.setprofile(profile))
        c0, p0, t0 = time.clock_gettime(clock), time.process_time(), time.thread_time()
        for r in requests:
            conn.request(r, version=9)
        c1, p1, t1 = time.clock_gettime(clock), time.process_time(), time.thread_time()
        if args.calls:
            on_loop(lambda: sys.setprofile(None))
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    shutil.rmtree(data, ignore_errors=True)
    if args.calls:
        print(json.dumps({"requests": n, "calls_per_request": round(sum(calls.values()) / n, 1)}))
        for (where, name), count in sorted(calls.items()):
            if count >= 0.9 * n:
                print(f"{count / n:6.2f} {where} {name}")
        return 0
    print(json.dumps({"requests": n, "loop_cpu_us_per_request": round((c1 - c0) / n * 1e6, 2),
                      "broker_cpu_us_per_request": round(((p1 - p0) - (t1 - t0)) / n * 1e6, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
