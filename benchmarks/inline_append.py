"""The event loop's cost of an uncompressed append, inline or handed to an I/O thread.

What ``INLINE_APPEND_MAX_BYTES`` (``pylog/broker/handlers/produce.py``) trades: an append
on the loop holds the loop for the whole ``Log.append`` (validation with CRC-32C, one
``pwrite`` into the page cache, index entries); an append handed to an I/O thread
(``IoThreads.run_ordered``) costs the loop the submit and the wake-up, and the thread
then holds the GIL for the Python parts of ``Log.append`` (the CRC-32C and the ``pwrite``
release it). For each batch size this prints, per append:

- ``inline_us``: loop time of ``Log.append`` on the loop thread (median);
- ``handoff_loop_us``: CPU time of the loop thread per handed-off append (submit, wake-up,
  the future's completion), from ``time.thread_time`` over the whole run;
- ``handoff_wall_us``: wall time of one handed-off append (median), what the producer
  waits.

Usage::

    .venv/bin/python benchmarks/inline_append.py [--dir /tmp] [--appends 100]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import statistics
import tempfile
import time

import logcore
from logcore import BatchBuilder, Log, LogConfig
from pylog.broker.io_threads import IoThreads

SIZES_KIB = (1, 16, 64, 128, 256, 512, 1024)


def batch(size: int) -> bytes:
    b = BatchBuilder()
    record = 1000
    for i in range(max(1, size // (record + 20))):
        b.append(os.urandom(16) * (record // 16), key=b"%d" % i)
    return b.build()


async def measure(directory: str, size: int, appends: int) -> dict[str, float]:
    cfg = LogConfig(segment_bytes=1 << 30)
    data = batch(size)
    io = IoThreads(2)
    log = Log(os.path.join(directory, f"inline-{size}"), cfg)
    try:
        # The request buffers (rewritten in place by the append) are built beforehand.
        bufs = [bytearray(data) for _ in range(appends)]
        inline = []
        for buf in bufs:
            t0 = time.perf_counter()
            log.append(buf, leader_epoch=0)
            inline.append(time.perf_counter() - t0)
        bufs = [bytearray(data) for _ in range(appends)]
        append = functools.partial(log.append, leader_epoch=0)
        wall = []
        cpu0 = time.thread_time()
        for buf in bufs:
            t0 = time.perf_counter()
            await io.run_ordered("p", append, buf)
            wall.append(time.perf_counter() - t0)
        loop_cpu = (time.thread_time() - cpu0) / appends
    finally:
        log.close()
        io.shutdown()
    return {"batch_bytes": len(data), "inline_us": statistics.median(inline) * 1e6,
            "handoff_loop_us": loop_cpu * 1e6, "handoff_wall_us": statistics.median(wall) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--appends", type=int, default=100)
    args = ap.parse_args()
    directory = tempfile.mkdtemp(prefix="pylog-inline-", dir=args.dir)
    try:
        rows = [asyncio.run(measure(directory, kib * 1024, args.appends)) for kib in SIZES_KIB]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps({"implementation": logcore.IMPLEMENTATION, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
