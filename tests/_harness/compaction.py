"""Helpers for the broker-level compaction tests: produce with confluent-kafka and keep the
offsets the broker gave, read a partition back with kafka-python and confluent-kafka, and look
at a partition's files (segments, the cleaner checkpoint) the way the cleaner leaves them."""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable, Iterable

Record = tuple[int, bytes | None, bytes | None]  # (offset, key, value)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def create_topic(bootstrap: str, name: str, configs: dict[str, str], partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(15)


def produce(bootstrap: str, topic: str,
            items: Iterable[tuple[bytes | None, bytes | None, int | None]],
            batch_size: int = 1024) -> list[Record]:
    """Produce (key, value, timestamp or None) with confluent-kafka, acks=all, in order, in
    batches of at most ``batch_size`` bytes (below the tests' small segment.bytes); returns
    (offset, key, value) as the delivery reports give them. Fails on any error."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "batch.size": batch_size,
                  "enable.idempotence": False, "max.in.flight.requests.per.connection": 1})
    out: list[Record] = []
    failures: list[str] = []

    def report(err, msg) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            out.append((msg.offset(), msg.key(), msg.value()))

    for key, value, ts in items:
        kwargs = {} if ts is None else {"timestamp": ts}
        while True:
            try:
                p.produce(topic, value=value, key=key, on_delivery=report, **kwargs)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(30) == 0, "messages left undelivered"
    assert not failures, failures[:3]
    return sorted(out)


def latest_per_key(records: Iterable[Record], drop_tombstones: bool = False) -> list[Record]:
    """What a finished compaction keeps: the last record of each key, in offset order."""
    last: dict[bytes | None, Record] = {}
    for rec in sorted(records):
        last[rec[1]] = rec
    kept = sorted(last.values())
    return [r for r in kept if not (drop_tombstones and r[2] is None)]


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offset", "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


def read_confluent(bootstrap: str, topic: str, end: int, partition: int = 0,
                   timeout: float = 30) -> list[Record]:
    """Every record below ``end`` from the beginning, with confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    out: list[Record] = []
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        c.close()
    return out


def read_kafka_python(bootstrap: str, topic: str, end: int, partition: int = 0,
                      timeout: float = 30) -> list[Record]:
    """Every record below ``end`` from the beginning, with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    out: list[Record] = []
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            for msgs in c.poll(timeout_ms=500).values():
                out.extend((m.offset, m.key, m.value) for m in msgs)
    finally:
        c.close()
    return out


def segment_bases(directory: pathlib.Path) -> list[int]:
    """Base offsets of the live segments (``.log`` files, not ``.deleted`` / ``.cleaned``)."""
    return sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log"))


def log_bytes(directory: pathlib.Path, live_only: bool = False) -> int:
    """Bytes of segment data in the partition directory (``.log`` files; with
    ``live_only`` False also those renamed ``.deleted`` / ``.cleaned`` / ``.swap``)."""
    total = 0
    try:
        with os.scandir(directory) as it:
            for e in it:
                if e.name.endswith(".log") or (not live_only and ".log." in e.name):
                    try:
                        total += e.stat().st_size
                    except FileNotFoundError:
                        continue
    except FileNotFoundError:
        return 0
    return total


def cleaner_checkpoint(directory: pathlib.Path) -> int | None:
    """The cleaner's checkpoint of the partition: everything below it has been cleaned."""
    try:
        lines = (directory / CLEANER_CHECKPOINT).read_text().split("\n")
    except FileNotFoundError:
        return None
    return int(lines[2].split()[2]) if len(lines) > 2 and lines[2].strip() else None


def wait_for(cond: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    assert cond(), what()


def wait_cleaned_to(directory: pathlib.Path, offset: int, timeout: float = 60) -> None:
    """Wait until the cleaner checkpoint reaches ``offset``."""
    wait_for(lambda: (cleaner_checkpoint(directory) or 0) >= offset, timeout,
             lambda: f"{directory.name}: cleaned up to {cleaner_checkpoint(directory)}, "
                     f"waited for {offset}; segments {segment_bases(directory)}")
