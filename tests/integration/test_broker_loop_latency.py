"""The event loop does not wait for disk work or long validation: while one client appends
64 MiB zstd batches (each decompressed and validated by logcore on an I/O thread), a
second client's small produces and fetches keep a low p99 latency; and while small
uncompressed batches (appended on the loop) go to logs that the cleaner swaps, retention
deletes and ``segment.ms`` rolls, on a disk whose renames, unlinks and fsyncs are slow, a
second client's ApiVersions requests keep a low p99 latency."""

from __future__ import annotations

import os
import pathlib
import random
import threading
import time

import pytest
from _harness.compaction import create_topic
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import ApiVersionsRequest, FetchRequest, ProduceRequest

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


# Every os.fsync / rename / replace / unlink in the broker sleeps this long first
# (tests/_harness/slow_fs/sitecustomize.py): a swap or retention pass then does file work
# for hundreds of milliseconds, a roll's producer snapshot for tens.
SLOW_FS_MS = 40
# p99 bound of an ApiVersions round trip while the loop appends to those logs. The bound is
# 3x SLOW_FS_MS: one slowed call on the loop, or a wait for a lock held across one, would
# show as a tail of SLOW_FS_MS and more (swaps and retention passes hold it across many).
FILE_WORK_P99_BOUND = 0.120
SLOW_FS_DIR = pathlib.Path(__file__).resolve().parents[1] / "_harness" / "slow_fs"


def _keyed_batch(n: int, keys: int, seed: int, value_size: int = 200) -> bytes:
    rng = random.Random(seed)
    b = logcore.BatchBuilder()
    for _ in range(n):
        b.append(rng.randbytes(value_size), key=b"key-%d" % rng.randrange(keys))
    return b.build()


def test_the_loop_never_waits_for_segment_file_work(new_broker, topic_name,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(SLOW_FS_DIR)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("PYLOG_TEST_SLOW_FS_MS", str(SLOW_FS_MS))
    b = new_broker({"log.cleaner.backoff.ms": "50", "log.retention.check.interval.ms": "100",
                    "auto.create.topics.enable": "false"}).start(timeout=60)
    small = {"segment.bytes": "16384", "file.delete.delay.ms": "0"}
    topics = {
        f"{topic_name}-compact": dict(small, **{"cleanup.policy": "compact",
                                                "min.cleanable.dirty.ratio": "0.01"}),
        f"{topic_name}-retain": dict(small, **{"retention.bytes": "40000",
                                               "retention.ms": "3000"}),
        f"{topic_name}-roll": {"segment.ms": "150", "segment.jitter.ms": "0",
                               "retention.ms": "2000", "file.delete.delay.ms": "0"},
    }
    for name, configs in topics.items():
        create_topic(b.bootstrap, name, configs)
    light = BrokerConnection(b.host, b.port, timeout=30)
    producers = {name: BrokerConnection(b.host, b.port, timeout=60) for name in topics}
    stop = threading.Event()
    failures: list[BaseException] = []
    appended = dict.fromkeys(topics, 0)

    def produce(name: str) -> None:
        conn, seed = producers[name], 0
        try:
            while not stop.is_set():
                seed += 1
                records = _keyed_batch(10, 20, seed)  # ~2.3 KB: appended on the loop
                resp = conn.request(_produce_request(name, records))
                part = resp.responses[0].partition_responses[0]
                assert part.error_code == 0, part
                appended[name] += 1
                time.sleep(0.002)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=produce, args=(name,), daemon=True) for name in topics]
    latencies: list[float] = []
    try:
        for th in threads:
            th.start()
        deadline = time.monotonic() + 12.0
        while time.monotonic() < deadline and not failures:
            t0 = time.monotonic()
            resp = light.request(ApiVersionsRequest(client_software_name="pylog-tests",
                                                    client_software_version="0"))
            latencies.append(time.monotonic() - t0)
            assert resp.error_code == 0
            time.sleep(0.005)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
        light.close()
        for conn in producers.values():
            conn.close()
    assert not failures, failures
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"{len(latencies)} ApiVersions round trips with {SLOW_FS_MS} ms file calls, "
          f"appends {appended}: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {latencies[-1] * 1000:.1f} ms")
    broker_log = b.read_log()
    # Closing fsyncs every segment above the recovery point, each call slowed.
    assert b.stop(timeout=180) == 0
    # The file work happened meanwhile: segments were swapped, deleted and rolled by time.
    data = pathlib.Path(b.data_dir)
    compact_dir = data / f"{topic_name}-compact-0"
    cleaned = (compact_dir / "cleaner-offset-checkpoint").read_text().split()
    assert int(cleaned[-1]) > 0, "the cleaner never swapped"
    retain_dir = data / f"{topic_name}-retain-0"
    first_retained = min(int(f.name[:20]) for f in retain_dir.glob("*.log"))
    assert first_retained > 0, "retention never deleted a segment"
    roll_dir = data / f"{topic_name}-roll-0"
    assert len(list(roll_dir.glob("*.snapshot"))) >= 2 or first_retained, broker_log[-2000:]
    assert len(latencies) >= 200
    assert p99 < FILE_WORK_P99_BOUND, f"p99 {p99 * 1000:.0f} ms"
