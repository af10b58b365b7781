"""Producers and consumers that run on threads while faults are injected.

Every record's value is ``<producer>:<seq>:<payload>`` (seq zero-padded, payload seeded
random bytes), so the verifier can tell records apart, check each producer's order and see
duplicates. Producers are idempotent with acks=all; a record counts as *acknowledged* only
from a successful delivery report, which also gives its partition and offset. A producer
given ``keys`` writes keyed records (``k<n>``, key n to partition n mod the partition count)
and some tombstones, for a compacted topic.
Consumers use ``assign()`` from offset 0 and note every (offset, key, value) they see.
The transactional producers are in ``transactional.py``.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import defaultdict
from typing import Any

import confluent_kafka
from _harness.kafka_python import close_producer

with warnings.catch_warnings():  # kafka-python warns at import time; warnings are errors
    warnings.simplefilter("ignore")
    import kafka
    import kafka.errors


def make_value(producer: str, seq: int, rng: random.Random) -> bytes:
    return f"{producer}:{seq:09d}:".encode() + rng.randbytes(rng.randrange(8, 200))


def parse_value(value: bytes) -> tuple[str, int]:
    producer, seq, _ = value.split(b":", 2)
    return producer.decode(), int(seq)


Record = tuple[int, bytes | None, bytes | None]  # (offset, key, value)

TOMBSTONE_RATIO = 0.05  # of a keyed producer's records
KEYED_BATCH_BYTES = 8192  # a keyed producer's batch.size


def record_key(index: int) -> bytes:
    return b"k%04d" % index


def key_partition(key: bytes, partitions: int) -> int:
    return int(key[1:]) % partitions


class Acks:
    """Thread-safe record of delivery outcomes: ``acked[partition] = [(offset, key, value)]``;
    ``unacked`` holds the (partition, key, value) of every record whose delivery failed
    (it may or may not have been written)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[int, list[Record]] = defaultdict(list)
        self.failed: list[str] = []
        self.unacked: list[tuple[int, bytes | None, bytes | None]] = []
        self.fatal: list[str] = []
        self.sent = 0

    def ok(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self.lock:
            self.acked[partition].append((offset, key, value))

    def fail(self, why: str, partition: int = -1, key: bytes | None = None,
             value: bytes | None = None) -> None:
        with self.lock:
            self.failed.append(why)
            self.unacked.append((partition, key, value))

    @property
    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())

    @property
    def settled(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values()) + len(self.failed)


class _Worker(threading.Thread):
    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:  # reported by the harness
            self.error = e

    def work(self) -> None:
        raise NotImplementedError


class _Producer(_Worker):
    """A producer worker: ``rate`` records/s to ``topic``'s partitions, picked by a
    generator seeded with (seed, name); acknowledgements recorded in ``acks``. With
    ``keys``, each record has one of that many keys (drawn by the generator, a tombstone
    ``TOMBSTONE_RATIO`` of the time) and goes to its key's partition."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, seed: int,
                 rate: float, acks: Acks, keys: int = 0) -> None:
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.rng = random.Random(f"{seed}/{name}")
        self.rate, self.acks, self.keys = rate, acks, keys

    def next_record(self, seq: int) -> tuple[int, bytes | None, bytes | None]:
        """(partition, key, value) of the producer's record number ``seq``."""
        if not self.keys:
            return seq % self.partitions, None, make_value(self.name, seq, self.rng)
        key = record_key(self.rng.randrange(self.keys))
        value = None if self.rng.random() < TOMBSTONE_RATIO else \
            make_value(self.name, seq, self.rng)
        return key_partition(key, self.partitions), key, value


class ConfluentProducer(_Producer):
    """confluent-kafka (librdkafka), ``enable.idempotence=true``, acks=all."""

    def _producer(self) -> confluent_kafka.Producer:
        def on_error(err: Any) -> None:
            if err.fatal():
                self.acks.fatal.append(f"{self.name}: {err}")

        return confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 180_000, "request.timeout.ms": 20_000,
            # keyed: batches below a compacted topic's small segment.bytes
            **({"batch.size": KEYED_BATCH_BYTES} if self.keys else {}),
            "error_cb": on_error, "log_level": 0})  # errors reach error_cb

    def work(self) -> None:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                self.acks.ok(msg.partition(), msg.offset(), msg.key(), msg.value())
            else:
                self.acks.fail(f"{self.name}: {err}", msg.partition(), msg.key(), msg.value())

        p = self._producer()
        seq = 0
        pending: tuple[int, bytes | None, bytes | None] | None = None  # refused: a full queue
        start = time.monotonic()
        while not self.stopping.is_set():
            if seq >= (time.monotonic() - start) * self.rate or len(p) > 2000:
                p.poll(0.02)
                continue
            if pending is None:
                pending = self.next_record(seq)
            partition, key, value = pending
            try:
                p.produce(self.topic, value, key=key, partition=partition,
                          on_delivery=on_delivery)
            except BufferError:
                p.poll(0.1)
                continue
            pending = None
            with self.acks.lock:
                self.acks.sent += 1
            seq += 1
            p.poll(0)
            if self.acks.fatal:  # the idempotent producer cannot go on: report it, stop
                break
        left = p.flush(180)
        if left:
            self.acks.fail(f"{self.name}: {left} records still unsettled after flush")


class KafkaPythonProducer(_Producer):
    """kafka-python, ``enable_idempotence=True``, acks='all'."""

    def work(self) -> None:
        p = kafka.KafkaProducer(bootstrap_servers=self.bootstrap.split(","), acks="all",
                                enable_idempotence=True, linger_ms=5,
                                delivery_timeout_ms=180_000, request_timeout_ms=20_000,
                                max_block_ms=180_000,
                                **({"batch_size": KEYED_BATCH_BYTES} if self.keys else {}))
        seq = 0
        start = time.monotonic()
        try:
            while not self.stopping.is_set():
                if seq >= (time.monotonic() - start) * self.rate or \
                        self.acks.sent - self.acks.settled > 4000:
                    time.sleep(0.02)
                    continue
                partition, key, value = self.next_record(seq)
                fut = p.send(self.topic, value, key=key, partition=partition)
                fut.add_callback(lambda md, k=key, v=value:
                                 self.acks.ok(md.partition, md.offset, k, v))
                fut.add_errback(lambda e, pk=(partition, key, value):
                                self.acks.fail(f"{self.name}: {e!r}", *pk))
                with self.acks.lock:
                    self.acks.sent += 1
                seq += 1
            p.flush(180)
        finally:
            close_producer(p, 30)


class Seen:
    """What one consumer read: ``records[partition] = [(offset, key, value)]``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[int, list[Record]] = defaultdict(list)
        self.errors: list[str] = []          # problems
        self.client_errors: list[str] = []   # client exceptions worked around (reported)

    def add(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self.lock:
            self.records[partition].append((offset, key, value))

    def position(self, partition: int) -> int:
        with self.lock:
            recs = self.records.get(partition)
            return recs[-1][0] + 1 if recs else 0


class ConfluentConsumer(_Worker):
    """confluent-kafka, ``assign()``; ``read_committed`` or ``read_uncommitted``."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 seen: Seen, isolation: str = "read_uncommitted") -> None:
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions, self.seen = bootstrap, topic, partitions, seen
        self.isolation = isolation

    def work(self) -> None:
        c = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap,
                                      "group.id": f"harness-{self.name}",
                                      "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest",
                                      "topic.metadata.refresh.interval.ms": 2000,
                                      "isolation.level": self.isolation,
                                      "log_level": 0})
        c.assign([confluent_kafka.TopicPartition(self.topic, p, 0)
                  for p in range(self.partitions)])
        try:
            while not self.stopping.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().fatal():
                        self.seen.errors.append(str(m.error()))
                        return
                    continue
                self.seen.add(m.partition(), m.offset(), m.key(), m.value())
        finally:
            c.close()


class KafkaPythonConsumer(_Worker):
    """kafka-python, ``assign()``. Its ``poll()`` sometimes raises during a failover
    (``UnknownBrokerIdError`` when a leader it still fetches from has left the metadata) and
    the partition's fetches then stall: such an exception is noted (``Seen.client_errors``,
    printed, not a failure: the broker answered as Kafka does) and the consumer is made
    again at the positions reached, so it keeps consuming through the faults."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 seen: Seen, isolation: str = "read_uncommitted") -> None:
        super().__init__(name)
        self.bootstrap, self.topic, self.partitions, self.seen = bootstrap, topic, partitions, seen
        self.isolation = isolation

    def work(self) -> None:
        while not self.stopping.is_set():
            c = kafka.KafkaConsumer(bootstrap_servers=self.bootstrap.split(","), group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    metadata_max_age_ms=2000, request_timeout_ms=30_000,
                                    isolation_level=self.isolation)
            tps = [kafka.TopicPartition(self.topic, p) for p in range(self.partitions)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, self.seen.position(tp.partition))
            try:
                while not self.stopping.is_set():
                    try:
                        batches = c.poll(timeout_ms=200)
                    except kafka.errors.KafkaError as e:
                        self.seen.client_errors.append(f"poll raised {e!r}")
                        break
                    for tp, msgs in batches.items():
                        for m in msgs:
                            self.seen.add(tp.partition, m.offset, m.key, m.value)
            finally:
                c.close()
