"""Garbage, half frames and oversized frames on one socket never take the broker down:
the bad connection is closed (one log line with the peer and the reason) while another
client keeps producing and fetching."""

from __future__ import annotations

import os
import socket
import struct
import time

from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import ProduceRequest


def _raw(broker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def _closed_by_peer(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _produce_ok(conn: BrokerConnection, topic: str) -> int:
    b = logcore.BatchBuilder()
    b.append(b"still alive")
    R = ProduceRequest
    resp = conn.request(R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=0, records=b.build())])]))
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0
    return p.base_offset


def test_garbage_and_half_frames_do_not_disturb_others(broker, topic_name) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    good = BrokerConnection(host, int(port), timeout=10)
    try:
        assert _produce_ok(good, topic_name) == 0
        # 1. Random garbage: a negative or huge size prefix closes that connection.
        bad = _raw(broker)
        bad.sendall(b"\xff\xff\xff\xff" + os.urandom(100))
        assert _closed_by_peer(bad)
        bad.close()
        # 2. A frame announcing more than socket.request.max.bytes.
        bad = _raw(broker)
        bad.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16)
        assert _closed_by_peer(bad)
        bad.close()
        # 3. A half frame, then the client goes away.
        bad = _raw(broker)
        bad.sendall(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
        bad.close()
        # 4. A half frame that stays open: the broker waits for it without blocking others.
        stalled = _raw(broker)
        stalled.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00")
        # 5. A well-framed request with an unknown API key: closed, as Kafka does.
        bad = _raw(broker)
        bad.sendall(struct.pack(">ihhi", 8, 999, 0, 1))
        assert _closed_by_peer(bad)
        bad.close()
        # 6. A known API whose body is garbage: INVALID_REQUEST or a close, never a crash.
        bad = _raw(broker)
        body = struct.pack(">hhih", 3, 12, 7, -1) + os.urandom(40)
        bad.sendall(struct.pack(">i", len(body)) + body)
        bad.settimeout(5)
        try:
            bad.recv(65536)
        except OSError:
            pass
        bad.close()
        # 7. Thousands of tiny garbage frames on many sockets.
        for _ in range(20):
            s = _raw(broker)
            s.sendall(os.urandom(64))
            s.close()
        for i in range(5):
            assert _produce_ok(good, topic_name) == 1 + i
        stalled.close()
        time.sleep(0.2)
        assert broker.alive()
        log = broker.read_log()
        assert "protocol error" in log or "closing" in log
        # Every bad connection got one line naming the peer.
        assert "connection 127.0.0.1:" in log
    finally:
        good.close()
    # A fresh client still works.
    again = BrokerConnection(host, int(port), timeout=10)
    try:
        assert _produce_ok(again, topic_name) == 6
    finally:
        again.close()


def test_idle_connections_are_closed(new_broker) -> None:
    b = new_broker({"connections.max.idle.ms": "300"}).start()
    host, port = b.bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout=10)  # negotiates ApiVersions, then idles
    try:
        assert _closed_by_peer(conn.sock, timeout=5)
        assert "idle (connections.max.idle.ms)" in b.read_log()
    finally:
        conn.close()
    assert b.stop() == 0


def test_client_closing_during_a_long_poll(broker, topic_name) -> None:
    from pylog.protocol.connection import ClientConnection
    from pylog.protocol.messages import FetchRequest

    host, port = broker.bootstrap.rsplit(":", 1)
    good = BrokerConnection(host, int(port), timeout=10)
    try:
        _produce_ok(good, topic_name)
        R = FetchRequest
        client = ClientConnection()
        chunks = client.send(R(replica_id=-1, max_wait_ms=30_000, min_bytes=1 << 20, max_bytes=1 << 20,
                               session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic=topic_name, partitions=[
                                   R.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])]), 12)
        s = _raw(broker)
        s.sendall(b"".join(bytes(c) for c in chunks))
        time.sleep(0.2)
        s.close()  # the broker drops the 30 s long poll instead of holding it
        t0 = time.monotonic()
        assert _produce_ok(good, topic_name) == 1
        assert time.monotonic() - t0 < 5
    finally:
        good.close()
