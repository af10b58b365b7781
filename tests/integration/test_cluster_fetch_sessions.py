"""Replica fetchers through incremental fetch sessions (KIP-227) on a real cluster: a real
ZooKeeper, three ``pylog broker`` processes, confluent-kafka as the client.

Every follower fetches from each leader through a session (the brokers log each session
they open). A topic of busy partitions and one of idle partitions (the sessions' case)
take acks=all records while a follower is killed and restarted (the ISR shrinks, then
expands once the restarted follower, with a new session, catches up) and then the leader
of a partition is killed (the followers open sessions with the new leader). Every
acknowledged record is read back in order, and the three replicas end byte-identical.
A second test runs the same with one session slot per broker: a leader keeps one
follower's session and the other follower fetches in full, asking again each time.
"""

from __future__ import annotations

import re
import signal
import time
from typing import Any

import confluent_kafka
import pytest
from _harness.waiting import wait_until as _wait
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import AdminClient, NewTopic

import logcore
from pylog.cluster.zk_store import ZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000
BUSY, IDLE = "busy", "idle"
BUSY_PARTITIONS, IDLE_PARTITIONS = 3, 24
_OPENED = re.compile(r"fetch session \d+ opened over (\d+) partitions")


def _full_isr(store: ZkStore, topic: str, n: int) -> bool:
    for p in range(n):
        found = store.get_partition_state(topic, p)
        if not found or len(found[0].isr) != 3:
            return False
    return True


def _produce(bootstrap: str, first: int, count: int, acked: dict[int, list[bytes]]) -> None:
    failed: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.partition()].append(msg.value())
        else:
            failed.append(str(err))
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})
    for i in range(first, first + count):
        p.produce(BUSY, f"r{i}".encode(), partition=i % BUSY_PARTITIONS, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(90) == 0
    assert not failed, failed[:5]


def _read_all(bootstrap: str, total: int) -> dict[int, list[bytes]]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "fs-check",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(BUSY, q, confluent_kafka.OFFSET_BEGINNING)
              for q in range(BUSY_PARTITIONS)])
    got: dict[int, list[bytes]] = {q: [] for q in range(BUSY_PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in got.values()) < total and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got[m.partition()].append(m.value())
    c.close()
    return got


def _scenario(zookeeper, new_broker, overrides: dict[str, str]) -> list[Any]:  # noqa: F811
    with zk_cluster(zookeeper, new_broker, SESSION_MS,
                    {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "3000",
                     "replica.fetch.wait.max.ms": "200", **overrides}) as (brokers, store):
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for name, n in ((BUSY, BUSY_PARTITIONS), (IDLE, IDLE_PARTITIONS)):
            admin.create_topics([NewTopic(name, n, 3, config={"min.insync.replicas": "2"})])[name].result(30)
        _wait(lambda: _full_isr(store, BUSY, BUSY_PARTITIONS) and _full_isr(store, IDLE, IDLE_PARTITIONS),
              60, "full ISRs")
        acked: dict[int, list[bytes]] = {q: [] for q in range(BUSY_PARTITIONS)}
        _produce(bootstrap, 0, 1000, acked)

        # A follower of partition 0 dies: the ISR shrinks; it comes back and catches up.
        state = store.get_partition_state(BUSY, 0)[0]
        follower = next(r for r in state.isr if r != state.leader)
        brokers[follower].stop(sig=signal.SIGKILL)
        _wait(lambda: follower not in store.get_partition_state(BUSY, 0)[0].isr, 30, "the ISR shrink")
        _produce(bootstrap, 1000, 1000, acked)
        brokers[follower].start()
        _wait(lambda: _full_isr(store, BUSY, BUSY_PARTITIONS), 60, "the ISR expand")

        # The leader of partition 0 dies: a new leader, and sessions with it.
        leader = store.get_partition_state(BUSY, 0)[0].leader
        brokers[leader].stop(sig=signal.SIGKILL)
        _wait(lambda: store.get_partition_state(BUSY, 0)[0].leader not in (leader, -1), 30,
              "a new leader")
        _produce(bootstrap, 2000, 1000, acked)
        brokers[leader].start()
        _wait(lambda: _full_isr(store, BUSY, BUSY_PARTITIONS) and _full_isr(store, IDLE, IDLE_PARTITIONS),
              60, "full ISRs again")

        got = _read_all(bootstrap, 3000)
        for q in range(BUSY_PARTITIONS):
            assert got[q] == acked[q], f"partition {q}: read {len(got[q])}, acknowledged {len(acked[q])}"
        time.sleep(2)  # the followers fetch the last high watermark
        for b in brokers:
            b.stop(sig=signal.SIGTERM)
        for q in range(BUSY_PARTITIONS):
            datas = []
            for b in brokers:
                with logcore.ReadOnlyLog(str(b.data_dir / f"{BUSY}-{q}")) as plog:
                    datas.append(plog.read(0, 1 << 30).read())
            assert len(datas[0]) > 0 and datas[0] == datas[1] == datas[2], f"partition {q} differs"
        return [b.read_log() for b in brokers]


def test_replication_through_fetch_sessions_across_isr_changes_and_a_leader_change(zookeeper,  # noqa: F811
                                                                                   new_broker):
    logs = _scenario(zookeeper, new_broker, {})
    opened = [int(n) for text in logs for n in _OPENED.findall(text)]
    # Each broker follows the two others, before and after the restarts: sessions over
    # the busy and idle partitions each leader leads.
    assert len(opened) >= 6, opened
    assert all(n > 0 for n in opened)
    assert not any("fetching in full again" in text for text in logs)


def test_one_session_slot_per_broker_leaves_the_other_follower_fetching_in_full(zookeeper,  # noqa: F811
                                                                               new_broker):
    logs = _scenario(zookeeper, new_broker, {"max.incremental.fetch.session.cache.slots": "1"})
    assert [int(n) for text in logs for n in _OPENED.findall(text)], "no session was opened"
