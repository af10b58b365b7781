"""Each error the broker reports, provoked with exact requests over a real socket.

The requests are built with pylog.protocol (the same codec the CLI uses) so that every
byte is under the test's control: corrupt CRCs, two batches in one partition, control
batches, timestamps out of range, unsupported versions.
"""

from __future__ import annotations

import struct
import time

import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import (
    AlterConfigsRequest,
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeConfigsRequest,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)

UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
NOT_ENOUGH_REPLICAS = 19
INVALID_REQUIRED_ACKS = 21
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_RECORD = 87


@pytest.fixture
def conn(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    c = BrokerConnection(host, int(port), timeout=10)
    yield c
    c.close()


def create(conn, name, partitions=1, rf=1, configs=None):
    R = CreateTopicsRequest
    resp = conn.request(R(topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
        configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000))
    return resp.topics[0]


def batch(n=3, ts=None, value=b"v", compression="none") -> bytes:
    b = logcore.BatchBuilder(compression=compression)
    for i in range(n):
        b.append(value + str(i).encode(), key=b"k", timestamp_ms=ts)
    return b.build()


def produce(conn, topic, records, partition=0, acks=1, version=None):
    R = ProduceRequest
    body = R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=partition, records=records)])])
    resp = conn.request(body, version)
    return resp.responses[0].partition_responses[0]


def fetch(conn, topic, offset, partition=0, max_wait_ms=0, min_bytes=1, partition_max_bytes=1 << 20,
          max_bytes=50 << 20):
    R = FetchRequest
    resp = conn.request(R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                          isolation_level=0, session_id=0, session_epoch=-1,
                          topics=[R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                              partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes,
                              log_start_offset=-1, current_leader_epoch=-1)])],
                          forgotten_topics_data=[], rack_id=""))
    assert resp.error_code == 0
    return resp.responses[0].partitions[0]


def test_topic_creation_errors(conn, topic_name) -> None:
    assert create(conn, topic_name).error_code == 0
    assert create(conn, topic_name).error_code == TOPIC_ALREADY_EXISTS
    assert create(conn, topic_name.replace("-", ".") + ".x").error_code == 0
    assert create(conn, topic_name.replace("-", "_") + "_x").error_code == INVALID_TOPIC_EXCEPTION
    assert create(conn, "bad/name").error_code == INVALID_TOPIC_EXCEPTION
    assert create(conn, "x" * 250).error_code == INVALID_TOPIC_EXCEPTION
    assert create(conn, "x" * 249).error_code == 0
    assert create(conn, topic_name + "-p0", partitions=0).error_code == INVALID_PARTITIONS
    assert create(conn, topic_name + "-rf", rf=3).error_code == INVALID_REPLICATION_FACTOR
    res = create(conn, topic_name + "-cfg", configs={"retention.ms": "forever"})
    assert res.error_code == INVALID_CONFIG and "retention.ms" in res.error_message


def test_unknown_partition_and_offset_out_of_range(conn, topic_name) -> None:
    create(conn, topic_name)
    assert produce(conn, topic_name, batch(), partition=5).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert produce(conn, topic_name, batch()).error_code == 0
    assert fetch(conn, topic_name, 0, partition=3).error_code == UNKNOWN_TOPIC_OR_PARTITION
    pd = fetch(conn, topic_name, 4)
    assert (pd.error_code, pd.high_watermark, pd.log_start_offset) == (OFFSET_OUT_OF_RANGE, 3, 0)
    assert fetch(conn, topic_name, 3).error_code == 0  # at the end: empty, no error
    assert fetch(conn, "no-such-topic-" + topic_name, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_corrupt_message(conn, topic_name) -> None:
    create(conn, topic_name)
    data = bytearray(batch(5))
    data[-1] ^= 0xFF  # inside the records: the CRC no longer matches
    pr = produce(conn, topic_name, bytes(data))
    assert pr.error_code == CORRUPT_MESSAGE
    assert produce(conn, topic_name, batch()[:40]).error_code == CORRUPT_MESSAGE
    assert fetch(conn, topic_name, 0).high_watermark == 0  # nothing was written


def test_message_too_large(conn, topic_name) -> None:
    create(conn, topic_name, configs={"max.message.bytes": "1000"})
    pr = produce(conn, topic_name, batch(1, value=b"x" * 2000))
    assert pr.error_code == MESSAGE_TOO_LARGE
    assert produce(conn, topic_name, batch(1, value=b"x" * 100)).error_code == 0


def test_invalid_record_two_batches_and_control(conn, topic_name) -> None:
    create(conn, topic_name)
    assert produce(conn, topic_name, batch() + batch()).error_code == INVALID_RECORD
    b = logcore.BatchBuilder(is_control=True)
    b.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")
    assert produce(conn, topic_name, b.build()).error_code == INVALID_RECORD
    assert fetch(conn, topic_name, 0).high_watermark == 0


def test_invalid_timestamp_with_record_errors(conn, topic_name) -> None:
    create(conn, topic_name, configs={"message.timestamp.after.max.ms": "60000",
                                      "message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    pr = produce(conn, topic_name, batch(2, ts=now + 3_600_000))
    assert pr.error_code == INVALID_TIMESTAMP
    assert [e.batch_index for e in pr.record_errors] == [0, 1]
    pr = produce(conn, topic_name, batch(2, ts=now - 3_600_000))
    assert pr.error_code == INVALID_TIMESTAMP
    assert produce(conn, topic_name, batch(2, ts=now)).error_code == 0


def test_invalid_timestamp_of_a_record_older_than_its_batch_base(conn, topic_name) -> None:
    """A negative timestamp delta: the header's base and max timestamps are recent, the
    third record is two hours old. Kafka judges every record; so must the broker."""
    create(conn, topic_name, configs={"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    b = logcore.BatchBuilder()
    for i, ts in enumerate([now, now, now - 7_200_000, now]):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=ts)
    data = b.build()
    header = logcore.RecordBatch(data)
    assert header.base_timestamp == now and header.max_timestamp == now
    pr = produce(conn, topic_name, data)
    assert pr.error_code == INVALID_TIMESTAMP
    assert [e.batch_index for e in pr.record_errors] == [2]
    assert str(now - 7_200_000) in pr.record_errors[0].batch_index_error_message
    assert fetch(conn, topic_name, 0).high_watermark == 0  # nothing was written
    # compressed the same way: the check sees the decompressed records
    b = logcore.BatchBuilder(compression="lz4")
    for i, ts in enumerate([now, now - 7_200_000, now - 1, now - 7_300_000]):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=ts)
    pr = produce(conn, topic_name, b.build())
    assert pr.error_code == INVALID_TIMESTAMP
    assert [e.batch_index for e in pr.record_errors] == [1, 3]
    # a negative delta within the window is fine
    b = logcore.BatchBuilder()
    for i, ts in enumerate([now, now - 30_000]):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=ts)
    pr = produce(conn, topic_name, b.build())
    assert (pr.error_code, pr.base_offset) == (0, 0)


def test_log_append_time_topic(conn, topic_name) -> None:
    create(conn, topic_name, configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    pr = produce(conn, topic_name, batch(3, ts=123))
    assert pr.error_code == 0 and pr.log_append_time_ms >= before
    records = fetch(conn, topic_name, 0).records
    (b,) = list(logcore.iter_batches(bytes(records)))
    assert b.timestamp_type == "log_append"
    assert [r.timestamp for r in b] == [pr.log_append_time_ms] * 3


def test_acks_errors(conn, broker, topic_name) -> None:
    create(conn, topic_name, configs={"min.insync.replicas": "2"})
    assert produce(conn, topic_name, batch(), acks=-1).error_code == NOT_ENOUGH_REPLICAS
    assert produce(conn, topic_name, batch(), acks=1).error_code == 0
    assert produce(conn, topic_name, batch(), acks=2).error_code == INVALID_REQUIRED_ACKS
    # acks=0: no response at all; the record is written.
    R = ProduceRequest
    conn.request(R(transactional_id=None, acks=0, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=topic_name, partition_data=[R.PartitionProduceData(index=0, records=batch(2))])]),
        expect_response=False)
    deadline = time.monotonic() + 5
    while fetch(conn, topic_name, 0).high_watermark != 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fetch(conn, topic_name, 0).high_watermark == 5


def test_unsupported_versions(conn, topic_name) -> None:
    create(conn, topic_name)
    pr = produce(conn, topic_name, batch(), version=2)  # advertised, refused on use
    assert pr.error_code == UNSUPPORTED_VERSION
    # KIP-511: an ApiVersions version we do not know is answered in the v0 layout.
    from pylog.protocol.connection import ClientConnection, Response

    raw = ClientConnection()
    chunks = raw.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    frame = bytearray(b"".join(bytes(c) for c in chunks))
    struct.pack_into(">h", frame, 6, 99)  # request_api_version := 99
    conn.sock.sendall(frame)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        data += conn.sock.recv(65536)
    (size, corr, err) = struct.unpack(">iih", data[:10])
    assert err == UNSUPPORTED_VERSION
    (n,) = struct.unpack(">i", data[10:14])
    keys = {struct.unpack(">hhh", data[14 + 6 * i: 20 + 6 * i])[0]: struct.unpack(">hhh", data[14 + 6 * i: 20 + 6 * i])[1:]
            for i in range(n)}
    assert keys[18] == (0, 4) and keys[0] == (0, 11) and keys[1] == (4, 12)
    del Response


def test_api_versions_advertises_exactly_issues_4_7_10_and_11(conn) -> None:
    assert conn.versions == {
        0: (0, 11), 1: (4, 12), 2: (1, 7), 3: (0, 12), 18: (0, 4), 19: (2, 7), 20: (1, 6),
        21: (0, 2), 22: (0, 5), 23: (2, 4), 32: (1, 4), 33: (0, 2), 35: (0, 4), 37: (0, 3), 44: (0, 1), 60: (0, 1),
        # issue 21: SASL and SCRAM credentials (KIP-152, KIP-368, KIP-554)
        17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        # issue 7: consumer groups
        8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5),
        15: (0, 5), 16: (0, 5), 42: (0, 2), 47: (0, 0),
        # issue 10: the transaction coordinator
        24: (0, 5), 25: (0, 4), 26: (0, 4), 65: (0, 0), 66: (0, 1),
        # issue 10: transactions, partition side
        27: (0, 1), 61: (0, 0),
        # issue 10: transactions, group coordinator side
        28: (0, 4),
        # issue 11: replication, the controller's requests to brokers
        4: (0, 7), 5: (0, 4),
        # issue 22: client quotas (KIP-546)
        48: (0, 1), 49: (0, 1),
        # issue 21: ACLs (SECURITY_DISABLED without an authorizer)
        29: (1, 3), 30: (1, 3), 31: (1, 3),
        # issue 25: KIP-848 consumer groups (heartbeat v1: SubscribedTopicRegex)
        68: (0, 1), 69: (0, 1),
        # issue 25: KIP-932 share groups (Kafka 4.2's versions)
        76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
        # issue 25: KIP-932's share coordinator (inter-broker, CLUSTER_ACTION; v0)
        83: (0, 0), 84: (0, 0), 85: (0, 0), 86: (0, 0), 87: (0, 0),
        # issue 25: the share-group offset admin APIs
        90: (0, 1), 91: (0, 0), 92: (0, 0),
    }


def test_metadata_auto_create_rules(conn, topic_name) -> None:
    R = MetadataRequest
    resp = conn.request(R(topics=[R.MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=False))
    assert resp.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    resp = conn.request(R(topics=[R.MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=True))
    t = resp.topics[0]
    assert t.error_code == 0 and len(t.partitions) == 1 and t.partitions[0].leader_id == 0
    resp = conn.request(R(topics=[R.MetadataRequestTopic(name="bad name")], allow_auto_topic_creation=True))
    assert resp.topics[0].error_code == INVALID_TOPIC_EXCEPTION


def test_delete_records_and_list_offsets(conn, topic_name) -> None:
    create(conn, topic_name)
    for _ in range(4):
        assert produce(conn, topic_name, batch(5)).error_code == 0
    R = DeleteRecordsRequest
    resp = conn.request(R(topics=[R.DeleteRecordsTopic(name=topic_name, partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=7)])], timeout_ms=5000))
    p = resp.topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (0, 7)
    resp = conn.request(R(topics=[R.DeleteRecordsTopic(name=topic_name, partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=999)])], timeout_ms=5000))
    assert resp.topics[0].partitions[0].error_code == OFFSET_OUT_OF_RANGE
    assert fetch(conn, topic_name, 3).error_code == OFFSET_OUT_OF_RANGE
    records = fetch(conn, topic_name, 7).records
    first = next(iter(logcore.iter_batches(bytes(records))))
    assert first.base_offset == 5  # whole batch served; the client skips 5 and 6
    L = ListOffsetsRequest
    offsets = []
    for ts in (-2, -1):
        resp = conn.request(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name=topic_name, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
        offsets.append(resp.topics[0].partitions[0].offset)
    assert offsets == [7, 20]
    # The same partition twice in one request is refused, as Kafka does.
    resp = conn.request(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic_name, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=t) for t in (-2, -1)])]))
    assert [p.error_code for p in resp.topics[0].partitions] == [0, 42]


def test_configs_describe_alter_incremental(conn, topic_name) -> None:
    create(conn, topic_name, configs={"retention.ms": "5000"})
    D = DescribeConfigsRequest

    def describe():
        resp = conn.request(D(resources=[D.DescribeConfigsResource(resource_type=2, resource_name=topic_name,
                                                                   configuration_keys=None)],
                              include_synonyms=True, include_documentation=True))
        res = resp.results[0]
        assert res.error_code == 0
        return {c.name: c for c in res.configs}

    cfg = describe()
    assert cfg["retention.ms"].value == "5000" and cfg["retention.ms"].config_source == 1
    assert cfg["segment.bytes"].value == "1073741824" and cfg["segment.bytes"].config_source == 5
    assert [s.name for s in cfg["retention.ms"].synonyms][:2] == ["retention.ms", "log.retention.hours"]
    assert cfg["max.message.bytes"].config_type == 3 and cfg["max.message.bytes"].documentation
    IA = IncrementalAlterConfigsRequest

    def alter(appended: str) -> int:
        resp = conn.request(IA(resources=[IA.AlterConfigsResource(resource_type=2, resource_name=topic_name, configs=[
            IA.AlterableConfig(name="retention.ms", config_operation=1, value=None),
            IA.AlterableConfig(name="max.message.bytes", config_operation=0, value="2000"),
            IA.AlterableConfig(name="cleanup.policy", config_operation=2, value=appended)])], validate_only=False))
        return resp.responses[0].error_code

    # A bad policy is refused, and nothing of the request applies.
    assert alter("shrink") == INVALID_CONFIG
    cfg = describe()
    assert cfg["retention.ms"].value == "5000" and cfg["max.message.bytes"].config_source == 5
    assert alter("delete") == 0
    cfg = describe()
    assert cfg["retention.ms"].config_source == 5
    assert cfg["max.message.bytes"].value == "2000"
    assert cfg["cleanup.policy"].value == "delete"  # APPEND keeps a list free of duplicates
    assert produce(conn, topic_name, batch(1, value=b"x" * 3000)).error_code == MESSAGE_TOO_LARGE
    A = AlterConfigsRequest
    resp = conn.request(A(resources=[A.AlterConfigsResource(resource_type=2, resource_name=topic_name, configs=[
        A.AlterableConfig(name="segment.bytes", value="tiny")])], validate_only=False))
    assert resp.responses[0].error_code == INVALID_CONFIG
    resp = conn.request(A(resources=[A.AlterConfigsResource(resource_type=2, resource_name=topic_name, configs=[
        A.AlterableConfig(name="segment.ms", value="100000")])], validate_only=False))
    assert resp.responses[0].error_code == 0
    cfg = describe()
    assert cfg["segment.ms"].value == "100000" and cfg["max.message.bytes"].config_source == 5
    C = CreatePartitionsRequest
    resp = conn.request(C(topics=[C.CreatePartitionsTopic(name=topic_name, count=3, assignments=None)],
                          timeout_ms=5000, validate_only=False))
    assert resp.results[0].error_code == 0
    resp = conn.request(C(topics=[C.CreatePartitionsTopic(name=topic_name, count=2, assignments=None)],
                          timeout_ms=5000, validate_only=False))
    assert resp.results[0].error_code == INVALID_PARTITIONS
    assert produce(conn, topic_name, batch(), partition=2).error_code == 0


def test_topic_compression_type_rewrites_batches(conn, topic_name) -> None:
    create(conn, topic_name, configs={"compression.type": "zstd"})
    assert produce(conn, topic_name, batch(20, value=b"abc" * 50, compression="gzip")).error_code == 0
    (b,) = list(logcore.iter_batches(bytes(fetch(conn, topic_name, 0).records)))
    assert b.compression == "zstd"
    assert [r.value for r in b] == [b"abc" * 50 + str(i).encode() for i in range(20)]
    assert [r.offset for r in b] == list(range(20))
