"""Group coordinators restarted or failed over in the middle of consumption, with real
clients (issue 25): confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848; 3
members, 6 partitions) and confluent-kafka ``ShareConsumer``s (KIP-932).

- Single node: the broker is stopped (SIGTERM or SIGKILL) and started again on the same
  data while the members run. A consumer group resumes: every record is consumed, the
  offsets committed before the restart are still committed after it, and the final commits
  reach the end of every partition. A share group resumes: no record acknowledged (its
  commit_sync answered) is delivered again, and every record is delivered.
- Cluster (3 brokers, ZooKeeper): the broker leading the group's ``__consumer_offsets``
  partition is killed (SIGKILL); the same for a consumer group. For a share group, the
  group side (its members and assignment are served by the new coordinator and records keep
  coming) and the whole check: the killed broker's partitions' share state moves to their
  new leaders (the share coordinator, ``__share_group_state``), so no acknowledged record
  comes again and every record comes. The share-group offset admin APIs reach partitions
  led by any broker.

All members are polled from the test thread, one after the other; commits are synchronous,
so none is in flight when the broker goes down.
"""

from __future__ import annotations

import signal
import time
import uuid
import warnings
from collections import Counter
from typing import Any

import pytest
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401

from pylog.client import Admin, TopicPartition
from pylog.client.aio.admin import ConfigResource
from pylog.group.config import partition_for
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from tests.integration.conftest import BrokerProcess, cluster_size

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka import AcknowledgeType, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

PARTITIONS = 6
PER_PARTITION = 100
DEADLINE = 120.0
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "15000",
    "group.share.min.record.lock.duration.ms": "1000",
}
single_node = pytest.mark.skipif(bool(cluster_size()), reason="restarts its own single broker")


def _create(bootstrap: str, topic: str, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, rf)])[topic].result(30)


def _produce(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(PARTITIONS * PER_PARTITION):
        p.produce(topic, b"v%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0
    return {(pt, o) for pt in range(PARTITIONS) for o in range(PER_PARTITION)}


# --------------------------------------------------------------------------- consumer groups


class ConsumerGroupRun:
    """Three KIP-848 members consuming ``topic``, committing each record synchronously."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.group = f"fo-{uuid.uuid4().hex[:6]}"
        self.topic = topic
        self.members = []
        for i in range(3):
            c = confluent_kafka.Consumer({
                "bootstrap.servers": bootstrap, "group.id": self.group, "group.protocol": "consumer",
                "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": f"m{i}"})
            c.subscribe([topic])
            self.members.append(c)
        self.seen: Counter[tuple[int, int]] = Counter()
        self.committed: dict[int, int] = {}  # partition -> last offset a commit was answered for

    def poll_round(self) -> None:
        for c in self.members:
            m = c.poll(0.05)
            if m is None or m.error() is not None:
                continue
            self.seen[(m.partition(), m.offset())] += 1
            try:
                c.commit(message=m, asynchronous=False)
            except KafkaException:
                continue  # the coordinator is moving: the record may come again
            self.committed[m.partition()] = max(self.committed.get(m.partition(), 0), m.offset() + 1)

    def consume_until(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.seen) < n and time.monotonic() < deadline:
            self.poll_round()

    def final_commit(self, timeout: float) -> None:
        """Commit every member's positions until each commit is answered."""
        deadline = time.monotonic() + timeout
        for c in self.members:
            while True:
                try:
                    c.commit(asynchronous=False)
                    break
                except KafkaException as exc:
                    if exc.args[0].code() == confluent_kafka.KafkaError._NO_OFFSET:
                        break  # nothing consumed since its last commit
                    assert time.monotonic() < deadline, f"commits still fail: {exc}"
                    c.poll(0.2)

    def close(self) -> None:
        for c in self.members:
            c.close()


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return {tp.partition: o.offset for tp, o in admin.list_group_offsets(group).items()}


def _check_resumed(run: ConsumerGroupRun, bootstrap: str, everything: set[tuple[int, int]],
                   before: dict[int, int]) -> None:
    after = _committed(bootstrap, run.group)
    # What was committed before the disruption is still committed (or more by now).
    assert all(after.get(p, 0) >= o for p, o in before.items()), (before, after)
    run.consume_until(len(everything), DEADLINE)
    assert set(run.seen) == everything, f"missing {sorted(everything - set(run.seen))[:10]}"
    run.final_commit(60)
    assert _committed(bootstrap, run.group) == {p: PER_PARTITION for p in range(PARTITIONS)}


@single_node
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_consumer_group_resumes_after_a_broker_restart(
        tmp_path_factory: pytest.TempPathFactory, sig: int) -> None:
    data = tmp_path_factory.mktemp("group-restart") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = f"fo-{uuid.uuid4().hex[:6]}"
        _create(bs, topic)
        everything = _produce(bs, topic)
        run = ConsumerGroupRun(bs, topic)
        try:
            run.consume_until(len(everything) // 2, DEADLINE)
            assert len(run.seen) >= len(everything) // 2
            with Admin(bootstrap_servers=bs) as admin:
                desc = admin.describe_groups([run.group])[run.group]
            assert desc.state == "Stable" and len(desc.members) == 3
            before = dict(run.committed)
            assert b.stop(sig=sig) in (0, -signal.SIGKILL)
            b.start()
            _check_resumed(run, bs, everything, before)
            with Admin(bootstrap_servers=bs) as admin:
                desc = admin.describe_groups([run.group])[run.group]
            assert len(desc.members) == 3
            assert sorted(tp.partition for m in desc.members for tp in m.assignment) == list(range(PARTITIONS))
        finally:
            run.close()
    finally:
        b.stop(sig=signal.SIGKILL)


# --------------------------------------------------------------------------- share groups


class ShareGroupRun:
    """Three ShareConsumers accepting every record, each acknowledgement committed."""

    def __init__(self, bootstrap: str, topic: str, earliest: bool = True) -> None:
        self.group = f"sfo-{uuid.uuid4().hex[:6]}"
        self.bootstrap = bootstrap
        self.topic = topic
        if earliest:
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.alter_configs(ConfigResource("group", self.group),
                                    {"share.auto.offset.reset": "earliest"})
        self.members = []
        for i in range(3):
            c = confluent_kafka.ShareConsumer({
                "bootstrap.servers": bootstrap, "group.id": self.group, "client.id": f"s{i}",
                "share.acknowledgement.mode": "explicit"})
            c.subscribe([topic])
            self.members.append(c)
        self.delivered: Counter[tuple[int, int]] = Counter()
        self.acknowledged: set[tuple[int, int]] = set()
        self.again: list[tuple[int, int]] = []  # acknowledged, then delivered again

    def poll_round(self) -> None:
        for c in self.members:
            try:
                msgs = [m for m in c.poll(0.2) if m.error() is None]
            except KafkaException:
                continue
            for m in msgs:
                key = (m.partition(), m.offset())
                if key in self.acknowledged:
                    self.again.append(key)
                self.delivered[key] += 1
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if not msgs:
                continue
            try:
                results = c.commit_sync(15)
            except KafkaException:
                continue  # not answered: these may come again
            ok = {(tp.partition) for tp, err in results.items() if err is None}
            self.acknowledged |= {(m.partition(), m.offset()) for m in msgs if m.partition() in ok}

    def consume_until(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.delivered) < n and time.monotonic() < deadline:
            self.poll_round()

    def join(self, timeout: float) -> None:
        """Until the three members are in the group with assignments and every partition's
        share state has a start offset (its leader has made its share partition: at the
        high watermark with share.auto.offset.reset=latest, so records produced after
        this are all delivered; a loaded machine can take longer than any fixed wait)."""
        tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]

        def joined() -> bool:
            self.poll_round()
            with Admin(bootstrap_servers=self.bootstrap) as admin:
                d = admin.describe_groups([self.group])[self.group]
                if len(d.members) != 3 or not all(m.assignment for m in d.members):
                    return False
                started = admin.list_share_group_offsets(self.group, tps)
            return all(o is not None and o.start_offset >= 0 for o in started.values())
        _wait(joined, timeout, "three share-group members with assignments and every "
                               "partition's share state started")

    def close(self) -> None:
        for c in self.members:
            c.close()


@single_node
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_share_group_resumes_after_a_broker_restart(
        tmp_path_factory: pytest.TempPathFactory, sig: int) -> None:
    data = tmp_path_factory.mktemp("share-restart") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = f"sfo-{uuid.uuid4().hex[:6]}"
        _create(bs, topic)
        everything = _produce(bs, topic)
        run = ShareGroupRun(bs, topic)
        try:
            run.consume_until(len(everything) // 2, DEADLINE)
            assert len(run.acknowledged) >= len(everything) // 3, len(run.acknowledged)
            assert b.stop(sig=sig) in (0, -signal.SIGKILL)
            b.start()
            run.consume_until(len(everything), DEADLINE)
            assert run.again == [], f"acknowledged, then delivered again: {run.again[:10]}"
            assert set(run.delivered) == everything, \
                f"never delivered: {sorted(everything - set(run.delivered))[:10]}"
        finally:
            run.close()
    finally:
        b.stop(sig=signal.SIGKILL)


# --------------------------------------------------------------------------- cluster mode


class _Cluster:
    """Three brokers on one ZooKeeper, ``__consumer_offsets`` and ``__share_group_state``
    replicated 3 times."""

    def __init__(self, connect: str, new_broker: Any) -> None:
        from pylog.cluster.zk_store import ZkStore

        self.brokers = [new_broker({
            "zookeeper.connect": connect, "broker.id": str(i), "node.id": str(i),
            "zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "4000",
            "offsets.topic.replication.factor": "3",
            # the share state must outlive its coordinator too (pylog's default is 1)
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2", **OVERRIDES}).start() for i in range(3)]
        self.store = ZkStore(connect, session_timeout_ms=6000)
        self.store.start()
        _wait(lambda: self.store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)

    def create(self, topic: str) -> None:
        _create(self.bootstrap, topic, rf=3)
        _wait(lambda: all((s := self.store.get_partition_state(topic, p)) and len(s[0].isr) == 3
                          for p in range(PARTITIONS)), 60, f"{topic} with a full ISR")

    def kill_coordinator_of(self, group: str) -> str:
        """SIGKILL the leader of the group's offsets partition; the other brokers' bootstrap
        once another replica leads it."""
        index = partition_for(group, int(OVERRIDES["offsets.topic.num.partitions"]))
        state = _wait(lambda: self.store.get_partition_state(GROUP_METADATA_TOPIC_NAME, index),
                      60, f"{GROUP_METADATA_TOPIC_NAME}-{index}")
        old = state[0].leader
        self.brokers[old].stop(sig=signal.SIGKILL)
        _wait(lambda: (s := self.store.get_partition_state(GROUP_METADATA_TOPIC_NAME, index))
              and s[0].leader not in (old, -1), 60, "a new leader of the group's partition")
        return ",".join(b.bootstrap for i, b in enumerate(self.brokers) if i != old)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def cluster(zookeeper, new_broker, request):  # noqa: F811
    chroot = "/" + request.node.name.replace("[", "-").replace("]", "")
    c = _Cluster(zookeeper.connect_string + chroot, new_broker)
    yield c
    c.close()


def test_a_consumer_group_resumes_when_its_coordinator_is_killed(cluster) -> None:
    topic = f"fo-{uuid.uuid4().hex[:6]}"
    cluster.create(topic)
    everything = _produce(cluster.bootstrap, topic)
    run = ConsumerGroupRun(cluster.bootstrap, topic)
    try:
        run.consume_until(len(everything) // 2, DEADLINE)
        assert len(run.seen) >= len(everything) // 2
        _committed(cluster.bootstrap, run.group)  # the coordinator is up (FindCoordinator)
        before = dict(run.committed)
        alive = cluster.kill_coordinator_of(run.group)
        _check_resumed(run, alive, everything, before)
    finally:
        run.close()


def test_a_share_group_keeps_its_members_when_its_coordinator_is_killed(cluster) -> None:
    """The group side: the new coordinator has the members, epochs and assignment (replayed
    from its replica of ``__consumer_offsets``) and records keep being delivered (the
    records' side is the next-but-one test)."""
    topic = f"sfo-{uuid.uuid4().hex[:6]}"
    cluster.create(topic)
    # "latest" (the default): the members join and every share partition starts before the
    # records are produced (an altered group config reaches the other brokers later).
    run = ShareGroupRun(cluster.bootstrap, topic, earliest=False)
    run.join(DEADLINE)
    everything = _produce(cluster.bootstrap, topic)

    def described(bootstrap: str) -> Any:
        with Admin(bootstrap_servers=bootstrap) as admin:
            d = admin.describe_groups([run.group])[run.group]
        return (d.group_type, d.state, d.group_epoch, d.assignment_epoch,
                sorted((m.client_id, m.member_epoch, tuple(m.assignment)) for m in d.members))
    try:
        run.consume_until(len(everything) // 3, DEADLINE)
        before = described(cluster.bootstrap)
        assert before[0] == "share" and len(before[4]) == 3, before
        alive = cluster.kill_coordinator_of(run.group)
        # Records keep coming (from the partitions whose leaders live).
        n = len(run.delivered)
        deadline = time.monotonic() + DEADLINE
        while len(run.delivered) < n + 20 and time.monotonic() < deadline:
            run.poll_round()
        assert len(run.delivered) >= n + 20
        after = described(alive)
        assert after == before, (before, after)
    finally:
        run.close()


def test_share_group_offsets_of_cluster_partitions_led_anywhere(cluster) -> None:
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets at the
    group coordinator reach each partition's share coordinator (the state RPCs), whichever
    broker leads the partition: every partition is described, reset and deleted."""
    pytest.importorskip("confluent_kafka")
    from pylog import errors

    topic = f"sfo-{uuid.uuid4().hex[:6]}"
    cluster.create(topic)
    run = ShareGroupRun(cluster.bootstrap, topic, earliest=False)
    run.join(DEADLINE)
    _produce(cluster.bootstrap, topic)
    try:
        run.consume_until(30, DEADLINE)
    finally:
        run.close()
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        described = admin.list_share_group_offsets(run.group, tps)
        assert all(described[tp] is not None and described[tp].start_offset >= 0 for tp in tps), described

        def altered() -> bool:  # once the closed consumers have left the group
            try:
                admin.alter_share_group_offsets(run.group, {tp: 1 + tp.partition for tp in tps})
            except errors.NonEmptyGroupError:
                return False
            return True
        _wait(altered, 60, "the share group empty and its offsets altered")
        after = admin.list_share_group_offsets(run.group, tps)
        assert {tp: after[tp].start_offset for tp in tps} == {tp: 1 + tp.partition for tp in tps}
        assert admin.delete_share_group_offsets(run.group, [topic]) == {topic: None}
        assert admin.list_share_group_offsets(run.group, tps) == dict.fromkeys(tps), "state left after delete"


def test_a_share_group_resumes_when_its_coordinator_is_killed(cluster) -> None:
    """The whole of it: no acknowledged record delivered again, every record delivered (the
    killed broker's partitions' share state moves with their leadership: their new leaders
    read it from the share coordinators)."""
    topic = f"sfo-{uuid.uuid4().hex[:6]}"
    cluster.create(topic)
    run = ShareGroupRun(cluster.bootstrap, topic, earliest=False)
    run.join(DEADLINE)
    everything = _produce(cluster.bootstrap, topic)
    try:
        run.consume_until(len(everything) // 2, DEADLINE)
        before = Counter(p for p, _ in run.delivered)
        leaders = {p: cluster.store.get_partition_state(topic, p)[0].leader
                   for p in range(PARTITIONS)}
        killed = cluster.kill_coordinator_of(run.group)
        run.consume_until(len(everything), DEADLINE)
        missing = everything - set(run.delivered)
        if missing:
            logs = "\n".join(f"--- broker {i}\n" + "\n".join(
                line for line in b.read_log().splitlines()[-400:]
                if "share" in line.lower() or "error" in line.lower())[-6000:]
                for i, b in enumerate(cluster.brokers))
            raise AssertionError(
                f"never delivered, per partition: {Counter(p for p, _ in missing)}; delivered "
                f"per partition before the kill {dict(before)}, leaders then {leaders}, the "
                f"survivors {killed}\n{logs}")
        assert run.again == [], f"acknowledged, then delivered again: {len(run.again)} records"
    finally:
        run.close()
