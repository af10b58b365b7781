"""Open a data directory of many segments: time, index mappings and descriptors (issue 12).

Builds ``--partitions`` partitions of ``--segments`` segments each (one small batch per
segment; fsync is skipped while building, as only the open is measured), then opens the
directory with a ``LogManager`` three times:

- clean: after a clean shutdown;
- kill -9 after the last checkpoint: the clean-shutdown markers removed, the recovery
  points as the last checkpoint left them (at the log end);
- kill -9 with no checkpoint: markers and recovery-point files removed (every segment is
  scanned).

For each it prints the open time, the index mappings of the process under the data
directory (``/proc/self/maps``), the open descriptors, and the segments scanned.

Usage::

    .venv/bin/python benchmarks/open_many_segments.py [--partitions 4] [--segments 500]
        [--threads 2] [--repeat 3] [--dir /tmp]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

import logcore
from pylog.config import BrokerConfig
from pylog.log import LogManager


def mappings(root: str) -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if root in line)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def build(data: str, partitions: int, segments: int) -> None:
    m = LogManager(BrokerConfig({"log.dirs": data}))
    m.startup()
    m.create_topic("many", partitions)
    m.shutdown()
    b = logcore.BatchBuilder()
    b.append(b"v" * 40, key=b"k")
    batch = b.build()
    cfg = logcore.LogConfig(segment_bytes=150, segment_index_bytes=4096)
    real_fsync = os.fsync
    os.fsync = lambda fd: None  # building only
    try:
        for i in range(partitions):
            with logcore.Log(os.path.join(data, f"many-{i}"), cfg) as plog:
                for _ in range(segments):
                    plog.append(batch)
    finally:
        os.fsync = real_fsync


def measure(data: str, threads: int) -> dict[str, object]:
    fds0 = open_fds()
    m = LogManager(BrokerConfig({"log.dirs": data,
                                 "num.recovery.threads.per.data.dir": str(threads)}))
    t0 = time.perf_counter()
    m.startup()
    elapsed = time.perf_counter() - t0
    logs = [p.log for p in m.all_partitions()]
    stats = [getattr(plog, "recovery_stats", None) for plog in logs]
    out = {
        "open_s": round(elapsed, 3),
        "segments": sum(plog.num_segments for plog in logs),
        "index_mappings": mappings(data),
        "open_fds_added": open_fds() - fds0,
        "segments_scanned": (sum(s.segments_scanned for s in stats)
                             if all(s is not None for s in stats) else None),
    }
    m.shutdown()
    return out


def crash(data: str, keep_checkpoint: bool) -> None:
    for name in os.listdir(data):
        d = os.path.join(data, name)
        if os.path.isdir(d):
            for f in (".kafka_cleanshutdown",) + (() if keep_checkpoint else
                                                  ("recovery-point-offset-checkpoint",)):
                if os.path.exists(os.path.join(d, f)):
                    os.unlink(os.path.join(d, f))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segments", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--repeat", type=int, default=3, help="best of N opens of each kind")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="open-many-", dir=args.dir)
    data = os.path.join(root, "data")
    try:
        build(data, args.partitions, args.segments)
        result = {"implementation": logcore.IMPLEMENTATION, "partitions": args.partitions,
                  "segments_per_partition": args.segments, "threads": args.threads}
        for name, keep in (("clean", None), ("kill9_after_checkpoint", True),
                           ("kill9_no_checkpoint", False)):
            runs = []
            for _ in range(args.repeat):
                if keep is not None:
                    crash(data, keep_checkpoint=keep)
                runs.append(measure(data, args.threads))
            result[name] = min(runs, key=lambda r: r["open_s"])  # type: ignore[arg-type,return-value]
        try:
            result["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                              capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
