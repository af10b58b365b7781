"""Every compression codec from many clients at once into one broker, every byte read back.

The broker decompresses produced batches on its I/O threads (validation), recompresses
them for a topic's ``compression.type``, and its log cleaner decompresses and recompresses
compacted batches on a thread of its own, all at once. A zstd context shared by those
threads once answered UNKNOWN_SERVER_ERROR, wrote wrong bytes under a fresh CRC and
crashed the broker within seconds of such a load. Here confluent-kafka producers send in
every codec, kafka-python and aiokafka producers join in, into:

- ``plain``: four partitions, stored as produced (partitions append in parallel on the
  broker's I/O threads);
- ``zstd``: ``compression.type=zstd``, gzip and lz4 input recompressed by the broker;
- ``compact``: ``cleanup.policy=compact`` with small segments, keys repeated, the cleaner
  running (checked) while the producers still send.

Every value is a pure function of its producer and sequence number, so every acknowledged
record is compared byte for byte with what was sent; the compacted topic keeps exactly the
latest value of each key below the cleaner's checkpoint. The broker stays up and exits 0.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable

import pytest
from _harness.compaction import (
    cleaner_checkpoint,
    create_topic,
    read_confluent,
    segment_bases,
    wait_for,
)

pytestmark = pytest.mark.integration

LOAD_SECONDS = 8.0  # the producers send at least this long...
LOAD_MAX_SECONDS = 25.0  # ...and until the cleaner has run twice during the load, or this
COMPACT_KEYS = 40  # keys per producer of the compacted topic

TOPICS = {
    "plain": ({}, 4),
    "zstd": ({"compression.type": "zstd"}, 4),
    "compact": (
        {
            "cleanup.policy": "compact",
            "segment.bytes": "65536",
            "segment.ms": "600000",
            "min.cleanable.dirty.ratio": "0.01",
            "file.delete.delay.ms": "200",
        },
        1,
    ),
}
# (client, codec, topic) per producer; two gzip producers write into the zstd topic.
PRODUCERS = [
    ("confluent", "gzip", "plain"),
    ("confluent", "snappy", "plain"),
    ("confluent", "lz4", "plain"),
    ("confluent", "zstd", "plain"),
    ("confluent", "gzip", "zstd"),
    ("confluent", "gzip", "zstd"),
    ("confluent", "zstd", "compact"),
    ("confluent", "gzip", "compact"),
    ("confluent", "lz4", "compact"),
    ("confluent", "snappy", "compact"),
    ("kafka-python", "zstd", "plain"),
    ("aiokafka", "lz4", "zstd"),
]

Acked = tuple[str, int, int, bytes, bytes]  # (topic, partition, offset, key, value)


def key_of(p: int, seq: int, topic: str) -> bytes:
    if topic == "compact":
        return b"p%02d-k%03d" % (p, seq % COMPACT_KEYS)
    return b"p%02d-s%07d" % (p, seq)


# Text-like bytes that compress as records usually do; a value is a slice of it.
_rnd = random.Random(7)
_WORDS = [_rnd.randbytes(_rnd.randint(1, 10)) for _ in range(300)]
CORPUS = b"".join(_rnd.choices(_WORDS, k=200_000))
# Large values in the stored-as-produced and recompressed topics (the codecs spend longer
# per batch with the GIL released, where threads overlap); small ones in the compacted
# topic, so that its 64 KiB segments hold many records.
VALUE_SIZES = {
    "plain": (0, 100, 1000, 8000, 40000),
    "zstd": (0, 100, 1000, 8000, 40000),
    "compact": (0, 30, 200, 700, 3000),
}


def value_of(p: int, seq: int) -> bytes:
    """Different bytes for every (producer, sequence), led by a header naming them so that
    a misplaced value is recognised."""
    rnd = random.Random(p * 10_000_019 + seq)
    size = rnd.choice(VALUE_SIZES[PRODUCERS[p][2]])
    start = rnd.randrange(len(CORPUS) - size)
    return b"p%02d-s%07d|" % (p, seq) + CORPUS[start : start + size]


def identity(value: bytes) -> tuple[int, int]:
    head = value.split(b"|", 1)[0]
    return int(head[1:3]), int(head[5:])


class Load:
    """Shared by the producer threads: when to stop (asked under a lock; ``keep_going``
    keeps state). Each producer keeps its own results."""

    def __init__(self, keep_going: Callable[[float], bool], alive: Callable[[], bool]) -> None:
        self.start = time.monotonic()
        self.keep_going = keep_going
        self.alive = alive
        self.start_line = threading.Barrier(len(PRODUCERS))
        self._lock = threading.Lock()

    def running(self) -> bool:
        with self._lock:
            return self.alive() and self.keep_going(time.monotonic() - self.start)

    def wait_s(self) -> float:
        """How long to wait for acknowledgements: not long from a dead broker."""
        return 30.0 if self.alive() else 2.0


def run_confluent(
    bootstrap: str,
    p: int,
    codec: str,
    topic: str,
    load: Load,
    acked: list[Acked],
    failures: list[str],
) -> None:
    from confluent_kafka import Producer

    prod = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 16384,
            "broker.address.family": "v4",
        }
    )

    def report(err, msg) -> None:
        if err is not None:
            failures.append(f"producer {p} ({codec} -> {topic}): {err}")
        else:
            acked.append((topic, msg.partition(), msg.offset(), msg.key(), msg.value()))

    seq = 0
    load.start_line.wait()
    while load.running():
        while len(prod) >= 100:  # at most ~100 records waiting: the load follows the broker
            prod.poll(0.01)
        for _ in range(20):
            prod.produce(
                topic, key=key_of(p, seq, topic), value=value_of(p, seq), on_delivery=report
            )
            seq += 1
        prod.poll(0.02)
    left = prod.flush(load.wait_s())
    if left:
        failures.append(f"producer {p} ({codec} -> {topic}): {left} records undelivered")


def run_kafka_python(
    bootstrap: str,
    p: int,
    codec: str,
    topic: str,
    load: Load,
    acked: list[Acked],
    failures: list[str],
) -> None:
    from kafka import KafkaProducer

    prod = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        acks="all",
        linger_ms=5,
        max_in_flight_requests_per_connection=1,
    )
    try:
        seq = 0
        load.start_line.wait()
        while load.running():
            futures = []
            for _ in range(20):
                key, value = key_of(p, seq, topic), value_of(p, seq)
                futures.append((key, value, prod.send(topic, key=key, value=value)))
                seq += 1
            for key, value, fut in futures:
                try:
                    md = fut.get(timeout=load.wait_s())
                except Exception as exc:
                    failures.append(f"producer {p} (kafka-python {codec} -> {topic}): {exc!r}")
                    return
                acked.append((topic, md.partition, md.offset, key, value))
            time.sleep(0.02)
    finally:
        prod.close(timeout=10)


def run_aiokafka(
    bootstrap: str,
    p: int,
    codec: str,
    topic: str,
    load: Load,
    acked: list[Acked],
    failures: list[str],
) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        prod = AIOKafkaProducer(
            bootstrap_servers=bootstrap, compression_type=codec, acks="all", linger_ms=5
        )
        await prod.start()
        try:
            seq = 0
            load.start_line.wait()
            while load.running():
                sent = []
                for _ in range(20):
                    key, value = key_of(p, seq, topic), value_of(p, seq)
                    sent.append((key, value, await prod.send(topic, key=key, value=value)))
                    seq += 1
                for key, value, fut in sent:
                    try:
                        md = await asyncio.wait_for(fut, load.wait_s())
                    except Exception as exc:
                        failures.append(f"producer {p} (aiokafka {codec} -> {topic}): {exc!r}")
                        return
                    acked.append((topic, md.partition, md.offset, key, value))
                await asyncio.sleep(0.02)
        finally:
            await asyncio.wait_for(prod.stop(), 10)

    asyncio.run(main())


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "watermarks", "enable.auto.commit": False}
    )
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, i), timeout=10) for i in range(partitions)
        ]
    finally:
        c.close()


@pytest.mark.single_broker("reads the broker's cleaner checkpoint and log")
def test_every_codec_at_once_with_recompression_and_the_cleaner(new_broker) -> None:
    b = new_broker({"log.cleaner.backoff.ms": "200", "auto.create.topics.enable": "false"})
    b.start()
    for name, (configs, partitions) in TOPICS.items():
        create_topic(b.bootstrap, name, configs, partitions)
    compact_dir = b.data_dir / "compact-0"
    cleaned: list[int] = []  # checkpoints seen advancing while the producers send

    def keep_going(elapsed: float) -> bool:
        cp = cleaner_checkpoint(compact_dir)
        if cp is not None and (not cleaned or cp > cleaned[-1]):
            cleaned.append(cp)
        if elapsed > LOAD_MAX_SECONDS:
            return False
        return elapsed < LOAD_SECONDS or len(cleaned) < 2

    load = Load(keep_going, b.alive)
    acked: list[list[Acked]] = [[] for _ in PRODUCERS]
    failures: list[list[str]] = [[] for _ in PRODUCERS]

    def producer(i: int) -> None:
        client, codec, topic = PRODUCERS[i]
        try:
            RUNNERS[client](b.bootstrap, i, codec, topic, load, acked[i], failures[i])
        except BaseException as exc:  # reach the assertion, not the thread's stderr
            failures[i].append(f"producer {i} ({client} {codec} -> {topic}): {exc!r}")

    threads = [
        threading.Thread(target=producer, args=(i,), name=f"producer-{i}", daemon=True)
        for i in range(len(PRODUCERS))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=LOAD_MAX_SECONDS + 90)
    assert not any(t.is_alive() for t in threads), "a producer hangs"
    assert b.alive(), f"the broker died under the load; log:\n{b.read_log()[-4000:]}"
    every_failure = [f for fs in failures for f in fs]
    assert not every_failure, every_failure[:5]
    assert len(cleaned) >= 2, f"the cleaner did not run during the load: checkpoints {cleaned}"
    for i, mine in enumerate(acked):
        assert len(mine) >= 100, f"producer {i} {PRODUCERS[i]} got only {len(mine)} records acked"

    sent: dict[tuple[str, int, int], tuple[bytes, bytes]] = {}
    for mine in acked:
        for topic, partition, offset, key, value in mine:
            assert (topic, partition, offset) not in sent, f"two records acked at {offset}"
            sent[topic, partition, offset] = (key, value)

    # Stored as produced, and recompressed from gzip and lz4: every record, every byte.
    for topic in ("plain", "zstd"):
        partitions = TOPICS[topic][1]
        for partition, (low, high) in enumerate(watermarks(b.bootstrap, topic, partitions)):
            want = {o: kv for (t, p, o), kv in sent.items() if t == topic and p == partition}
            assert low == 0 and high == len(want) and sorted(want) == list(range(high))
            got = read_confluent(b.bootstrap, topic, high, partition, timeout=60)
            assert [r[0] for r in got] == list(range(high)), f"{topic}-{partition}: offsets"
            for offset, key, value in got:
                assert (key, value) == want[offset], f"{topic}-{partition} offset {offset}"
                p, seq = identity(value)
                assert value == value_of(p, seq) and key == key_of(p, seq, topic)

    # Compacted while being written: what is read is what was sent at that offset; below
    # the cleaner's checkpoint one record per key, the last one sent below it; the latest
    # record of every key is there.
    active = segment_bases(compact_dir)[-1]
    wait_for(
        lambda: (cleaner_checkpoint(compact_dir) or 0) >= active,
        30,
        lambda: (
            f"compact-0 cleaned to {cleaner_checkpoint(compact_dir)}, not to the "
            f"active segment {active}; log:\n{b.read_log()[-3000:]}"
        ),
    )
    checkpoint = cleaner_checkpoint(compact_dir) or 0
    want = {o: kv for (t, _, o), kv in sent.items() if t == "compact"}
    ((_, high),) = watermarks(b.bootstrap, "compact", 1)
    assert high == len(want)
    got = read_confluent(b.bootstrap, "compact", high, 0, timeout=60)
    assert got and got[-1][0] == high - 1
    for offset, key, value in got:
        assert (key, value) == want[offset], f"compact offset {offset}: not what was sent"
    last_below: dict[bytes, int] = {}
    latest: dict[bytes, int] = {}
    for offset, (key, _) in sorted(want.items()):
        latest[key] = offset
        if offset < checkpoint:
            last_below[key] = offset
    got_offsets = {r[0] for r in got}
    kept_below = sorted(o for o in got_offsets if o < checkpoint)
    assert kept_below == sorted(last_below.values()), "the cleaner kept the wrong records"
    assert set(latest.values()) <= got_offsets, "the latest record of a key is missing"
    assert len(got) < len(want), "nothing was compacted"

    log = b.read_log()
    bad = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not bad, bad[:5]
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()[-4000:]}"
    print(
        f"{len(sent)} records acked, {len(got)} of {len(want)} kept in compact after "
        f"cleaning to {checkpoint} ({len(cleaned)} checkpoints seen during the load)"
    )
