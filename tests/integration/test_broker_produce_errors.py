"""Produce error semantics that clients rely on: acks=0 errors close the connection (the
client's only signal, after which it refreshes metadata), and a batch that passes
max.message.bytes but cannot fit in a segment is RECORD_LIST_TOO_LARGE (18)."""

from __future__ import annotations

import socket

from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import CreateTopicsRequest, ProduceRequest


def _conn(broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=20)


def _create(conn, name, configs=None) -> None:
    R = CreateTopicsRequest
    resp = conn.request(R(topics=[R.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000))
    assert resp.topics[0].error_code == 0


def _request(topic: str, partition: int, records: bytes, acks: int) -> ProduceRequest:
    R = ProduceRequest
    return R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=partition, records=records)])])


def _batch(value_size: int) -> bytes:
    b = logcore.BatchBuilder()
    b.append(b"v" * value_size)
    return b.build()


def _closed_by_peer(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_acks0_error_closes_the_connection(broker, topic_name) -> None:
    conn = _conn(broker)
    try:
        _create(conn, topic_name)
        # A good acks=0 produce keeps the connection open...
        conn.request(_request(topic_name, 0, _batch(10), acks=0), expect_response=False)
        assert not _closed_by_peer(conn.sock, timeout=0.5)
        # ...one to a partition that does not exist closes it.
        conn.sock.settimeout(20)
        conn.request(_request(topic_name, 5, _batch(10), acks=0), expect_response=False)
        assert _closed_by_peer(conn.sock)
    finally:
        conn.close()
    assert "acks=0" in broker.read_log()
    with _conn(broker) as again:  # the broker itself is fine
        resp = again.request(_request(topic_name, 0, _batch(10), acks=1))
        assert resp.responses[0].partition_responses[0].error_code == 0


def test_batch_over_segment_bytes_is_record_list_too_large(broker, topic_name) -> None:
    with _conn(broker) as conn:
        _create(conn, topic_name, {"segment.bytes": "1024"})
        resp = conn.request(_request(topic_name, 0, _batch(4000), acks=1))
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == 18, p  # RECORD_LIST_TOO_LARGE
        # Over max.message.bytes as well: validation comes first, MESSAGE_TOO_LARGE.
        _create(conn, f"{topic_name}-m", {"segment.bytes": "1024", "max.message.bytes": "2000"})
        resp = conn.request(_request(f"{topic_name}-m", 0, _batch(4000), acks=1))
        assert resp.responses[0].partition_responses[0].error_code == 10
        # A batch that fits is stored.
        resp = conn.request(_request(topic_name, 0, _batch(100), acks=1))
        assert resp.responses[0].partition_responses[0].error_code == 0
