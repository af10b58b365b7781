"""Real admin clients against the broker: confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient (topics, configs, partitions, DeleteRecords, cluster), and a consumer that
falls off the log and resets (OFFSET_OUT_OF_RANGE)."""

from __future__ import annotations

import time

import pytest


def test_confluent_admin_client(broker, topic_name) -> None:
    from confluent_kafka import KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futs = admin.create_topics([NewTopic(topic_name, 2, 1, config={"retention.ms": "7200000"})])
    futs[topic_name].result(10)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic(topic_name + "-rf", 1, 3)])[topic_name + "-rf"].result(10)
    md = admin.list_topics(topic_name, timeout=10)
    assert len(md.topics[topic_name].partitions) == 2
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "7200000" and not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default
    change = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(10)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "60000"
    broker_res = ConfigResource(ConfigResource.Type.BROKER, "0")
    bconf = admin.describe_configs([broker_res])[broker_res].result(10)
    assert bconf["num.partitions"].value == "1" and bconf["message.max.bytes"].value == "1048588"
    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(10)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 4
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(topic_name, b"%d" % i, partition=3)
    assert p.flush(10) == 0
    tp = TopicPartition(topic_name, 3, 12)
    res = admin.delete_records([tp])
    (deleted,) = [f.result(10) for f in res.values()]
    assert deleted.low_watermark == 12
    offs = admin.list_offsets({TopicPartition(topic_name, 3): OffsetSpec.earliest()})
    assert [f.result(10).offset for f in offs.values()] == [12]
    cluster = admin.describe_cluster().result(10)
    assert cluster.controller.id == 0 and len(cluster.nodes) == 1
    admin.delete_topics([topic_name])[topic_name].result(10)
    deadline = time.monotonic() + 5
    while topic_name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_kafka_python_admin_client(broker, topic_name) -> None:
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 3, 1, topic_configs={"cleanup.policy": "delete"})])
        assert topic_name in admin.list_topics()
        (desc,) = admin.describe_topics([topic_name])
        assert len(desc["partitions"]) == 3
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
        assert res  # decoded without error
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                            configs={"retention.bytes": "1048576"})])
        admin.create_partitions({topic_name: NewPartitions(5)})
        (desc,) = admin.describe_topics([topic_name])
        assert len(desc["partitions"]) == 5
        admin.delete_topics([topic_name])
        assert topic_name not in admin.list_topics()
    finally:
        admin.close()


def test_consumer_resets_when_its_offset_is_out_of_range(broker, topic_name) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(topic_name, b"%d" % i, partition=0)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic_name, 0, 1000)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.offset())
        assert got == list(range(10))
    finally:
        c.close()
