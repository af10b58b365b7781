"""Cluster mode: topic configs through ZooKeeper and the cluster-id check, with a real
ZooKeeper and ``pylog broker`` processes.

- IncrementalAlterConfigs / AlterConfigs on one broker write ``/config/topics/<t>`` and a
  ``/config/changes/config_change_<seq>`` notice; every broker applies the config to its
  local log (its ``pylog-topics.json``), DescribeConfigs answers alike on every broker, and
  a min.insync.replicas change reaches the leader (acks=all refused, then accepted); a
  broker that was down takes the change at its restart.
- A log dir whose ``meta.properties`` names another cluster refuses to start with Kafka's
  InconsistentClusterIdException message; a fresh log dir takes ZooKeeper's id.
"""

from __future__ import annotations

import json
import signal
import warnings

import pytest
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from pylog.cluster import zk_data as z
from pylog.cluster.zk_store import ZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000



_ADMINS: list[AdminClient] = []


def _admin(b) -> AdminClient:
    # A new client each time: librdkafka sends AlterConfigs to the controller it learnt, and
    # keeps waiting for one that was killed. Kept: a destroyed client fails its futures.
    _ADMINS.append(AdminClient({"bootstrap.servers": b.bootstrap,
                                "broker.address.family": "v4"}))
    return _ADMINS[-1]


@pytest.fixture(autouse=True)
def _destroy_admins():
    """The test's admin clients are destroyed when it ends: kept in the module's list, they
    went on reconnecting to its stopped brokers for the rest of the xdist worker."""
    yield
    _ADMINS.clear()


def _local_configs(b, topic: str) -> dict | None:
    doc = json.loads((b.data_dir / "pylog-topics.json").read_text())
    spec = doc["topics"].get(topic)
    return None if spec is None else spec["configs"]


def _clean(zk) -> None:
    cleaner = ZkStore(zk.connect_string)
    cleaner.start()
    for path in ("/brokers", "/controller", "/controller_epoch", "/admin", "/config",
                 "/isr_change_notification", "/cluster"):
        cleaner.delete_all(path)
    cleaner.close()


@pytest.fixture
def store(zookeeper):  # noqa: F811
    s = ZkStore(zookeeper.connect_string, session_timeout_ms=SESSION_MS)
    s.start()
    yield s
    s.close()
    _clean(zookeeper)


def _start_cluster(zookeeper, new_broker, store, **extra):  # noqa: F811
    brokers = []
    for i in range(3):
        b = new_broker({"zookeeper.connect": zookeeper.connect_string, "broker.id": str(i),
                        "zookeeper.session.timeout.ms": str(SESSION_MS),
                        "controlled.shutdown.enable": "false",
                        "replica.lag.time.max.ms": "3000", **extra})
        brokers.append(b.start())
    _wait(lambda: store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
    return brokers


def _legacy_alter(b, resource) -> None:
    """AlterConfigs (key 33), which confluent-kafka deprecates for the incremental API."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = _admin(b).alter_configs([resource])
    futures[resource].result(30)


def _describe(b, topic: str) -> dict:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return _admin(b).describe_configs([res])[res].result(30)


def test_topic_configs_reach_every_broker(zookeeper, store, new_broker):  # noqa: F811
    brokers = _start_cluster(zookeeper, new_broker, store)
    topic = "cfg-topic"
    _admin(brokers[0]).create_topics(
        [NewTopic(topic, 1, 3, config={"retention.ms": "3600000"})])[topic].result(60)
    _wait(lambda: all(_local_configs(b, topic) == {"retention.ms": "3600000"} for b in brokers),
          30, "the topic on every broker with its creation config")

    # Incremental change on broker 1: ZooKeeper holds the whole config and a notice.
    before = {n for _s, n, _e, _c in store.get_config_changes()}
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)])
    _admin(brokers[1]).incremental_alter_configs([res])[res].result(30)
    want = {"retention.ms": "7200000", "cleanup.policy": "delete,compact",
            "min.insync.replicas": "3"}
    assert store.get_entity_config("topics", topic) == want
    notices = [(n, e) for _s, n, e, _c in store.get_config_changes() if n not in before]
    assert notices == [(notices[0][0], f"topics/{topic}")]
    raw, _ = store.client.get(f"{z.CONFIG_CHANGES_PATH}/{notices[0][0]}")
    assert json.loads(raw) == {"version": 2, "entity_path": f"topics/{topic}"}
    _wait(lambda: all(_local_configs(b, topic) == want for b in brokers), 30,
          "every broker's local log to take the change")

    # DescribeConfigs answers from ZooKeeper on every broker, with Kafka's sources.
    for b in brokers:
        entries = _describe(b, topic)
        assert entries["retention.ms"].value == "7200000"
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert entries["cleanup.policy"].value == "delete,compact"
        assert entries["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    # min.insync.replicas=3 reaches the leader: with a follower dead, acks=all is refused.
    leader = store.get_partition_state(topic, 0)[0].leader
    victim = next(i for i in (0, 1, 2) if i != leader)
    other = next(i for i in (0, 1, 2) if i not in (leader, victim))
    brokers[victim].stop(sig=signal.SIGKILL)
    _wait(lambda: victim not in store.get_partition_state(topic, 0)[0].isr, 60,
          "the dead follower to leave the ISR")

    def produce() -> str | None:
        p = Producer({"bootstrap.servers": brokers[leader].bootstrap, "acks": "all",
                      "broker.address.family": "v4", "message.timeout.ms": 8000,
                      "retries": 0})
        errs: list = []
        p.produce(topic, b"v", key=b"k", on_delivery=lambda e, m: errs.append(e))
        p.flush(20)
        assert len(errs) == 1
        return None if errs[0] is None else errs[0].name()
    # ZooKeeper shows the shrink a moment before the leader's event loop applies it: a
    # produce in that window is taken with the old ISR of 3, and its high watermark cannot
    # move while the ISR is below min.insync.replicas (KAFKA-15583), so it times out, as on
    # Kafka. It is never acknowledged; the next one is refused before the append.
    outcomes = []
    _wait(lambda: outcomes.append(produce()) or outcomes[-1] == "NOT_ENOUGH_REPLICAS", 60,
          "acks=all to be refused with NOT_ENOUGH_REPLICAS")
    assert set(outcomes) <= {"NOT_ENOUGH_REPLICAS", "_MSG_TIMED_OUT"}, outcomes

    # AlterConfigs (whole set) on a broker that is not the leader lowers it again. librdkafka
    # sends it to the controller: wait until a live one is known (the victim may have been it).
    def new_controller() -> bool:
        ctl = store.get_controller()
        if ctl is None or ctl.broker_id == victim:
            return False
        return _admin(brokers[other]).list_topics(timeout=10).controller_id == ctl.broker_id
    _wait(new_controller, SESSION_MS / 1000 + 30, "a live controller in the metadata")
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={
        "cleanup.policy": "compact", "min.insync.replicas": "2"})
    _legacy_alter(brokers[other], res)
    want = {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    _wait(lambda: produce() is None, 30, "acks=all to succeed under min.insync.replicas=2")
    assert _local_configs(brokers[leader], topic) == want

    # The broker that was down takes the change when it starts again.
    assert _local_configs(brokers[victim], topic) != want
    brokers[victim].start()
    _wait(lambda: _local_configs(brokers[victim], topic) == want, 30,
          "the restarted broker to apply ZooKeeper's config")

    # Validation is unchanged: a bad value is INVALID_CONFIG and nothing is written.
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "-5"})
    with pytest.raises(KafkaException) as info:
        _legacy_alter(brokers[2], bad)
    assert info.value.args[0].name() == "INVALID_CONFIG"
    missing = ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic",
                             set_config={"retention.ms": "1000"})
    with pytest.raises(KafkaException) as info:
        _legacy_alter(brokers[2], missing)
    assert info.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
    assert store.get_entity_config("topics", topic) == want


def test_producer_ids_are_unique_across_brokers(zookeeper, store, new_broker):  # noqa: F811
    from _harness.wire import BrokerConnection

    from pylog.protocol.messages import InitProducerIdRequest

    brokers = _start_cluster(zookeeper, new_broker, store)
    ids = []
    for b in brokers * 2:
        conn = BrokerConnection(b.host, b.port, timeout=10)
        try:
            resp = conn.request(InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1))
        finally:
            conn.close()
        assert resp.error_code == 0
        ids.append(resp.producer_id)
    assert len(set(ids)) == 6, ids  # per-broker counters would repeat 0, 1, ...
    raw, _ = store.client.get(z.PRODUCER_ID_BLOCK_PATH)
    block = json.loads(raw)
    assert block["block_start"] == "2000" and max(ids) <= int(block["block_end"])


def test_cluster_id_check(zookeeper, store, new_broker):  # noqa: F811
    overrides = {"zookeeper.connect": zookeeper.connect_string, "broker.id": "5",
                 "zookeeper.session.timeout.ms": str(SESSION_MS),
                 "controlled.shutdown.enable": "false"}
    first = new_broker(overrides).start()
    cluster_id = _wait(store.get_cluster_id, 30, "/cluster/id")
    meta = (first.data_dir / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}\n" in meta and "node.id=5\n" in meta
    assert first.stop() == 0

    # The same log dir joins again; a log dir of another cluster is refused.
    assert first.start().stop() == 0
    wrong = new_broker(dict(overrides, **{"broker.id": "6"}))
    (wrong.data_dir / "meta.properties").write_text(
        "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=6\n")
    with pytest.raises(RuntimeError, match="broker did not start") as info:
        wrong.start(timeout=60)
    text = str(info.value)
    assert (f"InconsistentClusterIdException: The Cluster ID {cluster_id} doesn't match stored "
            "clusterId Some(AAAAAAAAAAAAAAAAAAAAAA) in meta.properties "
            f"({wrong.data_dir / 'meta.properties'}). The broker is trying to join the wrong "
            "cluster. Configured zookeeper.connect may be wrong.") in text
    assert 6 not in store.get_broker_ids()
