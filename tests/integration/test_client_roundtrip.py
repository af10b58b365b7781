"""Round trips between independent clients: one produces, another consumes, byte-exact.

Keys, headers and null values, every compression codec; offsets dense and in order per
partition. Producers and consumers: confluent-kafka (librdkafka), kafka-python, aiokafka,
kcat (Debian's librdkafka build) and pylog's own CLI. The CLI round trip (pylog's client)
runs against Tansu as well (``any_broker``).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time

import pytest
from _harness.kafka_python import close_producer

KCAT = shutil.which("kcat") or shutil.which("kafkacat")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 120


def _records(topic: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    out = []
    for i in range(N):
        key = f"key-{i % 7}".encode() if i % 5 else None
        value = None if i % 11 == 3 and key is not None else (f"value-{i}-".encode() + bytes(range(i % 256)) * 3)
        headers = [("h1", f"x{i}".encode()), ("empty", b"")] if i % 3 else []
        out.append((key, value, headers))
    return out


# --- producers -----------------------------------------------------------------------------


def produce_confluent(bootstrap: str, topic: str, codec: str, records) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                  "enable.idempotence": False, "acks": "all"})
    errors = []
    for key, value, headers in records:
        p.produce(topic, key=key, value=value, headers=headers or None, partition=0,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(20) == 0
    assert not errors


def produce_kafka_python(bootstrap: str, topic: str, codec: str, records) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                      enable_idempotence=False, acks=1, linger_ms=20)
    try:
        futures = [p.send(topic, key=k, value=v, headers=h, partition=0) for k, v, h in records]
        p.flush(20)
        offsets = [f.get(10).offset for f in futures]
    finally:
        close_producer(p, 5)
    assert offsets == list(range(offsets[0], offsets[0] + len(records)))


def produce_aiokafka(bootstrap: str, topic: str, codec: str, records) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                             compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            futs = [await p.send(topic, key=k, value=v, headers=h, partition=0) for k, v, h in records]
            await asyncio.gather(*futs)
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(go(), 30))


# --- consumers -----------------------------------------------------------------------------


def consume_confluent(bootstrap: str, topic: str, n: int):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, n: int):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    tp = TopicPartition(topic, 0)
    got = []
    deadline = time.monotonic() + 20
    try:
        c.assign([tp])
        c.seek(tp, 0)
        while len(got) < n and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += [(r.offset, r.key, r.value, list(r.headers)) for r in records]
    finally:
        c.close()
    return got


def consume_aiokafka(bootstrap: str, topic: str, n: int):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def go():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
        await c.start()
        got = []
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            while len(got) < n:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got += [(r.offset, r.key, r.value, list(r.headers)) for r in records]
        finally:
            await c.stop()
        return got

    return asyncio.run(asyncio.wait_for(go(), 30))


PRODUCERS = {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka}
CONSUMERS = {"confluent": consume_confluent, "kafka-python": consume_kafka_python, "aiokafka": consume_aiokafka}
# Every producer and every consumer meets every codec; no client reads its own writes.
PAIRS = [
    ("confluent", "kafka-python"),
    ("kafka-python", "aiokafka"),
    ("aiokafka", "confluent"),
]


def _normalise(got):
    return [(o, k, v, [(hk, bytes(hv) if hv is not None else None) for hk, hv in h]) for o, k, v, h in got]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(("producer", "consumer"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_cross_client_round_trip(broker, topic_name, codec, producer, consumer) -> None:
    if codec == "snappy" and producer == "aiokafka":
        pytest.importorskip("cramjam")
    records = _records(topic_name)
    PRODUCERS[producer](broker.bootstrap, topic_name, codec, records)
    got = _normalise(CONSUMERS[consumer](broker.bootstrap, topic_name, len(records)))
    assert [o for o, *_ in got] == list(range(len(records)))  # dense, in order
    expected = [(i, k, v, h) for i, (k, v, h) in enumerate(records)]
    assert got == expected


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (tools/install-sysdeps.sh)")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_confluent_consume_and_back(broker, topic_name, codec) -> None:
    lines = [f"k{i % 4}|line {i} " + "x" * (i % 50) for i in range(200)]
    subprocess.run([KCAT, "-b", broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-K", "|",
                    "-z", codec, "-H", "origin=kcat"],
                   input=("\n".join(lines) + "\n").encode(), check=True, timeout=30)
    got = consume_confluent(broker.bootstrap, topic_name, len(lines))
    assert [o for o, *_ in got] == list(range(len(lines)))
    for (_offset, key, value, headers), line in zip(got, lines, strict=True):
        k, v = line.split("|", 1)
        assert (key, value, headers) == (k.encode(), v.encode(), [("origin", b"kcat")])
    # And kcat reads what confluent-kafka wrote, with headers and null values.
    topic2 = topic_name + "-back"
    records = _records(topic2)
    produce_confluent(broker.bootstrap, topic2, codec, records)
    out = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", topic2, "-p", "0", "-o", "beginning",
                          "-e", "-f", "%o|%k|%S|%h\\n"], capture_output=True, check=True, timeout=30).stdout
    rows = out.decode("latin-1").splitlines()
    assert len(rows) == len(records)
    for i, (row, (key, value, _headers)) in enumerate(zip(rows, records, strict=True)):
        offset, k, size, _h = row.split("|", 3)
        assert int(offset) == i
        assert k == (key.decode() if key is not None else "")
        assert int(size) == (len(value) if value is not None else -1)


def test_pylog_cli_round_trip(any_broker, topic_name) -> None:
    cmd = [sys.executable, "-m", "pylog"]
    env_b = ["-b", any_broker.bootstrap]
    subprocess.run(cmd + ["topics", "create", topic_name, "-p", "2"] + env_b, check=True, timeout=30)
    data = "".join(f"key{i}\tvalue {i}\n" for i in range(50))
    subprocess.run(cmd + ["produce", topic_name, "-K", "\t", "-z", "lz4", "-H", "app=cli"] + env_b,
                   input=data.encode(), check=True, timeout=30)
    out = subprocess.run(cmd + ["consume", topic_name, "--from-beginning", "-e", "--key", "--headers"] + env_b,
                         capture_output=True, check=True, timeout=30).stdout.decode()
    rows = sorted(out.splitlines(), key=lambda r: int(r.split("\t")[1][3:]))
    assert rows == [f"app=cli\tkey{i}\tvalue {i}" for i in range(50)]
    # confluent-kafka sees the same records, key-partitioned as Kafka's default partitioner does.
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": any_broker.bootstrap, "partitioner": "murmur2_random"})
    delivered = {}
    for i in range(50):
        p.produce(topic_name, key=f"key{i}".encode(), value=b"again",
                  on_delivery=lambda err, msg: delivered.__setitem__(msg.key(), msg.partition()))
    p.flush(10)
    rows = subprocess.run(cmd + ["consume", topic_name, "--from-beginning", "-e", "--key", "--offsets"] + env_b,
                          capture_output=True, check=True, timeout=30).stdout.decode().splitlines()
    cli_partition = {}
    for row in rows:
        where, key, value = row.split("\t")
        if value.startswith("value "):
            cli_partition[key] = int(where.split(":")[0])
    assert cli_partition == {k.decode(): v for k, v in delivered.items()}
