"""Group configs (resource type GROUP) in cluster mode: a real ZooKeeper and three ``pylog
broker`` processes. A config set through one broker is used by the share partitions another
broker leads: read at start by a broker that was down when it was set, applied from the
change notice by a running one. Refused values are INVALID_CONFIG naming the key; deleting
the group removes ``/config/groups/<group>`` and every broker's copy."""

from __future__ import annotations

import asyncio
import uuid

import confluent_kafka
import pytest
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import AdminClient, NewTopic
from test_cluster_share_groups import (
    Cluster,
    _send,
    cluster,  # noqa: F401 - the fixture
)

from pylog import errors
from pylog.protocol.messages import IncrementalAlterConfigsRequest as I

pytestmark = pytest.mark.integration

RECORDS = 20


def _read_all(bootstrap: str, group: str, topic: str) -> list[bytes]:
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        def more() -> bool:
            got.extend(m.value() for m in c.poll(0.5) if m.error() is None)
            return len(got) >= RECORDS
        _wait(more, 60, f"{group} to get the {RECORDS} records produced before it joined")
    finally:
        c.close()
    return got


def test_a_group_config_set_through_one_broker_is_used_by_another(cluster: Cluster) -> None:  # noqa: F811
    setter, leader, other = 0, 1, 2
    early, later = f"early-{uuid.uuid4().hex[:6]}", f"later-{uuid.uuid4().hex[:6]}"

    # Set while the future leader is down: it reads /config/groups when it starts.
    cluster.brokers[leader].stop()
    _wait(lambda: cluster.store.get_broker_ids() == [setter, other], 30, "the leader's registration to go")
    cluster.set_group_config(early, "share.auto.offset.reset", "earliest", via=setter)
    b = cluster.brokers[setter]
    bad = asyncio.run(_send(b.host, b.port, I(resources=[I.AlterConfigsResource(
        resource_type=32, resource_name=early, configs=[I.AlterableConfig(
            name="share.record.lock.duration.ms", config_operation=0, value="999999")])], validate_only=False)))
    res = bad.responses[0]
    assert res.error_code == errors.InvalidConfigError.code
    assert "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms" \
        in res.error_message
    assert cluster.store.get_entity_config("groups", early) == {"share.auto.offset.reset": "earliest"}
    cluster.brokers[leader].start()
    _wait(lambda: cluster.store.get_broker_ids() == [0, 1, 2], 30, "the leader back")
    assert cluster.group_config(leader, early)["share.auto.offset.reset"] == ("earliest", 8)

    topic = f"gc-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, setter, other]])])[topic].result(30)
    _wait(lambda: (s := cluster.store.get_partition_state(topic, 0)) and s[0].leader == leader
          and len(s[0].isr) == 3, 30, f"{topic} led by broker {leader} with a full ISR")
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    values = [b"r%d" % i for i in range(RECORDS)]
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0

    # Read at start: the leader starts the share partition at the earliest offset.
    assert sorted(_read_all(cluster.bootstrap, early, topic)) == sorted(values)

    # Set while every broker runs: the change notice carries it to the leader.
    cluster.set_group_config(later, "share.auto.offset.reset", "earliest", via=other)
    cluster.wait_group_config(later, "share.auto.offset.reset", "earliest")
    assert sorted(_read_all(cluster.bootstrap, later, topic)) == sorted(values)

    # Another group keeps the broker's default.
    assert cluster.group_config(leader, f"plain-{uuid.uuid4().hex[:6]}")["share.auto.offset.reset"] \
        == ("latest", 5)

    # Deleting the group removes its config everywhere.
    def deleted() -> bool:
        fut = admin.delete_consumer_groups([early], request_timeout=10)[early]
        try:
            fut.result(15)
            return True
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() == confluent_kafka.KafkaError.NON_EMPTY_GROUP:
                return False  # the member's leave is still under way
            raise
    _wait(deleted, 30, f"{early} deleted")
    assert cluster.store.get_entity_config("groups", early) == {}
    for node in range(3):
        _wait(lambda n=node: cluster.group_config(n, early)["share.auto.offset.reset"] == ("latest", 5),
              30, f"broker {node} to drop {early}'s config")
    assert cluster.store.get_entity_config("groups", later) == {"share.auto.offset.reset": "earliest"}
