"""Start plus stop of ``pylog.testing.KafkaBroker`` (issue 20's target: under 100 ms median).

Each iteration builds a ``KafkaBroker`` with its defaults (127.0.0.1, an OS-picked port,
a new temporary data directory, system clock), starts it (the broker's thread and event
loop, the data directory, the listener: it serves when ``start()`` returns), stops it
cleanly (logs closed, checkpoints, the directory removed) and times the two. One
warm-up iteration first: the first broker of a process imports the broker and loads the
protocol message classes, which a test session pays once.

Usage::

    .venv/bin/python benchmarks/testing_broker.py [--iterations 50] [--connect]

``--connect`` also opens a TCP connection to the broker and sends an ApiVersions request
before stopping (proves it serves; adds the round trip). Prints one JSON object: the
median, p90, min and max of start, stop and start+stop in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import statistics
import struct
import time

from pylog.testing import KafkaBroker

# ApiVersions v0 request: size, api key 18, version 0, correlation id 1, client id "bench".
_API_VERSIONS = struct.pack(">ihhih", 15, 18, 0, 1, 5) + b"bench"


def _ping(bootstrap: str) -> None:
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(_API_VERSIONS)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        assert size > 0


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 2),
            "p90": round(ordered[int(len(ordered) * 0.9) - 1], 2),
            "min": round(ordered[0], 2), "max": round(ordered[-1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--connect", action="store_true")
    args = parser.parse_args()
    with KafkaBroker():  # warm-up: imports and message classes
        pass
    starts, stops, totals = [], [], []
    for _ in range(args.iterations):
        broker = KafkaBroker()
        t0 = time.perf_counter()
        broker.start()
        t1 = time.perf_counter()
        if args.connect:
            _ping(broker.bootstrap_servers)
        t2 = time.perf_counter()
        broker.stop()
        t3 = time.perf_counter()
        starts.append((t1 - t0) * 1000)
        stops.append((t3 - t2) * 1000)
        totals.append((t1 - t0 + t3 - t2) * 1000)
    print(json.dumps({"iterations": args.iterations, "connect": args.connect,
                      "python": platform.python_version(),
                      "start_ms": _stats(starts), "stop_ms": _stats(stops),
                      "start_plus_stop_ms": _stats(totals)}, indent=1))


if __name__ == "__main__":
    main()
