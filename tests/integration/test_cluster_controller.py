"""Cluster mode end to end: a real ZooKeeper and three ``pylog broker`` processes with
``zookeeper.connect``: registration, controller election, topic creation with replication
factor 3 seen in every broker's Metadata, leader failover on SIGKILL, controller failover."""

from __future__ import annotations

import signal

import pytest
from _harness.waiting import wait_until as _wait
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import AdminClient

from pylog.cluster import zk_data as z
from pylog.cluster.assignment import BrokerMetadata, assign_replicas_to_brokers
from pylog.cluster.zk_store import ZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000



def _metadata(bootstrap: str, topic: str | None):
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    md = admin.list_topics(topic=topic, timeout=10)
    return md


@pytest.fixture
def cluster(request, zookeeper, new_broker):  # noqa: F811
    # Each test gets a fresh tree: all three registered.
    with zk_cluster(zookeeper, new_broker, SESSION_MS, getattr(request, "param", {})) as c:
        yield c


def _create(store: ZkStore, topic: str, partitions: int, rf: int) -> None:
    plan = assign_replicas_to_brokers([BrokerMetadata(b) for b in store.get_broker_ids()],
                                      partitions, rf)
    store.create_topic(topic, z.TopicAssignment(
        {p: z.ReplicaAssignment(tuple(r)) for p, r in plan.items()}, z.new_uuid_text()))


def _leaders_everywhere(brokers, topic: str, n: int, want_isr: int):
    seen = []
    for b in brokers:
        md = _metadata(b.bootstrap, topic)
        t = md.topics.get(topic)
        if t is None or t.error is not None or len(t.partitions) != n:
            return None
        if any(p.leader < 0 or len(p.isrs) != want_isr or len(p.replicas) != 3
               for p in t.partitions.values()):
            return None
        if len(md.brokers) != len(brokers):
            return None
        seen.append({p.id: p.leader for p in t.partitions.values()})
    return seen if all(s == seen[0] for s in seen) else None


def test_election_topic_and_failovers(cluster):
    brokers, store = cluster
    ctl = _wait(store.get_controller, 30, "a controller")
    epoch, _ = store.get_controller_epoch()
    assert ctl.broker_id in (0, 1, 2) and epoch >= 1

    _create(store, "replicated", 3, 3)
    states = _wait(lambda: [store.get_partition_state("replicated", p) for p in range(3)]
                   if all(store.get_partition_state("replicated", p) for p in range(3)) else None,
                   30, "partition states")
    for (state, version), p in zip(states, range(3), strict=True):
        assignment = store.get_topic_assignment("replicated")[0].partitions[p].replicas
        assert state.leader == assignment[0] and sorted(state.isr) == [0, 1, 2]
        assert state.leader_epoch == 0 and version == 0 and state.controller_epoch == epoch
    leaders = _wait(lambda: _leaders_everywhere(brokers, "replicated", 3, 3), 30,
                    "every broker's Metadata to show the leaders")[0]

    # SIGKILL a broker that is not the controller: its leaderships move within the ISR.
    victim = next(b for b in (0, 1, 2) if b != ctl.broker_id)
    brokers[victim].stop(sig=signal.SIGKILL)
    survivors = [brokers[i] for i in (0, 1, 2) if i != victim]

    def moved():
        out = {}
        for p in range(3):
            st, _v = store.get_partition_state("replicated", p)
            if victim in st.isr or st.leader == victim:
                return None
            out[p] = st
        return out
    after = _wait(moved, SESSION_MS / 1000 + 30, "the dead broker's partitions to move")
    for p, st in after.items():
        assert st.leader != victim and st.leader >= 0
        assert st.leader_epoch == (1 if leaders[p] == victim else 1)  # one change each
        assert sorted(st.isr) == sorted(set((0, 1, 2)) - {victim})

    def survivors_agree():
        for b in survivors:
            t = _metadata(b.bootstrap, "replicated").topics["replicated"]
            for p, part in t.partitions.items():
                if part.leader != after[p].leader or victim in part.isrs:
                    return False
        return True
    _wait(survivors_agree, 30, "survivors' Metadata to show the new leaders")

    # SIGKILL the controller: the last broker takes over with epoch + 1.
    brokers[ctl.broker_id].stop(sig=signal.SIGKILL)
    last = next(i for i in (0, 1, 2) if i not in (victim, ctl.broker_id))
    new_ctl = _wait(lambda: (c := store.get_controller()) and c.broker_id == last and c,
                    SESSION_MS / 1000 + 30, "the controller to move")
    assert new_ctl.broker_id == last
    assert store.get_controller_epoch()[0] == epoch + 1

    def only_last_leads():
        for p in range(3):
            st, _v = store.get_partition_state("replicated", p)
            if st.leader != last:
                return False
        return True
    _wait(only_last_leads, 30, "every partition led by the last broker")
    md = _metadata(brokers[last].bootstrap, "replicated")
    assert md.controller_id == last
    assert {p.leader for p in md.topics["replicated"].partitions.values()} == {last}


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def test_create_topics_and_delete_topics_through_any_broker(cluster):
    from confluent_kafka.admin import NewTopic

    brokers, store = cluster
    _wait(store.get_controller, 30, "a controller")
    admin = _admin(brokers[1].bootstrap)
    fs = admin.create_topics([NewTopic("made", 4, 3, config={"cleanup.policy": "compact"})],
                             operation_timeout=30)
    fs["made"].result(60)
    # CreateTopics answers once this broker's metadata shows every partition led; the others
    # follow from the same UpdateMetadata round.
    _wait(lambda: _leaders_everywhere(brokers, "made", 4, 3), 30, "leaders everywhere")
    assignment = store.get_topic_assignment("made")[0]
    leaders = [assignment.partitions[p].replicas[0] for p in range(4)]
    assert len(set(leaders)) == 3  # round robin over the brokers
    assert store.get_entity_config("topics", "made") == {"cleanup.policy": "compact"}
    # Already exists (from another broker), and a replication factor over the broker count.
    other = _admin(brokers[2].bootstrap)
    fs = other.create_topics([NewTopic("made", 1, 1), NewTopic("toomany", 1, 4)])
    with pytest.raises(Exception, match="already exists"):
        fs["made"].result(30)
    with pytest.raises(Exception, match="larger than available brokers"):
        fs["toomany"].result(30)

    # CreatePartitions through yet another broker: 4 -> 6, the new ones started by the controller.
    from confluent_kafka.admin import NewPartitions

    other.create_partitions([NewPartitions("made", 6)], operation_timeout=30)["made"].result(60)
    _wait(lambda: _leaders_everywhere(brokers, "made", 6, 3), 30, "6 partitions everywhere")
    grown = store.get_topic_assignment("made")[0]
    assert sorted(grown.partitions) == list(range(6)) and grown.topic_id == assignment.topic_id
    assert store.get_partition_state("made", 5)[0].leader == grown.partitions[5].replicas[0]
    with pytest.raises(Exception, match="already has 6 partitions"):
        other.create_partitions([NewPartitions("made", 6)])["made"].result(30)

    third = _admin(brokers[0].bootstrap)
    fs = third.delete_topics(["made"], operation_timeout=30)
    fs["made"].result(60)
    # The brokers forget the topic first (UpdateMetadata), then the controller removes its
    # znodes, config and the deletion request, as Kafka's TopicDeletionManager does.
    _wait(lambda: store.get_topic_assignment("made") is None and not store.get_topic_deletions()
          and not store.get_entity_config("topics", "made"), 30, "the znodes to go")
    for b in brokers:
        assert "made" not in _metadata(b.bootstrap, None).topics


@pytest.mark.parametrize("cluster", [{"controlled.shutdown.enable": "true",
                                      "controlled.shutdown.retry.backoff.ms": "200"}],
                         indirect=True)
def test_controlled_shutdown_moves_leadership_before_exit(cluster):
    brokers, store = cluster
    ctl = _wait(store.get_controller, 30, "a controller")
    _create(store, "moving", 3, 3)
    _wait(lambda: _leaders_everywhere(brokers, "moving", 3, 3), 30, "leaders everywhere")
    victim = next(b for b in (0, 1, 2) if b != ctl.broker_id)
    before = {p: store.get_partition_state("moving", p)[0] for p in range(3)}
    assert any(s.leader == victim for s in before.values())
    assert brokers[victim].stop() == 0
    assert "controlled shutdown succeeded" in brokers[victim].read_log()
    for p in range(3):
        st = store.get_partition_state("moving", p)[0]
        assert st.leader != victim and victim not in st.isr
        assert st.leader_epoch == before[p].leader_epoch + 1


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_leader_election(cluster, unclean):
    brokers, store = cluster
    _wait(store.get_controller, 30, "a controller")
    ctl = store.get_controller().broker_id
    a, b = [i for i in (0, 1, 2) if i != ctl]
    store.create_topic("solo", z.TopicAssignment({0: z.ReplicaAssignment((a, b))},
                                                 z.new_uuid_text()),
                       {"unclean.leader.election.enable": str(unclean).lower()})
    _wait(lambda: store.get_partition_state("solo", 0), 30, "the state")
    # b falls out of the ISR (as a lagging follower would), then the leader a dies.
    st, version = store.get_partition_state("solo", 0)
    store.update_partition_state("solo", 0, z.PartitionState(a, st.leader_epoch, (a,),
                                                             st.controller_epoch), version)
    brokers[a].stop(sig=signal.SIGKILL)

    def settled():
        s = store.get_partition_state("solo", 0)[0]
        return s if s.leader != a else None
    st = _wait(settled, SESSION_MS / 1000 + 30, "the controller to react")
    if unclean:
        assert st.leader == b and st.isr == (b,)
        assert st.leader_recovery_state == z.LEADER_RECOVERY_RECOVERING
    else:
        assert st.leader == -1 and st.isr == (a,)  # offline; a keeps its ISR seat


@pytest.mark.parametrize("cluster", [{"offsets.topic.num.partitions": "3",
                                      "offsets.topic.replication.factor": "3"}], indirect=True)
def test_describe_cluster_and_find_coordinator(cluster):
    import asyncio

    from pylog.group.config import partition_for
    from pylog.net.connection import BrokerConnection
    from pylog.protocol.messages import FindCoordinatorRequest

    brokers, store = cluster
    ctl = _wait(store.get_controller, 30, "a controller").broker_id
    admin = _admin(brokers[2].bootstrap)

    def described():
        d = admin.describe_cluster(request_timeout=10).result(20)
        return d if len(d.nodes) == 3 else None
    d = _wait(described, 30, "DescribeCluster to list 3 brokers")
    assert d.controller.id == ctl
    assert sorted((n.id, n.port) for n in d.nodes) == sorted((i, b.port) for i, b in enumerate(brokers))
    assert d.cluster_id == store.get_cluster_id()

    async def find(b) -> tuple[int, int]:
        conn = BrokerConnection(b.host, b.port, node_id=-1, client_id="t", request_timeout=10)
        await conn.connect(10)
        try:
            resp = await conn.send(FindCoordinatorRequest(key="grp", key_type=0), 3)
        finally:
            await conn.close()
        return resp.error_code, resp.node_id

    first = asyncio.run(find(brokers[0]))
    assert first == (15, -1)  # COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created
    assignment = _wait(lambda: store.get_topic_assignment("__consumer_offsets"), 30, "the topic")[0]
    assert len(assignment.partitions) == 3
    assert all(len(a.replicas) == 3 for a in assignment.partitions.values())
    p = partition_for("grp", 3)

    def answered():
        got = [asyncio.run(find(b)) for b in brokers]
        return got if all(code == 0 for code, _ in got) else None
    got = _wait(answered, 30, "FindCoordinator to answer on every broker")
    leader = store.get_partition_state("__consumer_offsets", p)[0].leader
    assert got == [(0, leader)] * 3


def test_session_expiry_then_registers_again(cluster):
    brokers, store = cluster
    ctl = _wait(store.get_controller, 30, "a controller").broker_id
    victim = next(b for b in (0, 1, 2) if b != ctl)
    _reg, epoch_before = store.get_broker(victim)
    proc = brokers[victim].proc
    proc.send_signal(signal.SIGSTOP)  # silent past the session timeout: ZooKeeper expires it
    try:
        _wait(lambda: victim not in store.get_broker_ids(), SESSION_MS / 1000 + 30,
              "the paused broker's registration to vanish")
    finally:
        proc.send_signal(signal.SIGCONT)
    found = _wait(lambda: store.get_broker(victim), 60, "the broker to register again")
    assert found[1] > epoch_before  # a new session, a new broker epoch
    log = brokers[victim].read_log()
    assert "ZooKeeper session expired: registering again" in log
    # The controller saw it leave and come back, and it serves Metadata again.
    _wait(lambda: len(_metadata(brokers[victim].bootstrap, None).brokers) == 3, 30,
          "the broker's metadata to list 3 brokers")


@pytest.mark.parametrize("cluster", [{"num.partitions": "2", "default.replication.factor": "3"}],
                         indirect=True)
def test_metadata_auto_creates_through_zookeeper(cluster):
    brokers, store = cluster
    _wait(store.get_controller, 30, "a controller")
    md = _metadata(brokers[0].bootstrap, "auto-made")  # librdkafka asks with auto-creation on
    assert "auto-made" in md.topics
    _wait(lambda: _leaders_everywhere(brokers, "auto-made", 2, 3), 30, "the topic everywhere")
    assert all(len(a.replicas) == 3
               for a in store.get_topic_assignment("auto-made")[0].partitions.values())


@pytest.mark.parametrize("cluster", [{"leader.imbalance.check.interval.seconds": "1"}],
                         indirect=True)
def test_restarted_broker_rejoins_and_gets_its_preferred_leadership_back(cluster):
    brokers, store = cluster
    ctl = _wait(store.get_controller, 30, "a controller").broker_id
    victim = next(b for b in (0, 1, 2) if b != ctl)
    others = [b for b in (0, 1, 2) if b != victim]
    # One partition whose preferred leader is the victim.
    store.create_topic("pref", z.TopicAssignment(
        {0: z.ReplicaAssignment((victim, *others))}, z.new_uuid_text()))
    _wait(lambda: (s := store.get_partition_state("pref", 0)) and s[0].leader == victim,
          30, "the victim to lead")
    brokers[victim].stop(sig=signal.SIGKILL)
    moved = _wait(lambda: (s := store.get_partition_state("pref", 0)) and s[0].leader != victim
                  and s, SESSION_MS / 1000 + 30, "leadership to move")
    assert moved[0].leader == others[0] and victim not in moved[0].isr
    brokers[victim].start()
    _wait(lambda: victim in store.get_broker_ids(), 30, "the victim to register again")
    # The leader's replica manager adds the caught-up follower back to the ISR (a conditional
    # write of the state znode and an isr_change notice).
    _wait(lambda: (s := store.get_partition_state("pref", 0)) and victim in s[0].isr, 60,
          "the leader to add the restarted replica back to the ISR")
    # The controller relays the ISR (UpdateMetadata), then the rebalance check (every second)
    # elects the preferred replica again, one epoch later.
    back = _wait(lambda: (s := store.get_partition_state("pref", 0)) and s[0].leader == victim
                 and s, 30, "the preferred replica to lead again")
    assert back[0].leader_epoch == moved[0].leader_epoch + 1
    assert store.get_isr_change_notifications() == []

    def relayed():
        t = _metadata(brokers[victim].bootstrap, "pref").topics.get("pref")
        return t is not None and t.partitions[0].leader == victim and len(t.partitions[0].isrs) == 3
    _wait(relayed, 30, "the restarted broker's metadata")
