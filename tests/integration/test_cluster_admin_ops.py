"""The controller's admin requests end to end: a real ZooKeeper and three ``pylog broker``
processes. ElectLeaders (preferred, through confluent-kafka's AdminClient.elect_leaders;
unclean), partition reassignment through kafka-python's KafkaAdminClient (RF 1 -> 3 copies
the data byte for byte, a removed replica's log is deleted, an ongoing one is listed and
cancelled) and a topic deletion that waits for a replica's broker to come back."""

from __future__ import annotations

import signal
import time

import confluent_kafka
import pytest
from _harness.waiting import wait_until as _wait
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP

import logcore
from pylog.cluster import zk_data as z
from pylog.cluster.zk_store import ZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000



@pytest.fixture
def cluster(zookeeper, new_broker):  # noqa: F811
    with zk_cluster(zookeeper, new_broker, SESSION_MS,
                    {"auto.leader.rebalance.enable": "false"}) as c:
        yield c


def _state(store: ZkStore, topic: str, p: int = 0):
    found = store.get_partition_state(topic, p)
    return found[0] if found else None


def _create(store: ZkStore, topic: str, replicas: tuple[int, ...]) -> None:
    store.create_topic(topic, z.TopicAssignment({0: z.ReplicaAssignment(replicas)},
                                                z.new_uuid_text()))
    _wait(lambda: (s := _state(store, topic)) and s.leader == replicas[0]
          and len(s.isr) == len(replicas), 30, f"{topic} led by {replicas[0]} with a full ISR")


def _controller(store: ZkStore) -> int:
    return _wait(store.get_controller, 30, "a controller").broker_id


def _bootstrap(brokers) -> str:
    return ",".join(b.bootstrap for b in brokers if b.proc is not None and b.proc.poll() is None)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"record-%05d" % i, key=b"k%d" % (i % 7))
    assert p.flush(30) == 0


def _log_bytes(broker, topic: str) -> bytes:
    with logcore.ReadOnlyLog(str(broker.data_dir / f"{topic}-0")) as log:
        return log.read(0, 1 << 30).read()


def test_preferred_election_through_confluent_admin(cluster):
    brokers, store = cluster
    ctl = _controller(store)
    a, b = [x for x in (0, 1, 2) if x != ctl]
    _create(store, "pref", (a, b, ctl))
    brokers[a].stop(sig=signal.SIGKILL)
    _wait(lambda: (s := _state(store, "pref")) and s.leader == b, SESSION_MS / 1000 + 30,
          "leadership to move to the next ISR member")
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    tp = TopicPartition("pref", 0)
    # The preferred replica is down: PREFERRED_LEADER_NOT_AVAILABLE.
    res = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert res[tp] is not None and res[tp].code() == \
        confluent_kafka.KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    brokers[a].start()
    _wait(lambda: (s := _state(store, "pref")) and a in s.isr, 60, "the restarted replica in the ISR")
    before = _state(store, "pref")
    res = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert res == {tp: None}
    after = _state(store, "pref")
    assert after.leader == a and after.leader_epoch == before.leader_epoch + 1
    # Every broker's metadata shows it (the controller's did before answering).
    for broker in brokers:
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("pref", timeout=10)
        _wait(lambda md=md, broker=broker: AdminClient({"bootstrap.servers": broker.bootstrap})
              .list_topics("pref", timeout=10).topics["pref"].partitions[0].leader == a,
              30, f"broker {broker.bootstrap}'s metadata")
    # Again: ELECTION_NOT_NEEDED; for all partitions (None) nothing needs one: an empty answer.
    res = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert res[tp].code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(30) == {}


def test_elect_leaders_on_a_broker_that_is_not_the_controller(cluster):
    import asyncio

    from pylog.net.connection import BrokerConnection
    from pylog.protocol.messages import ElectLeadersRequest

    brokers, store = cluster
    ctl = _controller(store)
    other = brokers[next(x for x in (0, 1, 2) if x != ctl)]

    async def ask():
        conn = BrokerConnection(other.host, other.port, node_id=-1, client_id="t",
                                request_timeout=30.0)
        await conn.connect(30.0)
        try:
            R = ElectLeadersRequest
            return await conn.send(R(election_type=0, timeout_ms=1000, topic_partitions=[
                R.TopicPartitions(topic="x", partitions=[0])]))
        finally:
            await conn.close()
    resp = asyncio.run(ask())
    assert resp.error_code == 41  # NOT_CONTROLLER: clients send it to the controller
    assert resp.replica_election_results[0].partition_result[0].error_code == 41


def test_unclean_election(cluster):
    brokers, store = cluster
    ctl = _controller(store)
    a, b = [x for x in (0, 1, 2) if x != ctl]
    _create(store, "unclean", (a, b))
    brokers[b].stop(sig=signal.SIGKILL)
    _wait(lambda: (s := _state(store, "unclean")) and s.isr == (a,), SESSION_MS / 1000 + 30,
          "b out of the ISR")
    brokers[a].stop(sig=signal.SIGKILL)
    _wait(lambda: (s := _state(store, "unclean")) and s.leader == -1, SESSION_MS / 1000 + 30,
          "the partition offline")
    brokers[b].start()
    _wait(lambda: b in store.get_broker_ids(), 30, "b registered again")
    time.sleep(1.0)
    assert _state(store, "unclean").leader == -1  # unclean.leader.election.enable is off
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    tp = TopicPartition("unclean", 0)
    # A preferred election cannot help (a is down).
    res = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert res[tp].code() == confluent_kafka.KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    res = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(30)
    assert res == {tp: None}
    st = _state(store, "unclean")
    assert st.leader == b and st.isr == (b,) and st.leader_recovery_state == 1
    res = admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(30)
    assert res[tp].code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED
    # kafka-python's elect_leaders (to the controller; ELECTION_NOT_NEEDED is not an error).
    kp = KafkaAdminClient(bootstrap_servers=_bootstrap(brokers), request_timeout_ms=30000)
    try:
        resp = kp.elect_leaders(1, {"unclean": [0]})
        (result,) = resp.replica_election_results
        assert result.partition_result[0].error_code == 84
    finally:
        kp.close()
    _produce(_bootstrap(brokers), "unclean", 10)  # the new leader takes writes


def test_reassignment_grows_moves_and_shrinks(cluster):
    brokers, store = cluster
    ctl = _controller(store)
    x = next(b for b in (0, 1, 2) if b != ctl)
    y, w = [b for b in (0, 1, 2) if b != x]
    _create(store, "moving", (x,))
    _produce(_bootstrap(brokers), "moving", 500)
    admin = KafkaAdminClient(bootstrap_servers=_bootstrap(brokers), request_timeout_ms=30000)
    try:
        tp = KTP("moving", 0)
        assert admin.alter_partition_reassignments({tp: [x, y, w]}) == {tp: None}
        done = _wait(lambda: (a := store.get_topic_assignment("moving")[0].partitions[0])
                     and not a.adding_replicas and a.replicas == (x, y, w) and a, 60,
                     "the reassignment to complete")
        assert done.removing_replicas == ()
        st = _state(store, "moving")
        assert st.leader == x and sorted(st.isr) == sorted((x, y, w))
        assert admin.list_partition_reassignments() == {}
        admin.close()  # before the restarts (kafka-python leaks sockets that fail to connect)
        # The new replicas hold the leader's log byte for byte (read with the brokers stopped).
        for b in brokers:
            b.stop(sig=signal.SIGTERM)
        datas = [_log_bytes(b, "moving") for b in brokers]
        assert len(datas[x]) > 500 * 10 and datas[0] == datas[1] == datas[2]
        for b in brokers:
            b.start()
        _wait(lambda: store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
        _wait(lambda: (s := _state(store, "moving")) and len(s.isr) == 3 and s.leader >= 0, 60,
              "a full ISR after the restart")
        ctl = _controller(store)
        admin = KafkaAdminClient(bootstrap_servers=_bootstrap(brokers), request_timeout_ms=30000)
        # Remove x (the leader): a target replica leads, x's log is deleted.
        assert admin.alter_partition_reassignments({tp: [w, y]}) == {tp: None}
        _wait(lambda: store.get_topic_assignment("moving")[0].partitions[0]
              == z.ReplicaAssignment((w, y)), 60, "the replica to be removed")
        st = _state(store, "moving")
        assert st.leader in (w, y) and x not in st.isr
        _wait(lambda: not (brokers[x].data_dir / "moving-0").exists(), 30,
              "the removed replica's log to be deleted")
        # Bad requests: a dead broker, a duplicate, an unknown partition, nothing to cancel.
        res = admin.alter_partition_reassignments({tp: [w, 7], KTP("moving", 3): [w],
                                                   KTP("moving", 1): [w, w]})
        assert res[tp].errno == 39 and res[KTP("moving", 1)].errno == 39
        assert res[KTP("moving", 3)].errno == 3
        assert admin.alter_partition_reassignments({tp: None})[tp].errno == 85
        # An ongoing reassignment is listed and can be cancelled: the new replica's broker is
        # stopped (SIGSTOP: still registered for a few seconds) so it cannot catch up.
        brokers[x].proc.send_signal(signal.SIGSTOP)
        try:
            assert admin.alter_partition_reassignments({tp: [w, y, x]}) == {tp: None}
            listed = admin.list_partition_reassignments()
            assert set(listed) == {tp}
            entry = listed[tp]
            assert list(entry["replicas"] if isinstance(entry, dict) else entry.replicas) \
                == [w, y, x]
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        finally:
            brokers[x].proc.send_signal(signal.SIGCONT)
        assert store.get_topic_assignment("moving")[0].partitions[0] == z.ReplicaAssignment((w, y))
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    assert ctl in (0, 1, 2)


def test_deletion_waits_for_a_down_replica(cluster):
    brokers, store = cluster
    ctl = _controller(store)
    a, b = [x for x in (0, 1, 2) if x != ctl]
    _create(store, "doomed", (a, b))
    _produce(_bootstrap(brokers), "doomed", 50)
    _wait(lambda: (brokers[b].data_dir / "doomed-0").exists(), 30, "b's replica")
    brokers[b].stop(sig=signal.SIGKILL)
    _wait(lambda: b not in store.get_broker_ids(), SESSION_MS / 1000 + 30, "b's session to end")
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    admin.delete_topics(["doomed"])["doomed"].result(30)
    # a deleted its replica, but the deletion waits for b: the znodes stay.
    _wait(lambda: not (brokers[a].data_dir / "doomed-0").exists(), 30, "a's log deleted")
    time.sleep(2.0)
    assert "doomed" in store.get_topics() and "doomed" in store.get_topic_deletions()
    assert "doomed" not in admin.list_topics(timeout=10).topics
    brokers[b].start()
    _wait(lambda: "doomed" not in store.get_topics(), 60, "the deletion to complete")
    assert store.get_topic_deletions() == []
    _wait(lambda: not (brokers[b].data_dir / "doomed-0").exists(), 30, "b's stale log deleted")
    md = AdminClient({"bootstrap.servers": brokers[b].bootstrap}).list_topics(timeout=10)
    assert "doomed" not in md.topics


def test_pylog_admin_client_calls_the_controller(cluster):
    from pylog.client import Admin
    from pylog.errors import ElectionNotNeededError, InvalidReplicaAssignmentError

    brokers, store = cluster
    ctl = _controller(store)
    a, b = [x for x in (0, 1, 2) if x != ctl]
    _create(store, "viapylog", (a,))
    # Bootstrap through a broker that is not the controller: the client finds it.
    with Admin({"bootstrap.servers": brokers[b].bootstrap}) as admin:
        assert admin.list_partition_reassignments() == {}
        res = admin.alter_partition_reassignments({("viapylog", 0): [a, b], ("viapylog", 4): []})
        assert res[("viapylog", 0)] is None
        assert isinstance(res[("viapylog", 4)], InvalidReplicaAssignmentError)
        _wait(lambda: store.get_topic_assignment("viapylog")[0].partitions[0]
              == z.ReplicaAssignment((a, b)), 60, "the reassignment to complete")
        res = admin.elect_leaders("preferred", [("viapylog", 0)])
        assert isinstance(res[("viapylog", 0)], ElectionNotNeededError)
        assert admin.elect_leaders("preferred") == {}
        with pytest.raises(ValueError, match="preferred"):
            admin.elect_leaders("sideways")


def test_cli_elect_leaders_and_reassign(cluster):
    import subprocess
    import sys

    brokers, store = cluster
    ctl = _controller(store)
    a, b = [x for x in (0, 1, 2) if x != ctl]
    _create(store, "bycli", (a,))

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pylog", "cluster", *argv,
                               "-b", brokers[ctl].bootstrap], capture_output=True, text=True,
                              timeout=60)
    out = cli("reassign", "--move", f"bycli:0={b},{a}")
    assert out.returncode == 0 and f"bycli:0  moving to replicas {b},{a}" in out.stdout
    _wait(lambda: store.get_topic_assignment("bycli")[0].partitions[0]
          == z.ReplicaAssignment((b, a)), 60, "the move to complete")
    assert "no partition is being reassigned" in cli("reassignments").stdout
    # b is now the preferred replica but a still leads: a preferred election moves it.
    assert _state(store, "bycli").leader == a
    out = cli("elect-leaders", "--partition", "bycli:0")
    assert out.returncode == 0 and "bycli:0  elected (preferred)" in out.stdout, out
    assert _state(store, "bycli").leader == b
    out = cli("elect-leaders", "--partition", "bycli:0", "--partition", "nope:0")
    assert out.returncode == 1 and "not needed" in out.stdout and "UNKNOWN_TOPIC" in out.stdout


def test_reassignment_survives_a_controller_failover(cluster):
    brokers, store = cluster
    ctl = _controller(store)
    x, y = [b for b in (0, 1, 2) if b != ctl]
    _create(store, "failover", (x,))
    _produce(_bootstrap(brokers), "failover", 200)
    # y cannot catch up while stopped: the move stays in phase A ...
    brokers[y].proc.send_signal(signal.SIGSTOP)
    try:
        from pylog.client import Admin

        with Admin({"bootstrap.servers": brokers[ctl].bootstrap}) as pa:
            assert pa.alter_partition_reassignments({("failover", 0): [x, y]}) == {
                ("failover", 0): None}
        assert store.get_topic_assignment("failover")[0].partitions[0] == \
            z.ReplicaAssignment((x, y), (y,), ())
        # ... when the controller dies; x takes over and resumes it from the znodes.
        brokers[ctl].stop(sig=signal.SIGKILL)
        _wait(lambda: (c := store.get_controller()) and c.broker_id == x,
              SESSION_MS / 1000 + 30, "x to become the controller")
    finally:
        brokers[y].proc.send_signal(signal.SIGCONT)
    done = _wait(lambda: (a := store.get_topic_assignment("failover")[0].partitions[0])
                 and not a.adding_replicas and a, SESSION_MS / 1000 + 60,
                 "the new controller to complete the move")
    assert done == z.ReplicaAssignment((x, y))
    st = _state(store, "failover")
    assert st.leader == x and sorted(st.isr) == sorted((x, y))
    for i in (x, y):
        brokers[i].stop(sig=signal.SIGTERM)
    assert _log_bytes(brokers[x], "failover") == _log_bytes(brokers[y], "failover")


def test_moving_one_partition_away_empties_it_where_the_topic_stays(cluster):
    brokers, store = cluster
    ctl = _controller(store)
    x, y = [b for b in (0, 1, 2) if b != ctl]
    store.create_topic("split", z.TopicAssignment(
        {0: z.ReplicaAssignment((x, y)), 1: z.ReplicaAssignment((x, y))}, z.new_uuid_text()))
    _wait(lambda: all((s := _state(store, "split", p)) and len(s.isr) == 2 for p in (0, 1)),
          30, "both partitions with a full ISR")
    _produce(_bootstrap(brokers), "split", 200)

    def live_bytes(broker, p: int) -> int:
        d = broker.data_dir / f"split-{p}"
        return sum(f.stat().st_size for f in d.glob("*.log"))
    _wait(lambda: live_bytes(brokers[y], 1) > 0 and live_bytes(brokers[y], 0) > 0, 30,
          "y to hold both partitions")
    from pylog.client import Admin

    with Admin({"bootstrap.servers": _bootstrap(brokers)}) as admin:
        assert admin.alter_partition_reassignments({("split", 1): [x, ctl]}) == {("split", 1): None}
    _wait(lambda: store.get_topic_assignment("split")[0].partitions[1]
          == z.ReplicaAssignment((x, ctl)), 60, "the move of partition 1")
    # y keeps partition 0 (still a replica) and empties partition 1.
    _wait(lambda: live_bytes(brokers[y], 1) == 0, 30, "y's copy of partition 1 emptied")
    assert live_bytes(brokers[y], 0) > 0
    assert sorted(_state(store, "split", 0).isr) == sorted((x, y))
