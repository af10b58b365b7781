"""Per-request cost (issue 26): the event loop's CPU per handler call, without the network.

An in-process broker (``pylog.testing.KafkaBroker``) gets one topic and its group
coordinator; then, on the broker's loop, ``handlers.dispatch`` is called ``--requests``
times with decoded requests (no framing, decoding, encoding or socket), and the loop
thread's CPU time (``time.thread_time``) is divided by the calls:

- ``offset_commit``: OffsetCommit v8 of one partition to a group nobody joined (the
  handler, the group coordinator, the ``__consumer_offsets`` append inline, the settle);
- ``metadata``: Metadata v12 for the one topic.

``--src LABEL=DIR`` (repeatable) runs each round in a child process per source tree,
alternating them, for before/after pairs in one run::

    python benchmarks/handler_cpu.py --src before=/path/to/old/src --src after=src --repeat 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))

APIS = ("offset_commit", "metadata")


def measure(requests: int) -> dict[str, float]:
    from produce_requests import _await_coordinator, _metadata_body, _offset_commit_body, _Wire

    from pylog.broker import handlers
    from pylog.protocol.messages import CreateTopicsRequest as CT
    from pylog.testing import KafkaBroker

    with KafkaBroker() as kb:
        wire = _Wire(kb.bootstrap_servers)
        try:
            wire.request(CT(topics=[CT.CreatableTopic(name="t", num_partitions=1, replication_factor=1)],
                            timeout_ms=10000), 5)
            _await_coordinator(wire, "g", "t")
        finally:
            wire.close()
        broker = kb.broker

        async def run() -> dict[str, float]:
            out = {}
            for api, key, version in (("offset_commit", 8, 8), ("metadata", 3, 12)):
                bodies = [_offset_commit_body("g", "t", i) if api == "offset_commit"
                          else _metadata_body("t") for i in range(requests)]
                t0 = time.thread_time()
                for body in bodies:
                    ctx = handlers.RequestContext(broker, key, version, 1, "handler-cpu", "127.0.0.1:1")
                    response = await handlers.dispatch(ctx, body)
                    if api == "offset_commit" and response.topics[0].partitions[0].error_code:
                        raise SystemExit(f"offset commit failed: {response!r}")
                out[api] = (time.thread_time() - t0) / requests * 1e6
            return out

        loop = kb._loop  # the broker's event loop thread (KafkaBroker has no public handle)
        assert broker is not None and loop is not None
        return asyncio.run_coroutine_threadsafe(run(), loop).result()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child or not args.src:
        print(json.dumps(measure(args.requests)))
        return 0
    runs: list[dict[str, Any]] = []
    for r in range(args.repeat):
        for spec in args.src:
            label, _, src = spec.partition("=")
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                  "--requests", str(args.requests)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            res = {"src": label, "round": r, **json.loads(out.strip().splitlines()[-1])}
            print(json.dumps(res), file=sys.stderr, flush=True)
            runs.append(res)
    labels = [s.partition("=")[0] for s in args.src]
    med = {lb: {api: statistics.median(x[api] for x in runs if x["src"] == lb) for api in APIS}
           for lb in labels}
    print(json.dumps({"requests": args.requests, "load": os.getloadavg(), "median_us": med,
                      "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
