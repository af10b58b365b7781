"""Metrics per broker in cluster mode: a real ZooKeeper and three ``pylog broker`` processes,
each with its own ``metrics.listener``, scraped with urllib and parsed strictly.

One follower is killed with SIGKILL and records are produced: the leaders shrink their ISR
once it has been behind for ``replica.lag.time.max.ms`` (``isrshrinks_total`` moves; as in
Kafka, a follower that was caught up on an idle partition is not out of sync, so the test
produces), well before its ZooKeeper session expires and the controller takes it out of the
ISRs of the partitions it led; then every partition is under-replicated on its leader.
Restarted, it catches up and the ISR expands again. Exactly
one broker is the active controller throughout, and ``/readyz`` says a broker is registered;
with ZooKeeper stopped it says the session is disconnected (``/healthz`` stays 200).
"""

from __future__ import annotations

import signal

import pytest
from _harness.scrape import get, metrics_port, scrape, value
from _harness.waiting import wait_until
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

SESSION_MS = 15000
PARTITIONS = 3
PREFIX = "kafka_server_replicamanager_"


def _sum(ports: list[int], name: str) -> float:
    return sum(value(scrape(p), name) for p in ports)


def test_under_replicated_and_isr_shrinks_after_a_follower_dies(zookeeper, new_broker):  # noqa: F811
    overrides = {"metrics.listener": "http://127.0.0.1:0", "replica.lag.time.max.ms": "2000"}
    with zk_cluster(zookeeper, new_broker, SESSION_MS, overrides) as (brokers, store):
        ports = [metrics_port(b) for b in brokers]
        for i, port in enumerate(ports):
            assert get(port, "/readyz")[:2] == (200, f"ready: logs loaded, registered as broker {i}\n")
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("mrep", PARTITIONS, 3)])["mrep"].result(30)
        wait_until(lambda: all((s := store.get_partition_state("mrep", p)) and len(s[0].isr) == 3
                               for p in range(PARTITIONS)), 30, "a full ISR everywhere")
        wait_until(lambda: _sum(ports, PREFIX + "leadercount") == PARTITIONS, 30,
                   "every partition led by one broker")
        assert _sum(ports, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        for port in ports:
            samples = scrape(port)
            assert value(samples, PREFIX + "partitioncount") == PARTITIONS
            assert value(samples, PREFIX + "underreplicatedpartitions") == 0
        assert _sum(ports, PREFIX + "isrshrinks_total") == 0

        # Kill a broker that is not the controller: its partitions' leaders shrink the ISR.
        controller = store.get_controller().broker_id
        dead = next(i for i in range(3) if i != controller)
        led = {p for p in range(PARTITIONS) if store.get_partition_state("mrep", p)[0].leader != dead}
        brokers[dead].stop(sig=signal.SIGKILL)
        alive = [p for i, p in enumerate(ports) if i != dead]
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "1"})
        for p in sorted(led):
            for i in range(10):
                producer.produce("mrep", b"x%d" % i, partition=p)
        assert producer.flush(30) == 0
        wait_until(lambda: _sum(alive, PREFIX + "isrshrinks_total") == len(led), 30,
                   "one leader-driven ISR shrink per partition the survivors led")
        wait_until(lambda: _sum(alive, PREFIX + "underreplicatedpartitions") == PARTITIONS, 60,
                   "every partition under-replicated on its leader")
        assert _sum(alive, PREFIX + "leadercount") == PARTITIONS
        assert _sum(alive, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert value(scrape(ports[controller]), "kafka_controller_kafkacontroller_offlinepartitionscount") == 0

        # Back again: it catches up, the leaders expand the ISR.
        brokers[dead].start()
        ports[dead] = metrics_port(brokers[dead])
        wait_until(lambda: _sum(ports, PREFIX + "underreplicatedpartitions") == 0, 60,
                   "the ISR full again")
        assert _sum(ports, PREFIX + "isrexpands_total") >= 1
        assert _sum(ports, "kafka_controller_kafkacontroller_activecontrollercount") == 1

        # ZooKeeper down (the module's own server): every broker is alive but not ready,
        # saying why; back up, the sessions reconnect and every broker is ready again.
        zookeeper.stop()
        for port in ports:
            wait_until(lambda port=port: get(port, "/readyz")[:2]
                       == (503, "not ready: the ZooKeeper session is disconnected\n"), 30,
                       "/readyz saying the session is disconnected")
            assert get(port, "/healthz")[:2] == (200, "ok: serving\n")
        zookeeper.start()
        for i, port in enumerate(ports):
            wait_until(lambda i=i, port=port: get(port, "/readyz")[:2]
                       == (200, f"ready: logs loaded, registered as broker {i}\n"), 30,
                       "/readyz ready again")
