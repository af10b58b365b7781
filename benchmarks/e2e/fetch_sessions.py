"""Incremental fetch sessions (KIP-227): broker CPU and latency per fetch for a consumer of
many partitions of which few have data, with a session and without, in the same run.

A ``pylog broker`` subprocess holds one topic of ``--partitions`` partitions (2,000);
``--busy`` of them (10) get one batch of ``--records`` records (10 x 100 B). One client
connection then alternates blocks of ``--fetches`` Fetch v12 requests (200) in two modes,
``--rounds`` times (3), each request answered at once (``max_wait_ms`` 0):

- ``sessionless``: every partition named in every request (``session_epoch`` -1), as
  librdkafka and aiokafka fetch;
- ``session``: one full fetch opens a session (epoch 0), then incremental fetches name no
  partition (the positions do not move) and the broker answers the busy partitions only.

Both modes read the same records from the same offsets every time (the fetch positions do
not advance), so the bytes returned are equal; what differs is what is decoded, looked at
and encoded. Figures per mode: broker CPU per fetch (utime + stime of the broker process,
from /proc, over the block), client round-trip latency per fetch (median, p99), response
bytes; and the ratio sessionless / session.

Usage::

    .venv/bin/python benchmarks/e2e/fetch_sessions.py [--partitions 2000] [--busy 10]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BrokerProc, create_topic, git_commit  # noqa: E402

import logcore  # noqa: E402
from pylog.net.connection import BrokerConnection  # noqa: E402
from pylog.protocol.messages import FetchRequest, ProduceRequest  # noqa: E402

F = FetchRequest
TOPIC = "sessions"


def _fetch(partitions: list[int], session_id: int, epoch: int) -> Any:
    return F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch,
             topics=[F.FetchTopic(topic=TOPIC, partitions=[
                 F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                 for p in partitions])] if partitions else [],
             forgotten_topics_data=[], rack_id="")


def _answered(resp: Any) -> tuple[int, int]:
    parts = [p for t in resp.responses for p in t.partitions]
    size = sum(len(bytes(p.records)) if p.records is not None else 0 for p in parts)
    return len(parts), size


async def _produce(conn: BrokerConnection, busy: list[int], records: int) -> None:
    R = ProduceRequest
    data = []
    for p in busy:
        b = logcore.BatchBuilder()
        for i in range(records):
            b.append(b"x" * 100, key=b"%d" % i)
        data.append(R.PartitionProduceData(index=p, records=bytes(b.build())))
    resp = await conn.send(R(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        R.TopicProduceData(name=TOPIC, partition_data=data)]))
    assert all(p.error_code == 0 for t in resp.responses for p in t.partition_responses), resp


async def _block(conn: BrokerConnection, broker: BrokerProc, mode: str, all_parts: list[int],
                 fetches: int, busy: int) -> dict[str, Any]:
    session_id, epoch = 0, -1
    if mode == "session":
        first = await conn.send(_fetch(all_parts, 0, 0))
        assert first.error_code == 0 and first.session_id > 0, "the broker made no session"
        session_id, epoch = first.session_id, 1
    lat: list[float] = []
    answered = size = 0
    cpu0 = broker.cpu()
    for _ in range(fetches):
        body = _fetch(all_parts, 0, -1) if mode == "sessionless" else _fetch([], session_id, epoch)
        t0 = time.perf_counter()
        resp = await conn.send(body)
        lat.append(time.perf_counter() - t0)
        assert resp.error_code == 0, resp.error_code
        answered, size = _answered(resp)
        if mode == "session":
            epoch += 1
    cpu = broker.cpu() - cpu0
    if mode == "session":
        assert answered == busy, f"an incremental answer held {answered} partitions, not {busy}"
        await conn.send(_fetch([], session_id, -1))  # close it
    else:
        assert answered == len(all_parts)
    lat.sort()
    return {"cpu_us_per_fetch": cpu / fetches * 1e6, "latency_ms_p50": statistics.median(lat) * 1e3,
            "latency_ms_p99": lat[int(len(lat) * 0.99) - 1] * 1e3, "partitions_answered": answered,
            "response_record_bytes": size}


async def _run(args: argparse.Namespace, broker: BrokerProc) -> dict[str, Any]:
    conn = BrokerConnection("127.0.0.1", broker.port, node_id=-1, client_id="bench-sessions",
                            request_timeout=60)
    await conn.connect(30)
    try:
        step = max(args.partitions // args.busy, 1)
        busy = [i * step for i in range(args.busy)]
        await _produce(conn, busy, args.records)
        all_parts = list(range(args.partitions))
        await _block(conn, broker, "sessionless", all_parts, 20, args.busy)  # warm up
        await _block(conn, broker, "session", all_parts, 20, args.busy)
        runs: dict[str, list[dict[str, Any]]] = {"sessionless": [], "session": []}
        for _ in range(args.rounds):
            for mode in runs:
                runs[mode].append(await _block(conn, broker, mode, all_parts, args.fetches,
                                               args.busy))
    finally:
        await conn.close()
    out: dict[str, Any] = {}
    for mode, blocks in runs.items():
        out[mode] = {k: statistics.median(b[k] for b in blocks) for k in blocks[0]}
    out["cpu_ratio_sessionless_over_session"] = (out["sessionless"]["cpu_us_per_fetch"]
                                                 / out["session"]["cpu_us_per_fetch"])
    out["latency_ratio_sessionless_over_session"] = (out["sessionless"]["latency_ms_p50"]
                                                     / out["session"]["latency_ms_p50"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--busy", type=int, default=10, help="partitions with records (10)")
    ap.add_argument("--records", type=int, default=10, help="100 B records per busy partition")
    ap.add_argument("--fetches", type=int, default=200, help="fetches per block (200)")
    ap.add_argument("--rounds", type=int, default=3, help="blocks per mode, alternated (3)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pylog-bench-sessions-") as workdir:
        broker = BrokerProc("pylog", workdir)
        try:
            create_topic(broker.bootstrap, TOPIC, args.partitions)
            result = asyncio.run(_run(args, broker))
        finally:
            broker.stop()
    result.update({"partitions": args.partitions, "busy": args.busy, "fetches": args.fetches,
                   "rounds": args.rounds, "commit": git_commit(),
                   "implementation": logcore.IMPLEMENTATION})
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
