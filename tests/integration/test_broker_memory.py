"""Request memory is bounded (``queued.max.request.bytes`` and each connection's share):
clients that pipeline or trickle huge frames cannot make the broker hold gigabytes, and
another client keeps being served meanwhile. The broker's resident memory is read from
``/proc/<pid>/status`` while the load runs."""

from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
import time

import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.connection import NEED_DATA, ClientConnection, Response
from pylog.protocol.messages import FetchRequest, ProduceRequest

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")

MiB = 1024 * 1024
GROWTH_LIMIT = 300 * MiB


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class _RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.base = _rss(pid)
        self.peak = self.base
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, _rss(self.pid))

    def stop(self) -> int:
        self._done.set()
        self.join(5)
        return self.peak - self.base


class _OtherClient(threading.Thread):
    """Small produce + fetch round trips on their own connection; records latencies."""

    def __init__(self, broker, topic: str) -> None:
        super().__init__(daemon=True)
        host, port = broker.bootstrap.rsplit(":", 1)
        self.conn = BrokerConnection(host, int(port), timeout=30)
        self.topic = topic
        self.latencies: list[float] = []
        self.error: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        R, F = ProduceRequest, FetchRequest
        b = logcore.BatchBuilder()
        b.append(b"small")
        batch = b.build()
        offset = 0
        try:
            while not self._done.is_set():
                t0 = time.monotonic()
                resp = self.conn.request(R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                    R.TopicProduceData(name=self.topic, partition_data=[
                        R.PartitionProduceData(index=0, records=batch)])]))
                assert resp.responses[0].partition_responses[0].error_code == 0
                resp = self.conn.request(F(
                    replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                    session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=self.topic, partitions=[
                        F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                    forgotten_topics_data=[], rack_id=""))
                assert resp.responses[0].partitions[0].error_code == 0
                offset += 1
                self.latencies.append(time.monotonic() - t0)
                time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def stop(self) -> None:
        self._done.set()
        self.join(60)
        self.conn.close()
        assert self.error is None, self.error
        assert len(self.latencies) >= 5, self.latencies
        assert max(self.latencies) < 10.0, max(self.latencies)


def test_pipelined_large_produces_behind_a_long_poll(new_broker, topic_name) -> None:
    # Memory settings are the defaults; only the batch size limit is raised so that the
    # 20 MiB batches are stored (and verified) rather than refused.
    b = new_broker({"message.max.bytes": str(21 * MiB), "auto.create.topics.enable": "true"}).start()
    pid = b.proc.pid
    value = b"x" * (20 * MiB - 200)
    builder = logcore.BatchBuilder()
    builder.append(value)
    batch = builder.build()
    other = _OtherClient(b, f"{topic_name}-other")
    with BrokerConnection(b.host, b.port, timeout=10) as setup:  # create both topics
        for t in (topic_name, other.topic):
            R = ProduceRequest
            setup.request(R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                R.TopicProduceData(name=t, partition_data=[R.PartitionProduceData(index=0, records=b"")])]))
    time.sleep(0.3)
    sampler = _RssSampler(pid)
    sampler.start()
    other.start()
    client = ClientConnection()
    F, R = FetchRequest, ProduceRequest
    frames = [client.send(F(replica_id=-1, max_wait_ms=3000, min_bytes=1 << 30, max_bytes=1 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1,
                            topics=[F.FetchTopic(topic=topic_name, partitions=[F.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                            forgotten_topics_data=[], rack_id=""), 11)]
    for _ in range(31):
        frames.append(client.send(R(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            R.TopicProduceData(name=topic_name, partition_data=[
                R.PartitionProduceData(index=0, records=batch)])]), 9))
    sock = socket.create_connection((b.host, b.port), timeout=120)
    responses: list[Response] = []

    def read_all() -> None:
        while len(responses) < 32:
            data = sock.recv(1 << 20)
            if not data:
                return
            client.receive_data(data)
            while (event := client.next_event()) is not NEED_DATA:
                responses.append(event)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        for chunks in frames:
            sock.sendall(b"".join(bytes(c) for c in chunks))
        reader.join(180)
        growth = sampler.stop()
        other.stop()
    finally:
        sock.close()
    assert len(responses) == 32
    codes = [p.error_code for r in responses[1:] for t in r.body.responses for p in t.partition_responses]
    assert codes == [0] * 31
    offsets = [t.partition_responses[0].base_offset for r in responses[1:] for t in r.body.responses]
    assert offsets == list(range(31))
    assert growth < GROWTH_LIMIT, f"broker RSS grew by {growth / MiB:.0f} MiB"
    print(f"RSS growth {growth / MiB:.0f} MiB; other client max latency "
          f"{max(other.latencies) * 1000:.0f} ms over {len(other.latencies)} round trips")
    assert b.stop() == 0


def test_many_connections_trickling_huge_frames(new_broker, topic_name) -> None:
    b = new_broker({"auto.create.topics.enable": "true"}).start()
    pid = b.proc.pid
    other = _OtherClient(b, topic_name)
    with BrokerConnection(b.host, b.port, timeout=10) as setup:
        R = ProduceRequest
        setup.request(R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            R.TopicProduceData(name=topic_name, partition_data=[R.PartitionProduceData(index=0, records=b"")])]))
    time.sleep(0.3)
    sampler = _RssSampler(pid)
    sampler.start()
    other.start()
    size = 100 * MiB - 4  # socket.request.max.bytes, the default: each frame is legal
    head = struct.pack(">ihhih", size, 0, 9, 1, -1)  # Produce v9 header, then body bytes
    socks = []
    sel = selectors.DefaultSelector()
    sent = {}
    try:
        for _ in range(50):
            s = socket.create_connection((b.host, b.port), timeout=10)
            s.sendall(head)
            s.setblocking(False)
            socks.append(s)
            sent[s] = len(head)
            sel.register(s, selectors.EVENT_WRITE)
        # Each connection sends up to 4 MiB/s for 6 s: 24 MiB each, 1.2 GB in all if the
        # broker read everything it was offered.
        chunk = b"\0" * (256 * 1024)
        rate = 4 * MiB
        t0 = time.monotonic()
        while (elapsed := time.monotonic() - t0) < 6.0:
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                if sent[s] - len(head) > rate * elapsed:
                    continue
                try:
                    sent[s] += s.send(chunk)
                except BlockingIOError:
                    pass
            time.sleep(0.005)
        growth = sampler.stop()
        other.stop()
    finally:
        sel.close()
        for s in socks:
            s.close()
    total = sum(sent.values())
    print(f"sent {total / MiB:.0f} MiB in all; RSS growth {growth / MiB:.0f} MiB; other client max "
          f"latency {max(other.latencies) * 1000:.0f} ms over {len(other.latencies)} round trips")
    assert growth < GROWTH_LIMIT, f"broker RSS grew by {growth / MiB:.0f} MiB"
    with BrokerConnection(b.host, b.port, timeout=10) as again:  # still serving
        again.request(ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic_name, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=b"")])]))
    assert b.stop() == 0
