"""Long runs of the fault harness: ``python -m tests.cluster.run --seeds 1-20 --duration 120``.

Runs each seed (a fresh ZooKeeper and three brokers under a temporary directory), prints its
figures (records acknowledged, faults injected, lost, duplicates, diverged replicas, ...) and
exits 1 if any seed found a problem. Run it from the repository root with the sources on the
path (``PYTHONPATH=src`` in a checkout, nothing for an installed package); Debian's
``zookeeper`` package must be installed (``make sysdeps``).
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import shutil
import sys
import tempfile
import time

from _harness.zookeeper import missing_reason

from .faults import FAULTS, WORKLOADS, run_seed


def parse_seeds(text: str) -> list[int]:
    """``1-20``, ``3,5,8`` or a mix (``1-4,9``)."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds += range(lo, hi + 1)
            else:
                seeds.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad seed list {text!r}: give seeds like 1-20, 3,5,8 or 1-4,9") from None
    return seeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.cluster.run",
        description="Seeded fault harness: a ZooKeeper and three pylog brokers, idempotent "
                    "acks=all producers (confluent-kafka, kafka-python) and consumers, faults "
                    f"({', '.join(sorted(FAULTS))}) at seeded moments; then every acknowledged "
                    "record is checked and every replica compared byte for byte.")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-3"),
                    help="seeds to run, e.g. 1-20 or 3,5,8 (default 1-3)")
    ap.add_argument("--duration", type=float, default=120.0,
                    help="seconds of faults per seed (default 120)")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="plain",
                    help="plain: idempotent producers (the default); compact: keyed records "
                         "and tombstones on a compacted topic cleaned during the faults, "
                         "checked per key; txn: transactions committed and aborted across "
                         "partitions, read_committed consumers, also kill-coordinator faults")
    ap.add_argument("--min-faults", type=int, default=None,
                    help=f"at least this many faults per seed, even past the duration "
                         f"(default: every kind once, {len(FAULTS)} kinds, "
                         f"{len(WORKLOADS['txn'].faults)} with --workload txn)")
    ap.add_argument("--dir", type=pathlib.Path, default=None,
                    help="keep each seed's data and logs under DIR/seed-N (default: a "
                         "temporary directory, removed when the seed passes)")
    args = ap.parse_args(argv)
    min_faults = len(WORKLOADS[args.workload].faults) if args.min_faults is None \
        else args.min_faults
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # the harness's own session
    reason = missing_reason()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    failed = []
    totals = {"acknowledged": 0, "faults": 0, "lost": 0, "diverged": 0}
    t0 = time.monotonic()
    for seed in args.seeds:
        base = (args.dir / f"seed-{seed}") if args.dir else \
            pathlib.Path(tempfile.mkdtemp(prefix=f"pylog-faults-{seed}-"))
        base.mkdir(parents=True, exist_ok=True)
        try:
            fig = run_seed(seed, args.duration, base, min_faults=min_faults,
                           log=lambda s: print(s, flush=True), workload=args.workload)
        except Exception as e:
            print(f"seed {seed}: ABORTED: {e!r} (data and logs kept in {base})", flush=True)
            failed.append(seed)
            continue
        print(fig.summary(), flush=True)
        totals["acknowledged"] += fig.acknowledged
        totals["faults"] += len(fig.faults)
        totals["lost"] += fig.lost
        totals["diverged"] += fig.diverged_replicas
        if not fig.ok:
            failed.append(seed)
            print(f"  data and logs kept in {base}", flush=True)
        elif args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{len(args.seeds)} seeds ({args.workload}) in {time.monotonic() - t0:.0f} s: records acknowledged "
          f"{totals['acknowledged']}, faults injected {totals['faults']}, lost "
          f"{totals['lost']}, diverged replicas {totals['diverged']}; "
          + (f"FAILED seeds {failed}" if failed else "all seeds OK"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
