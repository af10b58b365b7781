"""``__consumer_offsets`` under the log cleaner: bounded on disk under a commit storm, the last
commit survives a restart; and the internal topics answered as Kafka's controller answers
CreateTopics, CreatePartitions and DeleteTopics for them."""

from __future__ import annotations

import os
import select
import time

import pytest
from _harness.compaction import create_topic, log_bytes, segment_bases
from _harness.wire import BrokerConnection

from pylog.group.config import partition_for
from pylog.protocol.connection import NEED_DATA, ConnectionClosed, Response
from pylog.protocol.messages import FindCoordinatorRequest, OffsetCommitRequest

pytestmark = pytest.mark.integration

# Issue 7 asks for a minute of commits as fast as one group can send them.
STORM_SECONDS = float(os.environ.get("PYLOG_COMMIT_STORM_SECONDS", "60"))
SEGMENT_BYTES = 256 * 1024
OFFSETS_PARTITIONS = 4
DATA_PARTITIONS = 8
IN_FLIGHT = 200  # OffsetCommit requests pipelined on the one connection
GROUP = "storm"


def _connect(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=15)


def _find_coordinator(conn: BrokerConnection, group: str) -> None:
    """FindCoordinator until the coordinator is ready (the first call creates the topic)."""
    deadline = time.monotonic() + 30
    while True:
        resp = conn.request(FindCoordinatorRequest(key=group, key_type=0), 3)
        if resp.error_code == 0:
            return
        assert time.monotonic() < deadline, f"FindCoordinator: error {resp.error_code}"
        time.sleep(0.1)


def _commit_request(topic: str, partition: int, offset: int) -> OffsetCommitRequest:
    R = OffsetCommitRequest
    # generation -1 and no member id: the commits of a consumer that assign()s its
    # partitions (a group with no members), as Kafka accepts them.
    return R(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
             topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[
                 R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                                committed_metadata="storm")])])


def _storm(conn: BrokerConnection, topic: str, seconds: float, on_tick) -> tuple[int, dict[int, int]]:
    """Commit as fast as the broker answers for ``seconds``: IN_FLIGHT OffsetCommit v8
    requests pipelined on one connection, each for one partition (round robin) with an
    offset one higher than that partition's last. Returns (commits acknowledged, last
    acknowledged offset per partition); fails on any error code."""
    cc, sock = conn.conn, conn.sock
    sock.setblocking(False)
    last: dict[int, int] = {}
    sent: dict[int, tuple[int, int]] = {}  # correlation id -> (partition, offset)
    n_sent = acked = 0
    out = b""
    started = time.monotonic()
    next_tick = started
    while True:
        now = time.monotonic()
        sending = now - started < seconds
        if not sending and not sent:
            break
        if now >= next_tick:
            on_tick()
            next_tick = now + 0.25
        while sending and len(sent) < IN_FLIGHT:
            p = n_sent % DATA_PARTITIONS
            offset = n_sent // DATA_PARTITIONS + 1
            corr = n_sent & 0x7FFFFFFF
            out += b"".join(bytes(c) for c in cc.send(_commit_request(topic, p, offset), 8,
                                                      correlation_id=corr))
            sent[corr] = (p, offset)
            n_sent += 1
        readable, writable, _ = select.select([sock], [sock] if out else [], [], 0.05)
        if writable:
            out = out[sock.send(out):]
        if readable:
            data = sock.recv(1 << 20)
            assert data, "the broker closed the connection"
            cc.receive_data(data)
            while True:
                event = cc.next_event()
                if event is NEED_DATA:
                    break
                assert not isinstance(event, ConnectionClosed)
                assert isinstance(event, Response)
                p, offset = sent.pop(event.correlation_id)
                (t,) = event.body.topics
                assert t.partitions[0].error_code == 0, t.partitions[0]
                last[p] = max(last.get(p, 0), offset)
                acked += 1
    sock.setblocking(True)
    return acked, last


@pytest.mark.slow
def test_consumer_offsets_stays_bounded_under_a_commit_storm(new_broker, topic_name) -> None:
    from confluent_kafka import Consumer, TopicPartition

    b = new_broker({"offsets.topic.segment.bytes": str(SEGMENT_BYTES),
                    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                    # replaced segments are unlinked 1 s after a clean (Kafka: 60 s)
                    "log.segment.delete.delay.ms": "1000"}).start()
    create_topic(b.bootstrap, topic_name, {}, partitions=DATA_PARTITIONS)
    d = b.data_dir / f"__consumer_offsets-{partition_for(GROUP, OFFSETS_PARTITIONS)}"
    conn = _connect(b.bootstrap)
    _find_coordinator(conn, GROUP)
    sizes: list[int] = []
    acked, last = _storm(conn, topic_name, STORM_SECONDS, lambda: sizes.append(log_bytes(d)))
    conn.close()
    rate = acked / STORM_SECONDS
    # Each commit is one batch of one record: the bytes written are the commits times the
    # size of one, measured on the active segment (never cleaned).
    active = segment_bases(d)[-1]
    per_commit = os.path.getsize(d / f"{active:020d}.log") / max(1, _end_offset(d) - active)
    written = acked * per_commit
    print(f"\ncommit storm: {acked} commits in {STORM_SECONDS:.0f} s = {rate:.0f} commits/s "
          f"(target 10000/s); {written / 1e6:.1f} MB written to {d.name}, at most "
          f"{max(sizes) / 1e6:.2f} MB on disk (segment.bytes {SEGMENT_BYTES})")
    assert acked > 1000 and len(last) == DATA_PARTITIONS
    # Bounded: a few segments (the active one, the cleaned one, those the cleaner has not
    # reached yet, replaced ones waiting for their delete delay), far below what was written.
    bound = min(written / 4, 24 * SEGMENT_BYTES)
    assert max(sizes) < bound, (sizes, written)
    wait_for_size = time.monotonic() + 60
    while log_bytes(d) > 4 * SEGMENT_BYTES and time.monotonic() < wait_for_size:
        time.sleep(0.2)
    assert log_bytes(d) <= 4 * SEGMENT_BYTES

    assert b.stop() == 0
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic_name, p) for p in range(DATA_PARTITIONS)], timeout=30)
    finally:
        c.close()
    assert {tp.partition: tp.offset for tp in got} == last
    assert log_bytes(d) <= 4 * SEGMENT_BYTES
    assert b.stop() == 0


def _end_offset(d) -> int:
    """The partition's log end offset, from its files (the broker may be running)."""
    import logcore

    end = 0
    path = d / f"{segment_bases(d)[-1]:020d}.log"
    data = path.read_bytes()
    for batch in logcore.iter_batches(data):
        end = batch.last_offset + 1
    return end


def test_internal_topics_answered_as_kafka(new_broker, topic_name) -> None:
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    b = new_broker({"offsets.topic.num.partitions": "3"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    create_topic(b.bootstrap, topic_name, {}, partitions=1)
    group = f"g-{topic_name}"
    _commit(b.bootstrap, group, topic_name, 7)

    # KRaft's metadata log is no topic: CreateTopics of it is INVALID_REQUEST.
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("__cluster_metadata", 1, 1)])["__cluster_metadata"].result(15)
    err = info.value.args[0]
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "Creation of internal topic __cluster_metadata is prohibited." in err.str()
    assert "__cluster_metadata" not in admin.list_topics(timeout=10).topics
    # __consumer_offsets exists: TOPIC_ALREADY_EXISTS, as for any topic.
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("__consumer_offsets", 3, 1)])["__consumer_offsets"].result(15)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    # More partitions are accepted (Kafka's controller does); groups stay where they were.
    admin.create_partitions([NewPartitions("__consumer_offsets", 4)])["__consumer_offsets"].result(15)
    assert len(admin.list_topics(timeout=10).topics["__consumer_offsets"].partitions) == 4
    assert _committed(b.bootstrap, group, topic_name) == 7
    _commit(b.bootstrap, group, topic_name, 8)
    assert _committed(b.bootstrap, group, topic_name) == 8

    # Deleting it is accepted too: the coordinators resign, the offsets go with the topic,
    # and the next FindCoordinator creates it anew.
    admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(15)
    assert _committed(b.bootstrap, group, topic_name) == -1001  # OFFSET_INVALID: none
    _commit(b.bootstrap, group, topic_name, 9)
    assert _committed(b.bootstrap, group, topic_name) == 9
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["__consumer_offsets"].partitions) == 3
    del TopicPartition
    assert b.stop() == 0


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                return
            except KafkaException as exc:  # the coordinator moving after a deletion: retry
                assert time.monotonic() < deadline, exc
                time.sleep(0.2)
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=30)
        assert tp.error is None, tp.error
        return tp.offset
    finally:
        c.close()
