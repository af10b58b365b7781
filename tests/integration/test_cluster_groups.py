"""Consumer groups in cluster mode: a real ZooKeeper, three ``pylog broker`` processes,
``__consumer_offsets`` with replication factor 3; confluent-kafka, kafka-python and pylog's
own consumers.

The group coordinator of a group is the leader of its ``__consumer_offsets`` partition and
follows it: when the broker leading that partition is killed (SIGKILL) or shut down
(SIGTERM, controlled shutdown), the controller elects another replica, which loads the
group's committed offsets from its copy of the log; a new member resumes exactly after the
last commit.
"""

from __future__ import annotations

import concurrent.futures
import signal
import threading
import time

import confluent_kafka
import kafka
import pytest
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pylog import client as pylog_client
from pylog.cluster.zk_store import ZkStore
from pylog.group.config import partition_for
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME

pytestmark = pytest.mark.integration

SESSION_MS = 6000
OFFSETS_PARTITIONS = 5
PARTITIONS = 3
PER_PARTITION = 200



class Cluster:
    def __init__(self, connect: str, new_broker, offsets_rf: int = 3) -> None:
        self.offsets_rf = offsets_rf
        self.brokers = []
        for i in range(3):
            b = new_broker({"zookeeper.connect": connect, "broker.id": str(i),
                            "node.id": str(i), "zookeeper.session.timeout.ms": str(SESSION_MS),
                            "replica.lag.time.max.ms": "4000",
                            "offsets.topic.replication.factor": str(offsets_rf),
                            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                            "group.initial.rebalance.delay.ms": "0",
                            # KIP-848 groups heartbeat every 500 ms here (Kafka's min: 5 s).
                            "group.consumer.heartbeat.interval.ms": "500",
                            "group.consumer.min.heartbeat.interval.ms": "100",
                            "controlled.shutdown.retry.backoff.ms": "500"})
            self.brokers.append(b.start())
        self.store = ZkStore(connect, session_timeout_ms=SESSION_MS)
        self.store.start()
        _wait(lambda: self.store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)

    def close(self) -> None:
        self.store.close()

    def create_topic(self, name: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, PARTITIONS, 3)])[name].result(30)
        _wait(lambda: all((s := self.store.get_partition_state(name, p)) and len(s[0].isr) == 3
                          for p in range(PARTITIONS)), 30, f"{name} with a full ISR")

    def produce(self, name: str) -> None:
        p = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                      "linger.ms": 5})
        for i in range(PARTITIONS * PER_PARTITION):
            p.produce(name, b"v%d" % i, partition=i % PARTITIONS)
        assert p.flush(60) == 0

    def coordinator_of(self, group: str) -> int:
        """The leader of the group's ``__consumer_offsets`` partition (from ZooKeeper)."""
        index = partition_for(group, OFFSETS_PARTITIONS)
        state = _wait(lambda: self.store.get_partition_state(GROUP_METADATA_TOPIC_NAME, index),
                      60, f"{GROUP_METADATA_TOPIC_NAME}-{index}")
        return state[0].leader


@pytest.fixture
def cluster(zookeeper, new_broker, request):  # noqa: F811
    # One chroot per test: the module's ZooKeeper outlives the brokers a test kills.
    chroot = "/" + request.node.name.replace("[", "-").replace("]", "")
    c = Cluster(zookeeper.connect_string + chroot, new_broker, getattr(request, "param", 3))
    yield c
    c.close()


def _consumer(bootstrap: str, group: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000})


def _consume(c: confluent_kafka.Consumer, n: int, timeout: float) -> list[confluent_kafka.Message]:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    return got


# Replication factor 1 is the default (each __consumer_offsets partition on one broker).
@pytest.mark.parametrize("cluster", [3, 1], ids=["offsets-rf3", "offsets-rf1"], indirect=True)
def test_confluent_and_kafka_python_groups_consume_and_commit(cluster) -> None:
    cluster.create_topic("orders")
    cluster.produce("orders")
    total = PARTITIONS * PER_PARTITION

    c = _consumer(cluster.bootstrap, "ck-group")
    c.subscribe(["orders"])
    got = _consume(c, total, 90)
    assert len(got) == total
    assert sorted((m.partition(), m.offset()) for m in got) == \
        [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("orders", p) for p in range(PARTITIONS)], timeout=30)
    assert [tp.offset for tp in committed] == [PER_PARTITION] * PARTITIONS
    c.close()

    k = kafka.KafkaConsumer("orders", group_id="kp-group", bootstrap_servers=cluster.bootstrap,
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:
        seen = 0
        deadline = time.monotonic() + 90
        while seen < total and time.monotonic() < deadline:
            for records in k.poll(timeout_ms=500).values():
                seen += len(records)
        assert seen == total
        k.commit()
        tps = [kafka.TopicPartition("orders", p) for p in range(PARTITIONS)]
        assert [k.committed(tp) for tp in tps] == [PER_PARTITION] * PARTITIONS
    finally:
        k.close()

    # pylog's own client.
    with pylog_client.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "py-group",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                "session.timeout.ms": 10000,
                                "heartbeat.interval.ms": 1000}) as pc:
        pc.subscribe(["orders"])
        seen = 0
        deadline = time.monotonic() + 90
        while seen < total and time.monotonic() < deadline:
            seen += len(pc.poll(0.5))
        assert seen == total
        pc.commit()
        ptps = [pylog_client.TopicPartition("orders", p) for p in range(PARTITIONS)]
        assert [m.offset for m in pc.committed(ptps).values()] == [PER_PARTITION] * PARTITIONS

    # A fresh consumer of each group starts at the end (the commits are the coordinator's).
    for group in ("ck-group", "kp-group", "py-group"):
        c = _consumer(cluster.bootstrap, group)
        committed = c.committed([TopicPartition("orders", p) for p in range(PARTITIONS)],
                                timeout=30)
        assert [tp.offset for tp in committed] == [PER_PARTITION] * PARTITIONS, group
        c.close()
    # __consumer_offsets has the configured replicas, and its partitions' leaders (the
    # coordinators) are spread over the three brokers.
    assignment = cluster.store.get_topic_assignment(GROUP_METADATA_TOPIC_NAME)[0]
    assert {len(a.replicas) for a in assignment.partitions.values()} == {cluster.offsets_rf}
    leaders = {cluster.store.get_partition_state(GROUP_METADATA_TOPIC_NAME, i)[0].leader
               for i in range(OFFSETS_PARTITIONS)}
    assert leaders == {0, 1, 2}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_group_follows_its_offsets_partition_to_the_new_leader(cluster, sig) -> None:
    cluster.create_topic("events")
    cluster.produce("events")
    group = "moving-group"
    total = PARTITIONS * PER_PARTITION

    c1 = _consumer(cluster.bootstrap, group)
    c1.subscribe(["events"])
    first = _consume(c1, total // 2, 90)
    assert len(first) == total // 2
    positions: dict[int, int] = {}
    for m in first:
        positions[m.partition()] = max(positions.get(m.partition(), 0), m.offset() + 1)
    commit = [TopicPartition("events", p, o) for p, o in sorted(positions.items())]
    c1.commit(offsets=commit, asynchronous=False)
    # Read on without committing: a new member must re-read these, nothing before them.
    assert len(_consume(c1, total // 4, 60)) == total // 4

    old = cluster.coordinator_of(group)
    cluster.brokers[old].stop(sig=sig)
    index = partition_for(group, OFFSETS_PARTITIONS)
    state = _wait(lambda: (s := cluster.store.get_partition_state(GROUP_METADATA_TOPIC_NAME, index))
                  and s[0].leader not in (old, -1) and s, 60, "a new leader of the group's partition")
    new = state[0].leader

    # The live member finds the new coordinator and rejoins there.
    admin = AdminClient({"bootstrap.servers": ",".join(
        b.bootstrap for i, b in enumerate(cluster.brokers) if i != old)})

    def described():
        c1.poll(0.2)
        try:
            d = admin.describe_consumer_groups([group])[group].result(10)
        except (confluent_kafka.KafkaException, concurrent.futures.TimeoutError):
            return None  # asked again: the new coordinator may still be loading
        return d if d.coordinator.id == new and len(d.members) == 1 and \
            d.state == confluent_kafka.ConsumerGroupState.STABLE else None
    _wait(described, 90, f"the group stable on broker {new}")
    c1.close()

    # A new member resumes exactly after the last commit (which the new leader loaded).
    c2 = _consumer(cluster.bootstrap, group)
    committed = c2.committed([TopicPartition("events", p) for p in range(PARTITIONS)], timeout=30)
    assert {tp.partition: tp.offset for tp in committed} == \
        {p: positions.get(p, -1001) for p in range(PARTITIONS)}
    c2.subscribe(["events"])
    rest = _consume(c2, total - sum(positions.values()), 90)
    starts: dict[int, int] = {}
    for m in rest:
        starts.setdefault(m.partition(), m.offset())
    assert starts == {p: positions.get(p, 0) for p in range(PARTITIONS)
                      if positions.get(p, 0) < PER_PARTITION}
    assert len(rest) == total - sum(positions.values())
    assert sorted((m.partition(), m.offset()) for m in rest) == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(positions.get(p, 0), PER_PARTITION))
    assert not _consume(c2, 1, 2)  # nothing more
    # The group commits on the new coordinator.
    c2.commit(asynchronous=False)
    committed = c2.committed([TopicPartition("events", p) for p in range(PARTITIONS)], timeout=30)
    assert [tp.offset for tp in committed] == [PER_PARTITION] * PARTITIONS
    c2.close()


def test_acknowledged_commits_survive_a_sigkill_of_the_coordinator(cluster) -> None:
    """Commits race the kill: every commit the coordinator acknowledged was in the whole
    ISR first (acks=all), so the new leader has it; the one in flight may or may not be."""
    cluster.create_topic("stream")
    cluster.produce("stream")
    group = "racing-group"
    c1 = _consumer(cluster.bootstrap, group)
    c1.subscribe(["stream"])
    assert len(_consume(c1, PARTITIONS * PER_PARTITION, 90)) == PARTITIONS * PER_PARTITION
    old = cluster.coordinator_of(group)
    acked = [0]
    attempted = [0]
    stop = threading.Event()

    def committer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            attempted[0] = n
            try:
                c1.commit(offsets=[TopicPartition("stream", p, n) for p in range(PARTITIONS)],
                          asynchronous=False)
            except confluent_kafka.KafkaException:
                return  # the coordinator died under this commit
            acked[0] = n

    t = threading.Thread(target=committer)
    t.start()
    _wait(lambda: acked[0] >= 20, 60, "commits before the kill")
    cluster.brokers[old].stop(sig=signal.SIGKILL)
    # Stop at the first answer after the kill (a failure, or a success through the new
    # coordinator, which then holds that commit too).
    seen = acked[0]
    _wait(lambda: not t.is_alive() or acked[0] > seen + 1, 90, "the first commit after the kill")
    stop.set()
    t.join(90)
    assert not t.is_alive()
    last_acked, last_attempted = acked[0], attempted[0]
    c1.close()

    c2 = _consumer(cluster.bootstrap, group)
    committed = c2.committed([TopicPartition("stream", p) for p in range(PARTITIONS)], timeout=60)
    offsets = {tp.offset for tp in committed}
    assert len(offsets) == 1, committed  # each commit covers all partitions in one record batch
    (got,) = offsets
    assert last_acked <= got <= last_attempted, (last_acked, got, last_attempted)
    c2.close()


def test_a_consumer_protocol_group_survives_a_sigkill_of_its_coordinator(cluster) -> None:
    """A KIP-848 group (confluent-kafka, group.protocol=consumer) keeps its epochs and
    assignment when its coordinator dies: the new leader of the group's partition replays the
    ConsumerGroup* records from its replica, and the members carry on at their epochs."""
    cluster.create_topic("kip848")
    group = "kip848-group"
    members = []
    for name in ("k1", "k2"):
        c = confluent_kafka.Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name})
        c.subscribe(["kip848"], on_assign=lambda *a: None, on_revoke=lambda *a: None)
        members.append(c)
    seen: set[bytes] = set()

    def poll_all() -> None:
        for c in members:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                seen.add(m.value())

    def described(bootstrap: str):
        with pylog_client.Admin(bootstrap_servers=bootstrap) as admin:
            d = admin.describe_groups([group])[group]
        return (d.group_epoch, d.assignment_epoch, d.state,
                sorted((m.member_id, m.member_epoch, tuple(m.assignment)) for m in d.members))

    def settled() -> bool:
        poll_all()
        held = [len(c.assignment()) for c in members]
        return sorted(held) == [1, 2]
    _wait(settled, 60, "two members sharing 3 partitions")
    before = described(cluster.bootstrap)
    assert before[2] == "Stable" and len(before[3]) == 2

    old = cluster.coordinator_of(group)
    cluster.brokers[old].stop(sig=signal.SIGKILL)
    index = partition_for(group, OFFSETS_PARTITIONS)
    _wait(lambda: (s := cluster.store.get_partition_state(GROUP_METADATA_TOPIC_NAME, index))
          and s[0].leader not in (old, -1), 60, "a new leader of the group's partition")
    alive = ",".join(b.bootstrap for i, b in enumerate(cluster.brokers) if i != old)
    p = confluent_kafka.Producer({"bootstrap.servers": alive, "acks": "all"})
    for i in range(30):
        p.produce("kip848", b"after-%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0
    _wait(lambda: (poll_all(), {b"after-%d" % i for i in range(30)} <= seen)[1], 90,
          "the records produced after the kill")
    # Same epochs, same members, same partitions: nobody was fenced, nothing rebalanced.
    assert described(alive) == before
    for c in members:
        c.close()
