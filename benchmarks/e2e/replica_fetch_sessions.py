"""Leader CPU per replica fetch with many idle partitions, with and without the follower's
incremental fetch session (KIP-227, issue 26), in the same run.

A leader and a follower broker in this process (``Broker`` objects, as the replication
unit tests build them; roles from ``become_leader_or_follower``, so the leader runs its
replica checks and ISR bookkeeping for every partition of every fetch), a topic of
``--partitions`` RF=2 partitions of which ``--busy`` take one 10-record batch before each
fetch. The follower's ``ReplicaFetcher`` sends its fetches through the protocol codec (a
``ClientConnection`` / ``ServerConnection`` pair in memory: the request is encoded,
decoded, handled, the answer encoded with its file regions and decoded), alternating
blocks of ``--fetches`` rounds with sessions on and off. Leader CPU per fetch is
``time.process_time`` over the leader's part of each round (decode, handler, encode);
follower CPU is the rest of the round (building the request, applying the answer).

    python benchmarks/e2e/replica_fetch_sessions.py --partitions 2000 --fetches 200 --rounds 3
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

import logcore
from pylog._clock import SystemClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.connection import ClientConnection, ServerConnection
from pylog.protocol.messages import ProduceRequest
from pylog.replication import PartitionInfo
from pylog.replication.fetcher import ReplicaFetcher

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import git_commit  # noqa: E402

FOLLOWER, LEADER = 0, 1
REPLICAS = (FOLLOWER, LEADER)
ADDRESSES = {FOLLOWER: ("127.0.0.1", 1), LEADER: ("127.0.0.1", 1)}


class _Wire:
    """The fetcher's connection: the request through the codec to the leader's handlers."""

    closed = False

    def __init__(self, leader: Broker) -> None:
        self.leader = leader
        self.client = ClientConnection("replica-fetcher")
        self.server = ServerConnection()
        self.leader_cpu = 0.0

    def version_for(self, _request_type: Any) -> int:
        return 12

    async def send(self, request: Any, version: int) -> Any:
        frame = b"".join(self.client.send(request, version))
        t0 = time.process_time()
        self.server.receive_data(frame)
        event = self.server.next_event()
        ctx = handlers.RequestContext(self.leader, event.api_key, event.api_version,
                                      event.correlation_id, event.client_id, "127.0.0.1:1")
        response = await handlers.dispatch(ctx, event.body)
        chunks = self.server.send(event, response)
        self.leader_cpu += time.process_time() - t0
        # sendfile's part (kernel copies) is not the leader's Python work: read here.
        self.client.receive_data(b"".join(c if isinstance(c, (bytes, bytearray, memoryview))
                                          else c.read() for c in chunks))
        return self.client.next_event().body

    async def close(self) -> None:
        self.closed = True


def _broker(root: str, node_id: int) -> Broker:
    config = BrokerConfig({"log.dirs": os.path.join(root, f"b{node_id}"), "broker.id": str(node_id),
                           "auto.create.topics.enable": "false", "replica.fetch.wait.max.ms": "0"})
    b = Broker(config, clock=SystemClock())
    b.log_manager.startup()
    return b


async def _produce(b: Broker, partition: int) -> None:
    builder = logcore.BatchBuilder()
    for i in range(10):
        builder.append(b"x" * 100, key=b"k%d" % i)
    R = ProduceRequest
    body = R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.PartitionProduceData(index=partition, records=bytearray(builder.build()))])])
    resp = await handlers.dispatch(handlers.RequestContext(b, 0, 9, 1, "p", "127.0.0.1:1"), body)
    assert resp.responses[0].partition_responses[0].error_code == 0


async def _block(follower: Broker, leader: Broker, sessions: bool, args: argparse.Namespace) -> dict[str, Any]:
    fetcher = ReplicaFetcher(follower.replicas, LEADER, 0)
    fetcher.sessions_enabled = sessions
    wire = fetcher._conn = _Wire(leader)
    keys = [("t", i) for i in range(args.partitions)]
    fetcher.keys.update(keys)
    await fetcher._fetch_once(keys)  # the full fetch that opens the session: not timed
    await fetcher._fetch_once(keys)
    wire.leader_cpu = 0.0
    total = 0.0
    for n in range(args.fetches):
        for b in range(args.busy):
            await _produce(leader, (n * args.busy + b) % args.partitions)
        t0 = time.process_time()
        await fetcher._fetch_once(keys)
        total += time.process_time() - t0
    ends = [follower.log_manager.get_partition("t", i).log.log_end_offset for i in range(args.partitions)]
    assert ends == [leader.log_manager.get_partition("t", i).log.log_end_offset for i in range(args.partitions)]
    return {"sessions": sessions, "leader_cpu_us_per_fetch": wire.leader_cpu / args.fetches * 1e6,
            "follower_cpu_us_per_fetch": (total - wire.leader_cpu) / args.fetches * 1e6}


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="replica-fetch-sessions-") as root:
        leader, follower = _broker(root, LEADER), _broker(root, FOLLOWER)
        try:
            infos = [PartitionInfo("t", i, LEADER, 0, REPLICAS, 0, REPLICAS) for i in range(args.partitions)]
            for b in (leader, follower):
                await b.replicas.become_leader_or_follower(1, 1, -1, infos, ADDRESSES)
            runs = []
            for r in range(args.rounds):
                for sessions in ((True, False) if r % 2 else (False, True)):
                    res = await _block(follower, leader, sessions, args)
                    print(json.dumps(res), file=sys.stderr, flush=True)
                    runs.append(res)
        finally:
            await follower.replicas.shutdown()
            await leader.replicas.shutdown()
            for b in (follower, leader):
                b.log_manager.shutdown()
                b.io.shutdown()
    med = {mode: {k: statistics.median(r[k] for r in runs if r["sessions"] == on)
                  for k in ("leader_cpu_us_per_fetch", "follower_cpu_us_per_fetch")}
           for mode, on in (("sessionless", False), ("session", True))}
    return {"commit": git_commit(), "implementation": logcore.IMPLEMENTATION,
            "partitions": args.partitions, "busy": args.busy, "fetches": args.fetches,
            "rounds": args.rounds, "load": os.getloadavg(), "median": med,
            "leader_cpu_ratio_sessionless_over_session": round(
                med["sessionless"]["leader_cpu_us_per_fetch"] / med["session"]["leader_cpu_us_per_fetch"], 2),
            "runs": runs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=2000)
    p.add_argument("--busy", type=int, default=1, help="partitions appended to before each fetch")
    p.add_argument("--fetches", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3, help="blocks per mode, alternating")
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(_main(args)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
