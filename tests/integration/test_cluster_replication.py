"""Replication end to end in cluster mode: a real ZooKeeper, three ``pylog broker`` processes,
the controller and the replica managers together, confluent-kafka as the client.

A topic with replication factor 3 and ``min.insync.replicas=2`` takes idempotent acks=all
records while the leader of its partitions is killed with SIGKILL; the controller elects a
new leader from the ISR, the producer moves to it, and every acknowledged record is read back
exactly once, in order, from the new leaders; the surviving replicas hold byte-identical logs
below the high watermark.
"""

from __future__ import annotations

import signal
import time

import confluent_kafka
import pytest
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import AdminClient, NewTopic

import logcore
from pylog.cluster.zk_store import ZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000
RECORDS = 3000



def test_leader_killed_under_acks_all_loses_nothing(zookeeper, new_broker):  # noqa: F811
    brokers = []
    for i in range(3):
        b = new_broker({"zookeeper.connect": zookeeper.connect_string, "broker.id": str(i),
                        "node.id": str(i), "zookeeper.session.timeout.ms": str(SESSION_MS),
                        "replica.lag.time.max.ms": "4000", "controlled.shutdown.enable": "false"})
        brokers.append(b.start())
    store = ZkStore(zookeeper.connect_string, session_timeout_ms=SESSION_MS)
    store.start()
    try:
        _wait(lambda: store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("rep", 2, 3, config={"min.insync.replicas": "2"})])["rep"].result(30)
        _wait(lambda: all((s := store.get_partition_state("rep", p)) and len(s[0].isr) == 3
                          for p in range(2)), 30, "both partitions with a full ISR")

        acked: dict[int, list[bytes]] = {0: [], 1: []}
        failed: list[str] = []

        def on_delivery(err, msg):
            if err is None:
                acked[msg.partition()].append(msg.value())
            else:
                failed.append(str(err))

        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                      "acks": "all", "linger.ms": 5,
                                      "message.timeout.ms": 60000})
        leader = store.get_partition_state("rep", 0)[0].leader
        for i in range(RECORDS):
            p.produce("rep", f"r{i}".encode(), partition=i % 2, on_delivery=on_delivery)
            if i == RECORDS // 3:
                p.flush(30)
                brokers[leader].stop(sig=signal.SIGKILL)  # the leader of partition 0
            p.poll(0)
        assert p.flush(90) == 0
        assert not failed, failed[:5]
        assert sum(len(v) for v in acked.values()) == RECORDS

        for part in range(2):
            st = store.get_partition_state("rep", part)[0]
            assert st.leader != leader and leader not in st.isr

        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "rep-check",
                                      "enable.auto.commit": False})
        c.assign([confluent_kafka.TopicPartition("rep", q, confluent_kafka.OFFSET_BEGINNING)
                  for q in range(2)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.monotonic() + 60
        while sum(len(v) for v in got.values()) < RECORDS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append(m.value())
        c.close()
        for part in range(2):
            assert got[part] == acked[part], f"partition {part}: read {len(got[part])}, " \
                                             f"acknowledged {len(acked[part])}"
    finally:
        store.close()
    # The two survivors' logs are byte-identical below the high watermark (read them stopped).
    for b in brokers:
        b.stop(sig=signal.SIGTERM)
    survivors = [b for i, b in enumerate(brokers) if i != leader]
    for part in range(2):
        datas = []
        for b in survivors:
            with logcore.ReadOnlyLog(str(b.data_dir / f"rep-{part}")) as log:
                datas.append(log.read(0, 1 << 30).read())
        n = min(len(d) for d in datas)
        assert n > 0 and datas[0][:n] == datas[1][:n]
