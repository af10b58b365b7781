"""The event loop does not wait for disk work or long validation: while one client appends
64 MiB zstd batches (each decompressed and validated by logcore on an I/O thread), a
second client's small produces and fetches keep a low p99 latency."""

from __future__ import annotations

import random
import threading
import time

from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import FetchRequest, ProduceRequest

MiB = 1024 * 1024
# p99 bound of a small produce + fetch round trip while 64 MiB zstd batches are appended.
# Measured on the 2-core development machine (shared, loaded): 30-93 ms (p50 1-4 ms); 687 ms
# when the appends ran on the loop. The bound leaves about 3x for a loaded CI machine, yet
# is well below what one loop-blocking 64 MiB append costs.
P99_BOUND = 0.3


def _produce_request(topic: str, records: bytes) -> ProduceRequest:
    R = ProduceRequest
    return R(transactional_id=None, acks=1, timeout_ms=60000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=0, records=records)])])


def _zstd_batch(size: int, seed: int) -> bytes:
    """A zstd batch of about ``size`` compressed bytes (half-compressible values)."""
    rng = random.Random(seed)
    b = logcore.BatchBuilder(compression="zstd")
    value_noise = 512
    for _ in range(size // value_noise):
        b.append(rng.randbytes(value_noise) + bytes(value_noise))
    return b.build()


def test_small_requests_are_served_while_huge_zstd_batches_append(new_broker, topic_name) -> None:
    b = new_broker({"message.max.bytes": str(70 * MiB), "socket.request.max.bytes": str(80 * MiB),
                    "auto.create.topics.enable": "true"}).start()
    batches = [_zstd_batch(60 * MiB, seed) for seed in range(2)]
    assert all(50 * MiB < len(x) < 70 * MiB for x in batches), [len(x) for x in batches]
    small = logcore.BatchBuilder()
    small.append(b"small")
    small_batch = small.build()
    heavy_topic, light_topic = f"{topic_name}-heavy", f"{topic_name}-light"
    heavy = BrokerConnection(b.host, b.port, timeout=120)
    light = BrokerConnection(b.host, b.port, timeout=30)
    try:
        for conn, t in ((heavy, heavy_topic), (light, light_topic)):
            resp = conn.request(_produce_request(t, small_batch))
            assert resp.responses[0].partition_responses[0].error_code == 0
        done = threading.Event()
        heavy_error: list[BaseException] = []

        def append_heavy() -> None:
            try:
                for _ in range(3):
                    for x in batches:
                        resp = heavy.request(_produce_request(heavy_topic, x))
                        assert resp.responses[0].partition_responses[0].error_code == 0
            except BaseException as exc:  # noqa: BLE001 - reported below
                heavy_error.append(exc)
            finally:
                done.set()

        th = threading.Thread(target=append_heavy, daemon=True)
        F = FetchRequest
        latencies = []
        offset = 1
        th.start()
        while not done.is_set():
            t0 = time.monotonic()
            resp = light.request(_produce_request(light_topic, small_batch))
            assert resp.responses[0].partition_responses[0].error_code == 0
            resp = light.request(F(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=light_topic, partitions=[
                    F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id=""))
            assert len(resp.responses[0].partitions[0].records) > 0
            offset += 1
            latencies.append(time.monotonic() - t0)
            time.sleep(0.005)
        th.join(5)
        assert not heavy_error, heavy_error
    finally:
        heavy.close()
        light.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"{len(latencies)} round trips: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
          f"p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert len(latencies) >= 20
    assert p99 < P99_BOUND, f"p99 {p99 * 1000:.0f} ms"
    assert b.stop() == 0
