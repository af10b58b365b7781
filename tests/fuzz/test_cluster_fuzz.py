"""The inter-broker APIs fuzzed against a broker in cluster mode, where they are served:
LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown and WriteTxnMarkers from a
client that is not the controller (a ZooKeeper and two brokers, a replicated topic).

Unlike a single-node broker, a cluster broker applies these requests when they carry a
controller epoch no older than the one it knows and a broker epoch that is not stale, as
Kafka's brokers do: without authentication anyone who reaches the port can act as the
controller, and a mutant whose flipped bits raise the controller epoch is applied (it
may leave the broker with an empty metadata cache, as a forged request would in Kafka;
a listener that admits only brokers is the remedy, not a parser). What must hold under
the mutants: both brokers stay up, answer every request or close the connection, keep
their memory bounded and log no traceback; a well-formed request with a stale controller
epoch is refused with STALE_CONTROLLER_EPOCH; and the broker that was not fuzzed still
serves the replicated topic.
"""

from __future__ import annotations

import pathlib
import struct
import time

import pytest
from _harness.zookeeper import zookeeper  # noqa: F401 - the module's ZooKeeper fixture
from integration.conftest import BrokerProcess  # type: ignore[import-not-found]

from pylog.protocol.connection import response_class

from . import driver, mutators

pytestmark = pytest.mark.integration

SEED = 1818
MUTANTS = int(__import__("os").environ.get("FUZZ_MUTANTS", "300"))
STALE_CONTROLLER_EPOCH = 11


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory):  # noqa: F811
    brokers = []
    try:
        for i in range(2):
            data = tmp_path_factory.mktemp(f"fuzz-cluster-{i}") / "data"
            data.mkdir()
            b = BrokerProcess(data, {"zookeeper.connect": zookeeper.connect_string,
                                     "broker.id": str(i), "default.replication.factor": "2",
                                     "offsets.topic.replication.factor": "2",
                                     "min.insync.replicas": "2",
                                     "auto.create.topics.enable": "false"})
            brokers.append(b.start())
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def _bootstrap(brokers: list[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers)


def _replicated_topic(brokers: list[BrokerProcess], topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers), "broker.address.family": "v4"})
    for fut in admin.create_topics([NewTopic(topic, 2, 2)]).values():
        fut.result(30)
    deadline = time.monotonic() + 30
    while True:  # every partition led, both replicas in sync
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and len(md.partitions) == 2 and all(
                p.leader >= 0 and len(p.isrs) == 2 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, md
        time.sleep(0.2)


def _acks_all_round_trip(brokers: list[BrokerProcess], topic: str, tag: str) -> None:
    from confluent_kafka import Consumer, Producer

    conf = {"bootstrap.servers": _bootstrap(brokers), "broker.address.family": "v4"}
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    values = [b"%s %d" % (tag.encode(), i) for i in range(20)]
    for i, v in enumerate(values):
        # Both partitions get records (the sticky partitioner may put all 20 in one), so the
        # read-back finds some in whichever partition broker 0 leads.
        p.produce(topic, v, partition=i % 2)
    assert p.flush(30) == 0, "acks=all produce did not complete; " + _metadata(brokers, topic)
    c = Consumer({**conf, "group.id": f"g-{tag}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 45
    while not set(values) <= got and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    assert set(values) <= got, f"{len(set(values) & got)} of {len(values)} read back"


def _metadata(brokers: list[BrokerProcess], topic: str) -> str:
    """What each broker says of ``topic`` (for a failure message)."""
    from confluent_kafka.admin import AdminClient

    out = []
    for b in brokers:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4"})
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        parts = {p.id: (p.leader, p.replicas, p.isrs, str(p.error)) for p in t.partitions.values()} if t else None
        out.append(f"broker {b.bootstrap}: brokers {sorted(md.brokers)} controller "
                   f"{md.controller_id}: {parts}")
    return "; ".join(out)


def _top_error(key: int, version: int, answer: bytes) -> int | None:
    cls = response_class(key)
    off = 8 + (1 if cls.is_flexible(version) else 0)
    return getattr(cls.decode(answer[off:], version), "error_code", None)


def test_inter_broker_fuzz_against_a_cluster(cluster: list[BrokerProcess],
                                             tmp_path: pathlib.Path) -> None:
    topic = "fuzz-replicated"
    _replicated_topic(cluster, topic)
    _acks_all_round_trip(cluster, topic, "before")
    target = cluster[1]
    health = [driver.Health(b.proc.pid, b.log_path) for b in cluster]
    address = (target.host, target.port)
    # Well-formed requests of controller epoch 0: older than the cluster's, refused.
    stale = 0
    for frame in mutators.inter_broker_frames():
        key, version = struct.unpack_from(">hh", frame, 4)
        outcome = driver.send_one(address, frame, driver.PREFIX_FRAMES[1])
        assert outcome.status in ("answered", "closed"), (key, version, outcome)
        if key in (4, 5, 6) and outcome.status == "answered":
            import socket

            with socket.create_connection(address, timeout=5) as s:
                s.sendall(frame)
                answer = driver._read_frame(s, time.monotonic() + 5)
            assert answer is not None
            code = _top_error(key, version, answer)
            assert code == STALE_CONTROLLER_EPOCH, (key, version, code)
            stale += 1
    assert stale > 0
    report = driver.run(address, health[1], SEED, MUTANTS, parallel=4, kinds=["inter-broker"],
                        out_dir=tmp_path)
    print(report.summary())
    assert report.ok, report.summary() + f"\nbroker log: {target.log_path}"
    for h, b in zip(health, cluster, strict=True):
        assert h.alive() and h.problems() == [], (b.log_path, h.problems())
        for frame in driver.PREFIX_FRAMES:  # still answering (ApiVersions, Metadata)
            assert driver.send_one((b.host, b.port), frame, frame).status == "answered"
    _read_back(cluster[0], topic)


def _read_back(broker: BrokerProcess, topic: str) -> None:
    """The broker that was not fuzzed still serves the records written before."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                  "group.id": "g-read-back", "enable.auto.commit": False})
    # Seen once in CI (2026-11-28, not diagnosed): broker 0 answered LEADER_NOT_AVAILABLE for
    # both partitions right after the fuzz of broker 1 (its metadata cache without live
    # brokers). A cache the controller refreshes is given 30 s to name the leader again; a
    # broker that stays without one still fails here.
    deadline = time.monotonic() + 30
    while True:
        md = c.list_topics(topic, timeout=10).topics[topic]
        mine = [p for p, info in md.partitions.items() if info.leader == 0]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert mine, md.partitions
    c.assign([TopicPartition(topic, p, 0) for p in mine])
    got = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
        elif m is None and got:
            break
    c.close()
    assert got > 0
