"""Per-request cost of Produce (issue 26): single-record Produce requests from kcat
(``-X batch.num.messages=1 -X linger.ms=0``, acks=1, one partition), requests/s and the
broker's CPU per request, alternating rounds of ``--broker`` kinds in one run.

    python benchmarks/e2e/produce_requests.py --records 50000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BrokerProc, create_topic, git_commit, kcat  # noqa: E402


def run_one(kind: str, records: int, round_no: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix=f"produce-requests-{kind}-") as workdir:
        broker = BrokerProc(kind, workdir)
        try:
            topic = f"pr-{round_no}"
            create_topic(broker.bootstrap, topic, 1)
            data = os.path.join(workdir, "records")
            with open(data, "wb") as f:
                f.write(b"".join(b"%099d\n" % i for i in range(records)))
            cmd = [kcat(), "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-X", "acks=1",
                   "-X", "batch.num.messages=1", "-X", "linger.ms=0", "-l", data]
            cpu0, t0 = broker.cpu(), time.monotonic()
            subprocess.run(cmd, check=True, timeout=600, capture_output=True)
            secs, cpu = time.monotonic() - t0, broker.cpu() - cpu0
        finally:
            broker.stop()
    return {"broker": kind, "requests_per_s": records / secs,
            "broker_cpu_us_per_request": cpu / records * 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=("pylog", "tansu", "both"), default="pylog")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    kinds = ["tansu", "pylog"] if args.broker == "both" else [args.broker]
    runs = []
    for r in range(args.repeat):
        for kind in kinds:
            res = run_one(kind, args.records, r)
            print(json.dumps(res), file=sys.stderr, flush=True)
            runs.append(res)
    med = {k: {key: statistics.median(x[key] for x in runs if x["broker"] == k)
               for key in ("requests_per_s", "broker_cpu_us_per_request")} for k in kinds}
    print(json.dumps({"commit": git_commit(), "records": args.records, "load": os.getloadavg(),
                      "median": med, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
