"""Share groups (KIP-932) in cluster mode: a real ZooKeeper, three ``pylog broker`` processes,
``__share_group_state`` replicated (factor 3, min ISR 2), a confluent-kafka ``ShareConsumer``
and a ``pylog.client.ShareConsumer`` in one share group, both acknowledging explicitly.

The share partition's state lives with its share coordinator (the leader of its
``__share_group_state`` partition), not with the topic partition's leader. Stopped mid-run,
between a consumer's poll and its commit (SIGKILL, or SIGTERM: a controlled shutdown that
moves the leaderships first), either the topic partition's leader (a new leader reads the
state from the share coordinator) or the share coordinator (a new leader of the state
partition loads it from its replica of the log), the group goes on from the saved state. What is asserted, with
"confirmed" meaning that the consumer's ``commit_sync`` reported success for the record's
partition (the broker answered after the state write):

- no record is delivered after its acceptance was confirmed (an acknowledged record is
  never delivered again);
- every record produced is delivered (nothing is lost, nothing skipped by a reset to
  ``share.auto.offset.reset``), and every record's acceptance is confirmed, except records
  whose last acknowledgement's outcome the consumer could not learn (its commit failed as
  the broker died: Kafka's at-least-once; such a record is either delivered again or was
  acknowledged before the crash);
- a record delivered more than once is delivered with a higher delivery count each time
  (delivery counts survive the failover, they do not start at 1 again).
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from typing import Any

import confluent_kafka
import pytest
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import AdminClient, NewTopic

from pylog import errors
from pylog.cluster.zk_store import ZkStore
from pylog.group.config import partition_for
from pylog.log.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from pylog.log.topics import topic_id_from_str

pytestmark = pytest.mark.integration

SESSION_MS = 6000
STATE_PARTITIONS = 6
RECORDS = 300
WINDOW = 40
DEADLINE = 150.0


async def _send(host: str, port: int, body: Any, version: int | None = None) -> Any:
    from pylog.net.connection import BrokerConnection

    conn = BrokerConnection(host, port, node_id=-1, client_id="share-cluster-test", request_timeout=15.0)
    await conn.connect(15.0)
    try:
        return await conn.send(body, version)
    finally:
        await conn.close()


class Cluster:
    def __init__(self, connect: str, new_broker) -> None:
        self.brokers = []
        for i in range(3):
            b = new_broker({"zookeeper.connect": connect, "broker.id": str(i), "node.id": str(i),
                            "zookeeper.session.timeout.ms": str(SESSION_MS),
                            "replica.lag.time.max.ms": "4000",
                            "offsets.topic.replication.factor": "3",
                            "offsets.topic.num.partitions": "3",
                            "share.coordinator.state.topic.replication.factor": "3",
                            "share.coordinator.state.topic.min.isr": "2",
                            "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
                            "min.insync.replicas": "2",
                            "group.share.heartbeat.interval.ms": "500",
                            "group.share.session.timeout.ms": "10000",
                            "group.share.min.record.lock.duration.ms": "1000",
                            "controlled.shutdown.retry.backoff.ms": "500"})
            self.brokers.append(b.start())
        self.store = ZkStore(connect, session_timeout_ms=SESSION_MS)
        self.store.start()
        _wait(lambda: self.store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)

    def close(self) -> None:
        self.store.close()

    def live(self) -> list[Any]:
        return [b for b in self.brokers if b.alive()]

    def create_topic(self, name: str) -> str:
        """One partition, three replicas; its topic id (base64, as Kafka prints it)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
        _wait(lambda: (s := self.store.get_partition_state(name, 0)) and len(s[0].isr) == 3, 30,
              f"{name} with a full ISR")
        return self.store.get_topic_assignment(name)[0].topic_id

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.store.get_partition_state(topic, partition)[0].leader

    def set_group_config(self, group: str, key: str, value: str, via: int | None = None) -> None:
        """Through one broker (``via``, else the first live one): ZooKeeper's
        ``/config/groups/<group>`` carries it to every broker."""
        from pylog.protocol.messages import IncrementalAlterConfigsRequest as R

        b = self.live()[0] if via is None else self.brokers[via]
        resp = asyncio.run(_send(b.host, b.port, R(resources=[R.AlterConfigsResource(
            resource_type=32, resource_name=group,
            configs=[R.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False)))
        assert resp.responses[0].error_code == 0, resp

    def group_config(self, node: int, group: str) -> dict[str, tuple[str, int]]:
        """DescribeConfigs of the GROUP resource on one broker: {name: (value, source)}, as
        that broker uses them."""
        from pylog.protocol.messages import DescribeConfigsRequest as D

        b = self.brokers[node]
        resp = asyncio.run(_send(b.host, b.port, D(resources=[D.DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=None)], include_synonyms=False)))
        assert resp.results[0].error_code == 0, resp
        return {c.name: (c.value, c.config_source) for c in resp.results[0].configs}

    def wait_group_config(self, group: str, key: str, value: str) -> None:
        """Until every live broker uses the group's ``key`` = ``value`` (change notices are
        applied asynchronously)."""
        for b in self.live():
            node = self.brokers.index(b)
            _wait(lambda n=node: self.group_config(n, group).get(key) == (value, 8), 30,
                  f"broker {node} to use {group}'s {key}={value}")

    def share_coordinator(self, key: str) -> int:
        """FindCoordinator key type 2 (which makes ``__share_group_state`` on first use)."""
        from pylog.protocol.messages import FindCoordinatorRequest

        b = self.live()[0]

        def found() -> tuple[int] | None:  # node 0 is a valid answer: a tuple, not an int
            resp = asyncio.run(_send(b.host, b.port, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 4))
            c = resp.coordinators[0]
            return (c.node_id,) if c.error_code == 0 else None

        (node,) = _wait(found, 60, f"the share coordinator of {key}")
        # The answer follows the metadata cache; ZooKeeper says the same leader.
        assert node == self.leader(SHARE_GROUP_STATE_TOPIC_NAME, partition_for(key, STATE_PARTITIONS))
        return node


@pytest.fixture
def cluster(zookeeper, new_broker, request):  # noqa: F811
    chroot = "/" + request.node.name.replace("[", "-").replace("]", "")
    c = Cluster(zookeeper.connect_string + chroot, new_broker)
    yield c
    c.close()


class Tally:
    """What the consumers saw (see the module docstring)."""

    def __init__(self) -> None:
        self.deliveries: dict[bytes, list[int]] = {}  # value -> delivery counts, in order
        self.confirmed: set[bytes] = set()
        self.unknown: set[bytes] = set()  # acknowledged, outcome not learnt
        self.violations: list[str] = []
        self.errors: list[str] = []  # failed commits, for the failure message

    def delivered(self, who: str, value: bytes, count: int | None) -> None:
        if value in self.confirmed:
            self.violations.append(f"{who}: {value!r} delivered (count {count}) after its acceptance was confirmed")
        seen = self.deliveries.setdefault(value, [])
        if count is not None and seen and seen[-1] is not None and count <= seen[-1]:
            self.violations.append(f"{who}: {value!r} delivered with count {count} after {seen}")
        seen.append(count)

    def committed(self, values: list[bytes], ok: bool) -> None:
        if ok:
            self.confirmed.update(values)
            self.unknown.difference_update(values)
        else:
            self.unknown.update(v for v in values if v not in self.confirmed)

    def done(self, values: list[bytes]) -> bool:
        """Every record's acceptance confirmed or its outcome unknown."""
        return set(values) <= self.confirmed | self.unknown


def _step_confluent(c: Any, tally: Tally, before_commit: Any = None) -> None:
    msgs = c.poll(0.2)
    got = []
    for m in msgs:
        if m.error() is not None:
            continue
        tally.delivered("confluent", m.value(), m.delivery_count())
        c.acknowledge(m, AcknowledgeType.ACCEPT)
        got.append(m.value())
    if got and before_commit is not None:
        before_commit()
    if got:
        try:
            results = c.commit_sync(10)
            ok = bool(results) and all(e is None for e in results.values())
            if not ok:
                tally.errors.append(f"confluent commit of {got[:2]}..: {results}")
        except confluent_kafka.KafkaException as exc:
            tally.errors.append(f"confluent commit of {got[:2]}..: {exc}")
            ok = False
        tally.committed(got, ok)


def _step_pylog(c: Any, tally: Tally) -> None:
    from pylog.client import AcknowledgeType as A

    records = c.poll(0.2, max_records=20)
    for r in records:
        tally.delivered("pylog", r.value, c.delivery_count(r))
        c.acknowledge(r, A.ACCEPT)
    if records:
        try:
            results = c.commit_sync(10)
            ok = bool(results) and all(e is None for e in results.values())
            if not ok:
                tally.errors.append(f"pylog commit of {records[0].value!r}..: {results}")
        except Exception as exc:  # noqa: BLE001 - a failed commit is an unknown outcome
            tally.errors.append(f"pylog commit of {records[0].value!r}..: {exc!r}")
            ok = False
        tally.committed([r.value for r in records], ok)


@pytest.mark.parametrize(("victim", "sig"), [("partition-leader", signal.SIGKILL),
                                             ("share-coordinator", signal.SIGKILL),
                                             ("partition-leader", signal.SIGTERM)],
                         ids=["leader-killed", "share-coordinator-killed", "leader-shut-down"])
def test_share_group_survives_a_stopped_broker(cluster: Cluster, victim: str, sig: int) -> None:
    from pylog.client import ShareConsumer

    topic = f"jobs-{victim}-{sig}"
    tid = cluster.create_topic(topic)
    leader = cluster.leader(topic)
    # A group whose share partition's coordinator is not the topic partition's leader, so
    # that each run kills one role only.
    for _ in range(30):
        group = f"g-{uuid.uuid4().hex[:6]}"
        coordinator = cluster.share_coordinator(f"{group}:{tid}:0")
        if coordinator != leader:
            break
    else:
        pytest.fail("no group name put the share coordinator away from the partition leader")
    cluster.set_group_config(group, "share.auto.offset.reset", "earliest", via=coordinator)
    cluster.wait_group_config(group, "share.auto.offset.reset", "earliest")

    # Records are produced as the group works through them (at most WINDOW unfinished), so
    # that the kill falls mid-stream: records in flight with the consumers, records produced
    # to the old leader and not yet delivered, records produced after the kill.
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5})
    values: list[bytes] = []
    ck = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                        "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
    ck.subscribe([topic])
    pc = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                        "share.acknowledgement.mode": "explicit"})
    pc.subscribe([topic])
    tally = Tally()
    killed = None
    after_kill: set[bytes] = set()  # first delivered after the kill
    try:
        deadline = time.monotonic() + DEADLINE
        while not (len(values) == RECORDS and tally.done(values)) and time.monotonic() < deadline:
            unfinished = len(values) - len(set(values) & (tally.confirmed | tally.unknown))
            if len(values) < RECORDS and unfinished < WINDOW:
                for _ in range(WINDOW // 2):
                    values.append(b"v%d" % len(values))
                    producer.produce(topic, value=values[-1], partition=0)
            producer.poll(0)
            known = set(tally.deliveries)
            kill = None
            if killed is None and len(tally.confirmed) >= RECORDS // 3:
                # Killed between a poll and its commit: that commit's outcome is lost.
                def kill() -> None:
                    nonlocal killed
                    killed = leader if victim == "partition-leader" else coordinator
                    cluster.brokers[killed].stop(sig=sig)
            _step_confluent(ck, tally, kill)
            _step_pylog(pc, tally)
            if killed is not None:
                after_kill.update(set(tally.deliveries) - known)
        assert producer.flush(60) == 0
        # Records whose outcome was unknown may still come back: poll until nothing has
        # been delivered for 3 s (or all are confirmed).
        quiet_since = time.monotonic()
        while tally.unknown and time.monotonic() - quiet_since < 3 and time.monotonic() < deadline:
            before = sum(len(d) for d in tally.deliveries.values())
            _step_confluent(ck, tally)
            _step_pylog(pc, tally)
            if sum(len(d) for d in tally.deliveries.values()) != before:
                quiet_since = time.monotonic()
    finally:
        ck.close()
        pc.close()
    redelivered = {v: d for v, d in tally.deliveries.items() if len(d) > 1}
    summary = (f"{victim}: stopped broker {killed} (leader {leader}, coordinator {coordinator}); "
          f"{len(tally.confirmed)} confirmed, {len(tally.unknown)} unknown, {len(redelivered)} "
          f"delivered more than once, e.g. {list(redelivered.items())[:3]}; unknown {sorted(tally.unknown)[:5]}; "
          f"failed commits {tally.errors[:6]}")
    print(summary)  # shown with -s: what the run went through
    assert killed is not None, summary
    assert not tally.violations, (tally.violations[:10], summary)
    assert set(values) <= set(tally.deliveries), (sorted(set(values) - set(tally.deliveries))[:10], summary)
    missing = set(values) - tally.confirmed - tally.unknown
    assert not missing, (sorted(missing)[:10], summary)
    # The group went on after the kill: records first delivered after it were accepted.
    assert after_kill & tally.confirmed, ("nothing was delivered after the kill", summary)
    assert len(values) == RECORDS


def test_share_state_crosses_a_sasl_ssl_inter_broker_listener(zookeeper, new_broker, tmp_path) -> None:  # noqa: F811
    """The persister's RPCs go over the inter-broker listener with its TLS and SASL settings
    (SASL_SSL, SCRAM-SHA-512): a group whose share coordinator is not the partition's leader
    accepts every record once, and the coordinator, asked directly, holds the state."""
    import re

    from _harness.tls import make_pki
    from _harness.zk_cluster import zk_cluster

    from pylog.protocol.messages import (
        DescribeConfigsRequest,
        FindCoordinatorRequest,
        IncrementalAlterConfigsRequest,
    )
    from pylog.protocol.messages import ReadShareGroupStateSummaryRequest as S
    from pylog.security.sasl.credentials import zk_alter_user
    from pylog.security.sasl.scram import make_credential

    pki = make_pki(tmp_path / "pki")
    pre = ZkStore(zookeeper.connect_string)
    pre.start()
    try:
        zk_alter_user(pre, "broker", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "broker-secret")}, [])
    finally:
        pre.close()
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="broker" password="broker-secret";',
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
        "share.coordinator.state.topic.replication.factor": "3",
        "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
        "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
        "group.share.heartbeat.interval.ms": "500",
    }
    with zk_cluster(zookeeper, new_broker, SESSION_MS, overrides) as (brokers, store):
        plain = {}
        for b in brokers:
            ports = dict(re.findall(r"listening on (\w+)://127\.0\.0\.1:(\d+)", b.read_log()))
            plain[int(b.overrides["broker.id"])] = ("127.0.0.1", int(ports["PLAINTEXT"]))
        bootstrap = ",".join(f"{h}:{p}" for h, p in plain.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped handle cancels the call
        admin.create_topics([NewTopic("sq", 1, 3)])["sq"].result(30)
        _wait(lambda: (s := store.get_partition_state("sq", 0)) and len(s[0].isr) == 3, 30, "sq with a full ISR")
        tid = store.get_topic_assignment("sq")[0].topic_id
        leader = store.get_partition_state("sq", 0)[0].leader

        def coordinator(key: str) -> tuple[int] | None:
            resp = asyncio.run(_send(*plain[0], FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 4))
            c = resp.coordinators[0]
            return (c.node_id,) if c.error_code == 0 else None

        for _ in range(30):
            group = f"g-{uuid.uuid4().hex[:6]}"
            (node,) = _wait(lambda g=group: coordinator(f"{g}:{tid}:0"), 60, "the share coordinator")
            if node != leader:
                break
        else:
            pytest.fail("no group name put the share coordinator away from the partition leader")
        R = IncrementalAlterConfigsRequest
        # Through one broker only (not the partition's leader): ZooKeeper carries it.
        via = next(n for n in plain if n != leader)
        resp = asyncio.run(_send(*plain[via], R(resources=[R.AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[R.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False)))
        assert resp.responses[0].error_code == 0
        D = DescribeConfigsRequest

        def leader_uses_it() -> bool:
            r = asyncio.run(_send(*plain[leader], D(resources=[D.DescribeConfigsResource(
                resource_type=32, resource_name=group, configuration_keys=["share.auto.offset.reset"])],
                include_synonyms=False)))
            return [(c.value, c.config_source) for c in r.results[0].configs] == [("earliest", 8)]
        _wait(leader_uses_it, 30, "the partition's leader to use the group config")
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        values = [b"s%d" % i for i in range(100)]
        for v in values:
            p.produce("sq", v, partition=0)
        assert p.flush(30) == 0

        c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                           "share.acknowledgement.mode": "explicit"})
        c.subscribe(["sq"])
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(seen) < len(values) and time.monotonic() < deadline:
                msgs = [m for m in c.poll(0.3) if m.error() is None]
                for m in msgs:
                    seen.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if msgs:
                    assert all(e is None for e in c.commit_sync(10).values())
        finally:
            c.close()
        assert sorted(seen) == sorted(values)

        def summary() -> tuple[int] | None:
            resp = asyncio.run(_send(*plain[node], S(group_id=group, topics=[S.ReadStateSummaryData(
                topic_id=topic_id_from_str(tid), partitions=[S.PartitionData(partition=0, leader_epoch=-1)])])))
            r = resp.results[0].partitions[0]
            assert r.error_code == 0, r
            return (r.start_offset,) if r.start_offset == len(values) else None

        # The remote coordinator holds the start offset past every accepted record: the
        # leader's writes reached it, and brokers reach each other only on INTERNAL (SASL_SSL).
        _wait(summary, 30, "the share coordinator's start offset at the end")


def test_a_deleted_share_groups_state_is_not_written_back_by_a_remote_leader(cluster: Cluster) -> None:
    """DeleteGroups of a share group deletes its share partitions' state at their share
    coordinators (the group coordinator moves the topics to DeletingTopics, then sends
    DeleteShareGroupState). The topic partition's leader, a third broker, still holds the
    share partition in memory, with records a (non-member) share session acquired: its next
    state write, for that session's acknowledgement, is refused by the share coordinator
    (INVALID_REQUEST: no state), the acknowledgement fails, the leader drops the share
    partition, and the deleted state does not come back: a new group of that name starts
    from ``share.auto.offset.reset`` (every record delivered again, delivery count 1).
    Before the group coordinator managed the state (pylog up to 2207a69), the write was
    taken as new state and the acknowledgement succeeded."""
    from pylog.protocol.messages import DeleteGroupsRequest, FindCoordinatorRequest
    from pylog.protocol.messages import ReadShareGroupStateSummaryRequest as S
    from pylog.protocol.messages import ShareAcknowledgeRequest as A
    from pylog.protocol.messages import ShareFetchRequest as F

    topic = "jobs-deleted-group"
    tid_str = cluster.create_topic(topic)
    tid = topic_id_from_str(tid_str)
    leader = cluster.leader(topic)
    first = cluster.brokers[0]
    # A group whose coordinator and share coordinator are both away from the leader.
    for _ in range(60):
        group = f"g-{uuid.uuid4().hex[:6]}"
        share_coordinator = cluster.share_coordinator(f"{group}:{tid_str}:0")

        def group_coordinator(g: str = group) -> tuple[int] | None:
            r = asyncio.run(_send(first.host, first.port, FindCoordinatorRequest(key_type=0, coordinator_keys=[g]), 4))
            c = r.coordinators[0]
            return (c.node_id,) if c.error_code == 0 else None
        (coordinator,) = _wait(group_coordinator, 60, f"the coordinator of {group}")
        if leader not in (share_coordinator, coordinator):
            break
    else:
        pytest.fail("no group name put both coordinators away from the partition leader")
    cluster.set_group_config(group, "share.auto.offset.reset", "earliest", via=coordinator)
    cluster.wait_group_config(group, "share.auto.offset.reset", "earliest")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    values = [b"d%d" % i for i in range(20)]
    # Batches of 5: librdkafka's ShareFetch v1 is batch-optimized (KIP-1206), so the member
    # below (max.poll.records 5) acquires one batch, not all 20 records.
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=0)
        if i % 5 == 4:
            assert producer.flush(30) == 0

    # A member accepts the first records (so the leader holds the share partition), then leaves.
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit", "max.poll.records": 5})
    c.subscribe([topic])
    accepted: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while not accepted and time.monotonic() < deadline:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                results = c.commit_sync(10)
                assert results and all(e is None for e in results.values()), results
                accepted = [m.value() for m in msgs]
    finally:
        c.close()
    assert accepted, "the member got no records"

    def summary() -> Any:
        b = cluster.brokers[share_coordinator]
        r = asyncio.run(_send(b.host, b.port, S(group_id=group, topics=[S.ReadStateSummaryData(
            topic_id=tid, partitions=[S.PartitionData(partition=0, leader_epoch=-1)])]), 0))
        p = r.results[0].partitions[0]
        assert p.error_code == 0, p
        return p

    _wait(lambda: summary().start_offset == len(accepted), 30, "the accepted records' state at the coordinator")
    # A share session on the leader (not a group member) acquires the next records.
    lb = cluster.brokers[leader]
    fetched = asyncio.run(_send(lb.host, lb.port, F(
        group_id=group, member_id="stale-session", share_session_epoch=0, max_wait_ms=2000, min_bytes=1,
        max_bytes=1 << 20, max_records=5, batch_size=5, topics=[F.FetchTopic(topic_id=tid, partitions=[
            F.FetchPartition(partition_index=0, acknowledgement_batches=[])])], forgotten_topics_data=[]), 1))
    got = [(a.first_offset, a.last_offset) for t in fetched.responses for p in t.partitions
           for a in p.acquired_records]
    assert fetched.error_code == 0 and got, fetched
    first_acquired = got[0][0]
    assert first_acquired == len(accepted)

    # The group is empty: DeleteGroups through its coordinator deletes the state first.
    cb = cluster.brokers[coordinator]
    d = asyncio.run(_send(cb.host, cb.port, DeleteGroupsRequest(groups_names=[group]), 2))
    assert d.results[0].error_code == 0, d
    assert summary().start_offset == -1  # no state any more

    # The leader's stale share partition acknowledges: its write is refused, the client is
    # told, and nothing is written back.
    acked = asyncio.run(_send(lb.host, lb.port, A(
        group_id=group, member_id="stale-session", share_session_epoch=1, topics=[A.AcknowledgeTopic(
            topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                A.AcknowledgementBatch(first_offset=first_acquired, last_offset=first_acquired,
                                       acknowledge_types=[1])])])]), 1))
    assert acked.responses[0].partitions[0].error_code == errors.UnknownServerError.code, acked
    assert summary().start_offset == -1, "the deleted share partition's state was written back"

    # A new group of that name (its configs went with the old one) starts afresh: every
    # record, each delivered for the first time.
    cluster.set_group_config(group, "share.auto.offset.reset", "earliest", via=coordinator)
    cluster.wait_group_config(group, "share.auto.offset.reset", "earliest")
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    seen: dict[bytes, int] = {}
    try:
        deadline = time.monotonic() + 90
        while len(seen) < len(values) and time.monotonic() < deadline:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                seen.setdefault(m.value(), m.delivery_count())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                c.commit_sync(10)
    finally:
        c.close()
    assert set(seen) == set(values), sorted(set(values) - set(seen))[:5]
    assert set(seen.values()) == {1}, seen
