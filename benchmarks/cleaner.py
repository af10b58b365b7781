"""Log cleaner throughput against the raw read+write bandwidth of the same bytes.

Issue 7's target: clean a log of ``--keys`` keys x ``--updates`` updates (1M x 10 in about
1 GiB) at >= 0.5x the bandwidth of reading the same segment files and writing them to
new files (``os.pread`` + ``os.write`` of 512 KiB blocks, the cleaner's I/O buffer) in
the same run. Both read a warm page cache; both write to the same filesystem.

Usage::

    .venv/bin/python benchmarks/cleaner.py [--dir /tmp] [--keys 1000000] [--updates 10]
        [--value-bytes 80] [--batch 150] [--codec none]

Prints one JSON object. ``--keys 100000`` runs in about a tenth of the size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time

import logcore
from logcore import BatchBuilder, Log, LogConfig
from logcore.cleaner import Cleaner

MiB = 1 << 20


def build(directory: str, keys: int, updates: int, value_bytes: int, batch: int,
          codec: str) -> Log:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=1 << 30, file_delete_delay_ms=0,
                    min_cleanable_dirty_ratio=0.0)
    log = Log(directory, cfg)
    rnd = random.Random(7)
    value = bytes(rnd.getrandbits(8) for _ in range(value_bytes))
    order = list(range(keys))
    ts = 1_700_000_000_000
    for _u in range(updates):
        rnd.shuffle(order)
        for i in range(0, keys, batch):
            b = BatchBuilder(compression=codec)
            for k in order[i:i + batch]:
                b.append(value, key=b"key-%09d" % k, timestamp_ms=ts)
            log.append(b.build())
    log.roll()
    return log


def raw_copy(paths: list[str], out_dir: str) -> tuple[int, float]:
    """pread + write of every file in 512 KiB blocks (the same I/O the cleaner does)."""
    total = 0
    start = time.perf_counter()
    for n, path in enumerate(paths):
        src = os.open(path, os.O_RDONLY)
        dst = os.open(os.path.join(out_dir, f"copy{n}"), os.O_WRONLY | os.O_CREAT, 0o644)
        pos = 0
        while True:
            block = os.pread(src, 512 * 1024, pos)
            if not block:
                break
            os.write(dst, block)
            pos += len(block)
        os.fsync(dst)
        os.close(src)
        os.close(dst)
        total += pos
    return total, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--value-bytes", type=int, default=80)
    ap.add_argument("--batch", type=int, default=150)
    ap.add_argument("--codec", default="none")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="cleanbench-", dir=args.dir)
    try:
        log = build(os.path.join(root, "t-0"), args.keys, args.updates, args.value_bytes,
                    args.batch, args.codec)
        size = log.size_in_bytes
        paths = [s.file.path for s in log._snapshot.segments if s.size]
        copy_dir = os.path.join(root, "copy")
        os.makedirs(copy_dir)
        for p in paths:  # warm the page cache for both
            with open(p, "rb") as f:
                while f.read(8 * MiB):
                    pass
        raw_bytes, raw_s = raw_copy(paths, copy_dir)
        shutil.rmtree(copy_dir)
        # Kafka's default: 128 MiB of map; 1M keys need 24 MiB / 0.9.
        cleaner = Cleaner(128 * MiB)
        start = time.perf_counter()
        rounds = 0
        while cleaner.clean(log) is not None:
            rounds += 1
        clean_s = time.perf_counter() - start
        after = log.size_in_bytes
        log.close()
        raw_bw = raw_bytes / raw_s
        clean_bw = size / clean_s
        print(json.dumps({
            "implementation": logcore.IMPLEMENTATION,
            "keys": args.keys, "updates": args.updates, "codec": args.codec,
            "batch_records": args.batch,
            "log_bytes": size, "cleaned_bytes": after, "rounds": rounds,
            "raw_read_write_MBps": round(raw_bw / 1e6, 1),
            "clean_MBps": round(clean_bw / 1e6, 1),
            "ratio": round(clean_bw / raw_bw, 3),
        }, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
