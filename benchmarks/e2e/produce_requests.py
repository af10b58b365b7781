"""Per-request cost (issue 26): the broker's CPU per small request, requests/s, alternating
rounds of ``--broker`` kinds (or of source trees, ``--src``) in one run.

- ``produce``: single-record Produce requests from kcat (``-X batch.num.messages=1
  -X linger.ms=0``, acks=1, one partition, 100 B records; librdkafka pipelines them);
- ``fetch``: single-batch Fetch requests (v12, one partition, ``max_wait_ms=0``), one at a
  time on one connection as a consumer sends them, each at the next offset of a log that
  kcat filled with one-record batches (the broker answers each with one 100 B batch);
- ``metadata``: Metadata v12 requests for that one topic, one at a time;
- ``offset_commit``: OffsetCommit v8 requests of one partition's offset, one at a time,
  to a group nobody joined (generation -1, as a simple consumer commits), each for the
  next offset: the synchronous commit's path (handler, group coordinator,
  ``__consumer_offsets`` append, response) without a client library's own cost.

The broker's CPU is read from ``/proc/<pid>/stat`` (all threads) around each phase.

    python benchmarks/e2e/produce_requests.py --records 50000 --repeat 3
    python benchmarks/e2e/produce_requests.py --api produce,fetch,metadata \\
        --src before=/path/to/old/src --src after=src --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BrokerProc, create_topic, git_commit, kcat  # noqa: E402

APIS = ("produce", "fetch", "metadata", "offset_commit")


class _Wire:
    """One connection speaking pylog.protocol's ClientConnection, one request at a time."""

    def __init__(self, bootstrap: str) -> None:
        from pylog.protocol.connection import ClientConnection

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id="produce-requests")

    def request(self, body: Any, version: int) -> Any:
        from pylog.protocol.connection import NEED_DATA

        self.sock.sendall(b"".join(bytes(c) for c in self.conn.send(body, version)))
        while True:
            event = self.conn.next_event()
            if event is not NEED_DATA:
                return event.body
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.conn.receive_data(data)

    def close(self) -> None:
        self.sock.close()


def _fetch_body(topic: str, offset: int) -> Any:
    from pylog.protocol.messages import FetchRequest as R

    return R(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
             topics=[R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                 partition=0, fetch_offset=offset, partition_max_bytes=1024,
                 log_start_offset=-1, current_leader_epoch=-1)])])


def _metadata_body(topic: str) -> Any:
    from pylog.protocol.messages import MetadataRequest as R

    return R(topics=[R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)


def _offset_commit_body(group: str, topic: str, offset: int) -> Any:
    from pylog.protocol.messages import OffsetCommitRequest as R

    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, retention_time_ms=-1,
             topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[
                 R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                committed_leader_epoch=-1,
                                                committed_metadata="")])])


def _await_coordinator(wire: _Wire, group: str, topic: str) -> None:
    """Commit once, untimed, until the group's coordinator answers (``__consumer_offsets``
    is created by the first FindCoordinator naming a group)."""
    from pylog.protocol.messages import FindCoordinatorRequest

    deadline = time.monotonic() + 60
    while True:
        wire.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        resp = wire.request(_offset_commit_body(group, topic, 0), 8)
        code = resp.topics[0].partitions[0].error_code
        if code == 0:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"offset commit failed: error {code}")
        time.sleep(0.05)  # the coordinator is loading its partition: poll again


def run_one(kind: str, src: str | None, apis: list[str], records: int,
            round_no: int) -> list[dict[str, Any]]:
    env = None if src is None else dict(os.environ, PYTHONPATH=os.path.abspath(src))
    out = []
    with tempfile.TemporaryDirectory(prefix=f"produce-requests-{kind}-") as workdir:
        broker = BrokerProc(kind, workdir, env=env)
        try:
            topic = f"pr-{round_no}"
            create_topic(broker.bootstrap, topic, 1)
            data = os.path.join(workdir, "records")
            with open(data, "wb") as f:
                f.write(b"".join(b"%099d\n" % i for i in range(records)))
            # Produce always runs: it fills the log that fetch reads.
            cmd = [kcat(), "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-X", "acks=1",
                   "-X", "batch.num.messages=1", "-X", "linger.ms=0", "-l", data]
            cpu0, t0 = broker.cpu(), time.monotonic()
            subprocess.run(cmd, check=True, timeout=600, capture_output=True)
            secs, cpu = time.monotonic() - t0, broker.cpu() - cpu0
            if "produce" in apis:
                out.append({"api": "produce", "requests": records, "seconds": secs, "cpu": cpu})
            wire = _Wire(broker.bootstrap)
            try:
                for api in ("fetch", "metadata", "offset_commit"):
                    if api not in apis:
                        continue
                    if api == "fetch":
                        bodies = (_fetch_body(topic, i) for i in range(records))
                        version = 12
                    elif api == "offset_commit":
                        _await_coordinator(wire, f"pr-group-{round_no}", topic)
                        bodies = (_offset_commit_body(f"pr-group-{round_no}", topic, i)
                                  for i in range(records))
                        version = 8
                    else:
                        body = _metadata_body(topic)
                        bodies = (body for _ in range(records))
                        version = 12
                    cpu0, t0 = broker.cpu(), time.monotonic()
                    for body in bodies:
                        resp = wire.request(body, version)
                        if api == "fetch":
                            part = resp.responses[0].partitions[0]
                            if part.error_code or not part.records:
                                raise SystemExit(f"fetch failed: {part!r}")
                        elif api == "offset_commit":
                            code = resp.topics[0].partitions[0].error_code
                            if code:
                                raise SystemExit(f"offset commit failed: error {code}")
                    secs, cpu = time.monotonic() - t0, broker.cpu() - cpu0
                    out.append({"api": api, "requests": records, "seconds": secs, "cpu": cpu})
            finally:
                wire.close()
        finally:
            broker.stop()
    label = kind if src is None else src
    return [{"broker": label, "api": r["api"], "requests_per_s": r["requests"] / r["seconds"],
             "broker_cpu_us_per_request": r["cpu"] / r["requests"] * 1e6} for r in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=("pylog", "tansu", "both"), default="pylog")
    ap.add_argument("--api", default="produce",
                    help=f"comma-separated, of {','.join(APIS)} (default produce)")
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=DIR",
                    help="pylog source trees to alternate (PYTHONPATH of the broker), "
                         "instead of --broker")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    apis = [a for a in args.api.split(",") if a]
    if not apis or any(a not in APIS for a in apis):
        ap.error(f"--api takes {','.join(APIS)}")
    if args.src:
        kinds = [("pylog", s.partition("=")[2], s.partition("=")[0]) for s in args.src]
    else:
        names = ["tansu", "pylog"] if args.broker == "both" else [args.broker]
        kinds = [(k, None, k) for k in names]
    runs = []
    for r in range(args.repeat):
        for kind, src, label in kinds:
            for res in run_one(kind, src, apis, args.records, r):
                res["broker"] = label
                print(json.dumps(res), file=sys.stderr, flush=True)
                runs.append(res)
    med = {label: {api: {key: statistics.median(x[key] for x in runs
                                                if x["broker"] == label and x["api"] == api)
                         for key in ("requests_per_s", "broker_cpu_us_per_request")}
                   for api in apis}
           for _k, _s, label in kinds}
    print(json.dumps({"commit": git_commit(), "records": args.records, "load": os.getloadavg(),
                      "median": med, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
