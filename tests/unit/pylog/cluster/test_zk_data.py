"""pylog.cluster.zk_data: Kafka's znode payloads, byte for byte, and strict decoding."""

from __future__ import annotations

import json

import pytest

from pylog.cluster import zk_data as z

# Payloads as Kafka 3.x writes them (the shapes documented in ZkData.scala).
KAFKA_BROKER_V5 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
    b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"],"jmx_port":9999,'
    b'"host":"host1","timestamp":"2233345666","port":9092,"version":5,"rack":"dc1"}')
KAFKA_TOPIC_V3 = (b'{"removing_replicas":{},"partitions":{"2":[1,2],"1":[2,0],"0":[0,1]},'
                  b'"topic_id":"UYIqz_Y9SLutzBwx_HmF7g","adding_replicas":{},"version":3}')
KAFKA_STATE = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2]}'


def test_paths() -> None:
    assert z.broker_id_path(3) == "/brokers/ids/3"
    assert z.topic_path("orders") == "/brokers/topics/orders"
    assert z.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert z.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert z.config_entity_path("topics", "orders") == "/config/topics/orders"
    assert "/latest_producer_id_block" in z.PERSISTENT_PATHS
    assert "/config/topics" in z.PERSISTENT_PATHS


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "x" * 250, "spa ce", "é"])
def test_paths_refuse_illegal_topic_names(bad: str) -> None:
    with pytest.raises(z.ZkDataError, match="illegal topic name"):
        z.topic_path(bad)


def test_paths_refuse_negative_ids_and_unknown_config_types() -> None:
    with pytest.raises(z.ZkDataError, match="broker id"):
        z.broker_id_path(-1)
    with pytest.raises(z.ZkDataError, match="partition"):
        z.partition_state_path("t", -1)
    with pytest.raises(z.ZkDataError, match="unknown config entity type"):
        z.config_entity_path("widgets", "g")


def test_client_quota_entity_paths_and_notices() -> None:
    """Kafka's quota entities: /config/users/<user>/clients/<client-id> is a users entity
    whose name has a clients child, and its change notice names the whole path."""
    assert z.config_entity_path("clients", "<default>") == "/config/clients/<default>"
    assert z.config_entity_path("users", "a%20b/clients/c") == "/config/users/a%20b/clients/c"
    path = "/config/changes/config_change_0000000007"
    for entity in ("clients/app", "users/<default>", "users/alice/clients/<default>"):
        assert z.decode_config_change(path, z.encode_config_change(entity)) == entity
    for bad in ("users/alice/topics/x", "users//clients/c", "users/a/clients/c/d", "clients/a/b"):
        with pytest.raises(z.ZkDataError):
            z.decode_config_change(path, z.encode_config_change(bad))


def test_controller_payload() -> None:
    reg = z.ControllerRegistration(2, 1_700_000_000_123)
    data = reg.encode()
    assert data == (b'{"version":2,"brokerid":2,"timestamp":"1700000000123",'
                    b'"kraftControllerEpoch":-1}')
    assert z.ControllerRegistration.decode(data) == reg
    # version 1 (older brokers): no kraftControllerEpoch
    assert z.ControllerRegistration.decode(
        b'{"version":1,"brokerid":0,"timestamp":"5"}').kraft_controller_epoch == -1
    assert z.encode_controller_epoch(7) == b"7"
    assert z.decode_controller_epoch(b"7") == 7
    for bad in (b"", b"-1", b"7 ", b"x", b"99999999999", None):
        with pytest.raises(z.ZkDataError, match="/controller_epoch"):
            z.decode_controller_epoch(bad)


def test_broker_registration_reads_kafkas_payload() -> None:
    reg = z.BrokerRegistration.decode(1, KAFKA_BROKER_V5)
    assert reg.endpoints == (z.EndPoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"),
                             z.EndPoint("SSL", "host1", 9093, "SSL"))
    assert (reg.rack, reg.jmx_port, reg.timestamp_ms, reg.version) == ("dc1", 9999, 2233345666, 5)
    again = json.loads(reg.encode())
    assert again == json.loads(KAFKA_BROKER_V5)


def test_broker_registration_encodes_kafkas_fields() -> None:
    reg = z.BrokerRegistration(
        0, (z.EndPoint("CLIENT", "10.0.0.1", 9094, "SASL_SSL"),
            z.EndPoint("REPLICATION", "10.0.0.1", 9095, "PLAINTEXT")),
        rack=None, timestamp_ms=12, features={"metadata.version": (1, 7)})
    obj = json.loads(reg.encode())
    assert obj == {
        "version": 5, "host": "10.0.0.1", "port": 9095,  # the first PLAINTEXT endpoint
        "endpoints": ["CLIENT://10.0.0.1:9094", "REPLICATION://10.0.0.1:9095"],
        "jmx_port": -1, "timestamp": "12",
        "listener_security_protocol_map": {"CLIENT": "SASL_SSL", "REPLICATION": "PLAINTEXT"},
        "features": {"metadata.version": {"min_version": 1, "max_version": 7}}}
    assert "rack" not in obj
    assert z.BrokerRegistration.decode(0, reg.encode()) == reg
    no_plaintext = z.BrokerRegistration(0, (z.EndPoint("SSL", "h", 1, "SSL"),))
    assert json.loads(no_plaintext.encode())[("host")] is None
    assert json.loads(no_plaintext.encode())["port"] == -1
    ipv6 = z.BrokerRegistration(0, (z.EndPoint("PLAINTEXT", "::1", 9092),))
    assert json.loads(ipv6.encode())["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert z.BrokerRegistration.decode(0, ipv6.encode()).endpoints == ipv6.endpoints


def test_broker_registration_version_1() -> None:
    reg = z.BrokerRegistration.decode(
        4, b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"1"}')
    assert reg.endpoints == (z.EndPoint("PLAINTEXT", "localhost", 9092),)


def test_topic_assignment_reads_and_writes_kafkas_payload() -> None:
    a = z.TopicAssignment.decode("t", KAFKA_TOPIC_V3)
    assert a.topic_id == "UYIqz_Y9SLutzBwx_HmF7g"
    assert list(a.partitions) == [0, 1, 2]
    assert a.partitions[1] == z.ReplicaAssignment((2, 0))
    assert json.loads(a.encode()) == json.loads(KAFKA_TOPIC_V3)
    assert a.encode() == (b'{"version":3,"partitions":{"0":[0,1],"1":[2,0],"2":[1,2]},'
                          b'"adding_replicas":{},"removing_replicas":{},'
                          b'"topic_id":"UYIqz_Y9SLutzBwx_HmF7g"}')
    # version 1 (no reassignment fields, no topic id) still reads
    old = z.TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[3]}}')
    assert old == z.TopicAssignment({0: z.ReplicaAssignment((3,))})


def test_topic_assignment_with_a_reassignment_in_flight() -> None:
    a = z.TopicAssignment({0: z.ReplicaAssignment((4, 5, 1, 2), adding_replicas=(4, 5),
                                                  removing_replicas=(1, 2))})
    obj = json.loads(a.encode())
    assert obj["adding_replicas"] == {"0": [4, 5]}
    assert obj["removing_replicas"] == {"0": [1, 2]}
    back = z.TopicAssignment.decode("t", a.encode())
    assert back == a
    assert back.partitions[0].target_replicas == (4, 5)


def test_partition_state_payload() -> None:
    s = z.PartitionState.decode("t", 0, KAFKA_STATE)
    assert s == z.PartitionState(leader=1, leader_epoch=5, isr=(1, 2), controller_epoch=3)
    assert s.encode() == b'{"version":1,"leader":1,"leader_epoch":5,"controller_epoch":3,"isr":[1,2]}'
    recovering = z.PartitionState(2, 6, (2,), 3, z.LEADER_RECOVERY_RECOVERING)
    assert json.loads(recovering.encode())["leader_recovery_state"] == 1
    assert z.PartitionState.decode("t", 0, recovering.encode()) == recovering
    offline = z.PartitionState(z.NO_LEADER, 7, (2,), 3)
    assert z.PartitionState.decode("t", 0, offline.encode()).leader == -1


def test_other_payloads() -> None:
    assert z.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert z.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert z.encode_entity_config({"retention.ms": "1"}) == (
        b'{"version":1,"config":{"retention.ms":"1"}}')
    assert z.decode_entity_config("/config/topics/t", b'{"version":1,"config":{}}') == {}
    assert z.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert z.decode_config_change("/config/changes/config_change_0000000001",
                                  z.encode_config_change("topics/t")) == "topics/t"
    data = z.encode_isr_change([("t", 1), ("a", 0), ("t", 1)])
    assert data == b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"t","partition":1}]}'
    assert z.decode_isr_change("/isr_change_notification/isr_change_0", data) == [("a", 0), ("t", 1)]


def test_producer_id_blocks() -> None:
    first = z.ProducerIdBlock.next_after(None, 3)
    assert (first.block_start, first.block_end, first.size) == (0, 999, 1000)
    assert first.encode() == b'{"version":1,"broker":3,"block_start":"0","block_end":"999"}'
    second = z.ProducerIdBlock.next_after(first, 5)
    assert (second.broker_id, second.block_start, second.block_end) == (5, 1000, 1999)
    assert z.ProducerIdBlock.decode(second.encode()) == second
    near_end = z.ProducerIdBlock(1, 0, 2**63 - 1 - 500)
    with pytest.raises(z.ZkDataError, match="exhausted"):
        z.ProducerIdBlock.next_after(near_end, 1)
    with pytest.raises(z.ZkDataError, match="decimal long"):
        z.ProducerIdBlock.decode(b'{"version":1,"broker":1,"block_start":"9223372036854775808",'
                                 b'"block_end":"1"}')


def test_new_uuid_text_is_kafkas_format() -> None:
    seen = {z.new_uuid_text() for _ in range(200)}
    assert len(seen) == 200
    for text in seen:
        assert len(text) == 22 and not text.startswith("-")
        assert z.TopicAssignment({0: z.ReplicaAssignment((0,))}, topic_id=text).encode()
    # a source that first yields a '-'-leading id is rerolled
    draws = iter([b"\xfb" + bytes(15), bytes(range(16))])
    assert not z.new_uuid_text(lambda n: next(draws)).startswith("-")


@pytest.mark.parametrize(("data", "message"), [
    (None, "no data"),
    (b"", "no data"),
    (b"\xff\xfe", "malformed JSON"),
    (b"{", "malformed JSON"),
    (b"[1]", "expected a JSON object"),
    (b'{"version":1,"version":1}', "duplicate key"),
    (b'{"version":1,"leader":NaN}', "malformed JSON"),
    (b'{"version":2,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1]}',
     "unsupported version 2"),
    (b'{"version":1,"leader_epoch":0,"controller_epoch":0,"isr":[1]}', "'leader' is missing"),
    (b'{"version":1,"leader":true,"leader_epoch":0,"controller_epoch":0,"isr":[1]}',
     "must be an integer"),
    (b'{"version":1,"leader":1,"leader_epoch":2147483648,"controller_epoch":0,"isr":[1]}',
     "outside"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1,1]}',
     "twice"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":"1"}',
     "list of broker ids"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1.5]}',
     "not a broker id"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":0,"isr":[1],'
     b'"leader_recovery_state":2}', "neither 0 nor 1"),
    (b"[" * 100_000 + b"]" * 100_000, "malformed JSON"),
    (b'{"version":1,"pad":"' + b"x" * z.MAX_ZNODE_DATA_BYTES + b'"}', "over ZooKeeper"),
])
def test_strict_decoding_names_the_path(data: bytes | None, message: str) -> None:
    with pytest.raises(z.ZkDataError, match=message) as info:
        z.PartitionState.decode("orders", 3, data)
    assert info.value.path == "/brokers/topics/orders/partitions/3/state"
    assert str(info.value).startswith("/brokers/topics/orders/partitions/3/state: ")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("data", "message"), [
    (b'{"version":3,"partitions":{"x":[1]}}', "not a partition number"),
    (b'{"version":3,"partitions":{"01":[1]}}', "not a partition number"),
    (b'{"version":3}', "'partitions' must be an object"),
    (b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"0":[2]}}',
     "not within the partition's replicas"),
    (b'{"version":3,"partitions":{"0":[1]},"topic_id":"short"}', "base64url UUID"),
    (b'{"version":4,"partitions":{}}', "unsupported version 4"),
])
def test_strict_topic_decoding(data: bytes, message: str) -> None:
    with pytest.raises(z.ZkDataError, match=message) as info:
        z.TopicAssignment.decode("orders", data)
    assert info.value.path == "/brokers/topics/orders"


@pytest.mark.parametrize(("data", "message"), [
    (b'{"version":5,"endpoints":["nope"],"jmx_port":-1}', "not LISTENER://host:port"),
    (b'{"version":5,"endpoints":["P://h:70000"],"jmx_port":-1}', "not LISTENER://host:port"),
    (b'{"version":5,"endpoints":"P://h:1"}', "list of strings"),
    (b'{"version":6,"endpoints":[]}', "unsupported version 6"),
    (b'{"version":5,"endpoints":[],"features":{"f":{"min_version":1}}}', "'max_version'"),
    (b'{"version":5,"endpoints":[],"timestamp":"soon"}', "decimal long"),
])
def test_strict_broker_decoding(data: bytes, message: str) -> None:
    with pytest.raises(z.ZkDataError, match=message) as info:
        z.BrokerRegistration.decode(9, data)
    assert info.value.path == "/brokers/ids/9"


def test_strict_misc_decoding() -> None:
    with pytest.raises(z.ZkDataError, match="/cluster/id: unsupported version"):
        z.decode_cluster_id(b'{"version":"2","id":"x"}')
    with pytest.raises(z.ZkDataError, match="/cluster/id: the cluster id is empty"):
        z.decode_cluster_id(b'{"version":"1","id":""}')
    with pytest.raises(z.ZkDataError, match="not a range"):
        z.ProducerIdBlock.decode(b'{"version":1,"broker":1,"block_start":"5","block_end":"4"}')
    with pytest.raises(z.ZkDataError, match="string values"):
        z.decode_entity_config("/config/topics/t", b'{"version":1,"config":{"a":1}}')
    with pytest.raises(z.ZkDataError, match="<type>/<name>"):
        z.decode_config_change("/config/changes/c", b'{"version":2,"entity_path":"nope"}')
    with pytest.raises(z.ZkDataError, match="keys and values are strings"):
        z.encode_entity_config({"a": 1})  # type: ignore[dict-item]
