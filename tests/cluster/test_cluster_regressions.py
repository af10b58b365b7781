"""Bugs the fault harness found, each pinned by a direct test on a real three-broker cluster.

- Producer ids were allocated per broker (a file in each log directory), so every broker
  handed out 0, 1, ... and two idempotent producers bootstrapped on different brokers shared
  a producer id: librdkafka failed fatally with OUT_OF_ORDER_SEQUENCE on the first batch.
  In cluster mode ids now come from ZooKeeper's ``/latest_producer_id_block``.
- A controller stopping on SIGTERM hung for ever (Python 3.11's ``asyncio.wait_for`` dropped
  the cancellation of its channel to itself), so the broker never exited.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from _harness.zookeeper import missing_reason
from confluent_kafka.admin import AdminClient, NewTopic

from .harness import Cluster
from .workload import Acks, ConfluentProducer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    if missing_reason():
        pytest.skip(missing_reason())
    with Cluster(tmp_path_factory.mktemp("regressions")) as c:
        yield c


def test_producer_ids_are_unique_across_brokers(cluster: Cluster) -> None:
    from pylog.net.connection import BrokerConnection
    from pylog.protocol.messages import InitProducerIdRequest

    async def init_pid(port: int) -> tuple[int, int]:
        conn = BrokerConnection("127.0.0.1", port, node_id=-1, client_id="t",
                                request_timeout=20)
        await conn.connect(20)
        try:
            resp = await conn.send(InitProducerIdRequest(transactional_id=None,
                                                         transaction_timeout_ms=60000))
        finally:
            await conn.close()
        return resp.error_code, resp.producer_id

    got = [asyncio.run(init_pid(b.port)) for b in cluster.brokers for _ in range(2)]
    assert all(code == 0 for code, _ in got), got
    pids = [pid for _, pid in got]
    assert len(set(pids)) == len(pids), f"producer ids handed out twice: {pids}"
    # They come from ZooKeeper's blocks: each broker's block is a distinct range of 1000.
    assert len({pid // 1000 for pid in pids}) == len(cluster.brokers)


def test_controller_exits_on_sigterm_while_leading_under_load(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("load", 3, 3)])["load"].result(60)
    cluster.wait_healthy({"load": 3})
    acks = Acks()
    producer = ConfluentProducer("cp", cluster.bootstrap, "load", 3, 0, 200, acks)
    producer.start()
    try:
        time.sleep(3)
        assert acks.count > 0 and not acks.fatal, acks.fatal
        ctl = cluster.controller()
        assert ctl is not None
        t0 = time.monotonic()
        rc = cluster.brokers[ctl].stop(timeout=60)
        took = time.monotonic() - t0
        assert rc == 0, f"the controller exited with {rc} after {took:.0f} s"
        assert took < 30, f"the controller took {took:.0f} s to stop"
    finally:
        producer.stop()
        producer.join(60)
