"""The group coordinator when its ``__consumer_offsets`` writes fail for real, and after.

``min.insync.replicas=2`` on ``__consumer_offsets`` of a single node makes every coordinator
append fail with NOT_ENOUGH_REPLICAS (acks=all cannot be met by one replica), exactly as
a cluster that lost its followers does. While it lasts, commits are refused with Kafka's
mapped error (COORDINATOR_NOT_AVAILABLE, retried by clients) and leave the committed
offsets as they were; a confluent-kafka consumer (group.protocol=consumer) cannot join.
When the setting goes back to 1, the group recovers: the consumer joins, resumes at the
committed offset and its commits stick.
"""

from __future__ import annotations

import time
import uuid
import warnings

import pytest

from pylog import errors
from pylog.client import Admin, TopicPartition
from pylog.client.aio.admin import ConfigResource
from pylog.client.errors import KafkaTimeoutError
from tests.integration.conftest import BrokerProcess, cluster_size

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.skipif(bool(cluster_size()), reason="single node")

DEADLINE = 60.0


def test_commits_fail_while_min_insync_cannot_be_met_and_the_group_recovers(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("group-write-failures") / "data"
    data.mkdir()
    b = BrokerProcess(data, {"offsets.topic.num.partitions": "1"}).start()
    try:
        bs = b.bootstrap
        topic, group = f"wf-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        ck_admin = AdminClient({"bootstrap.servers": bs})
        ck_admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
        p = confluent_kafka.Producer({"bootstrap.servers": bs})
        for i in range(20):
            p.produce(topic, value=b"%d" % i, partition=i % 2)
        assert p.flush(15) == 0
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        offsets = ConfigResource("topic", "__consumer_offsets")
        with Admin(bootstrap_servers=bs) as admin:
            admin.alter_group_offsets(group, {tps[0]: 5, tps[1]: 5})
            admin.alter_configs(offsets, {"min.insync.replicas": "2"})
        with Admin({"bootstrap.servers": bs, "default.api.timeout.ms": 3000}) as short:
            with pytest.raises((errors.CoordinatorNotAvailableError, KafkaTimeoutError,
                                errors.CoordinatorLoadInProgressError)):
                short.alter_group_offsets(group, {tps[0]: 9})

        c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": group,
                                      "group.protocol": "consumer", "enable.auto.commit": False})
        c.subscribe([topic])
        try:
            # Joining needs a write: nothing is assigned or consumed while writes fail.
            end = time.monotonic() + 4
            while time.monotonic() < end:
                m = c.poll(0.2)
                assert m is None or m.error() is not None, "consumed while the group could not be written"
            with Admin(bootstrap_servers=bs) as admin:
                assert {tp: o.offset for tp, o in admin.list_group_offsets(group).items()} == \
                    {tps[0]: 5, tps[1]: 5}
                admin.alter_configs(offsets, {"min.insync.replicas": "1"})
            # The failed writes fenced the partition, which reloaded from the log.
            assert "a write failed (error 19); reloading it from the log" in b.read_log()
            # Recovered: the member joins, resumes at the committed offsets, commits.
            got: list[tuple[int, int]] = []
            deadline = time.monotonic() + DEADLINE
            while len(got) < 10 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append((m.partition(), m.offset()))
            assert sorted(got) == [(pt, o) for pt in (0, 1) for o in range(5, 10)]
            c.commit(asynchronous=False)
        finally:
            c.close()
        with Admin(bootstrap_servers=bs) as admin:
            assert {tp: o.offset for tp, o in admin.list_group_offsets(group).items()} == \
                {tps[0]: 10, tps[1]: 10}
            assert admin.describe_groups([group])[group].state == "Empty"
        rc = b.stop()
        assert rc == 0, b.read_log()[-3000:]
    finally:
        b.stop()
