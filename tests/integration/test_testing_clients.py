"""The clients people use against ``pylog.testing.KafkaBroker``: produce, consume in a
group with committed offsets, and transactions (a read_committed consumer sees the
committed transaction and not the aborted one), with confluent-kafka, kafka-python,
aiokafka and pylog.client. Each test owns its topics; one broker serves the module."""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as CConsumer
from confluent_kafka import Producer as CProducer
from confluent_kafka import TopicPartition as CTopicPartition

from pylog.testing import KafkaBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import aiokafka
    import kafka

pytestmark = pytest.mark.integration

CONF = {"broker.address.family": "v4"}
N = 5


@pytest.fixture(scope="module")
def kb() -> Iterator[KafkaBroker]:
    with KafkaBroker() as broker:
        yield broker


def _topic(kb: KafkaBroker, partitions: int = 2) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kb.create_topic(name, partitions)
    return name


def _committed_values(kb: KafkaBroker, topic: str) -> list[bytes]:
    """The transactional test's expectation: only the committed transaction's records
    are visible to read_committed; both transactions are in the log."""
    return sorted(r.value for r in kb.records(topic) if r.value is not None)


# --- confluent-kafka ------------------------------------------------------------------


def test_confluent_kafka(kb: KafkaBroker) -> None:
    topic = _topic(kb)
    p = CProducer({"bootstrap.servers": kb.bootstrap_servers, **CONF})
    for i in range(N):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(20) == 0
    c = CConsumer({"bootstrap.servers": kb.bootstrap_servers, "group.id": f"g-{topic}",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False, **CONF})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    committed = c.committed([CTopicPartition(topic, p) for p in range(2)], timeout=10)
    c.close()
    assert sorted(got) == [b"v%d" % i for i in range(N)]
    assert sum(tp.offset for tp in committed if tp.offset >= 0) == N


def test_confluent_kafka_transactions(kb: KafkaBroker) -> None:
    topic = _topic(kb, 1)
    p = CProducer({"bootstrap.servers": kb.bootstrap_servers, "transactional.id": f"tx-{topic}",
                   **CONF})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"committed")
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"aborted")
    assert p.flush(20) == 0  # in the log before the abort (an abort drops unsent records)
    p.abort_transaction(20)
    c = CConsumer({"bootstrap.servers": kb.bootstrap_servers, "group.id": f"g-{topic}",
                   "auto.offset.reset": "earliest", "isolation.level": "read_committed", **CONF})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not got:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"committed"]
    assert _committed_values(kb, topic) == [b"aborted", b"committed"]
    assert all(r.transactional for r in kb.records(topic))


# --- kafka-python ----------------------------------------------------------------------


def test_kafka_python(kb: KafkaBroker) -> None:
    topic = _topic(kb)
    p = kafka.KafkaProducer(bootstrap_servers=kb.bootstrap_servers)
    for i in range(N):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i).get(20)
    p.close(5)
    c = kafka.KafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers, group_id=f"g-{topic}",
                            auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for records in c.poll(500).values():
            got.extend(r.value for r in records)
    c.commit()
    committed = [c.committed(kafka.TopicPartition(topic, p)) for p in range(2)]
    c.close()
    assert sorted(got) == [b"v%d" % i for i in range(N)]
    assert sum(o or 0 for o in committed) == N


def test_kafka_python_transactions(kb: KafkaBroker) -> None:
    topic = _topic(kb, 1)
    p = kafka.KafkaProducer(bootstrap_servers=kb.bootstrap_servers,
                            transactional_id=f"tx-{topic}")
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"committed")
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic, b"aborted")
    p.flush()
    p.abort_transaction()
    p.close(5)
    c = kafka.KafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers,
                            auto_offset_reset="earliest", isolation_level="read_committed",
                            consumer_timeout_ms=3000)
    got = [r.value for r in c]
    c.close()
    assert got == [b"committed"]
    assert _committed_values(kb, topic) == [b"aborted", b"committed"]


# --- aiokafka --------------------------------------------------------------------------


def test_aiokafka(kb: KafkaBroker) -> None:
    topic = _topic(kb)

    async def main() -> tuple[list[bytes], int]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=kb.bootstrap_servers)
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i)
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers,
                                      group_id=f"g-{topic}", auto_offset_reset="earliest",
                                      enable_auto_commit=False)
        await c.start()
        try:
            got: list[bytes] = []
            while len(got) < N:
                msg = await asyncio.wait_for(c.getone(), 20)
                got.append(msg.value)
            await c.commit()
            committed = [await c.committed(aiokafka.TopicPartition(topic, p)) for p in range(2)]
        finally:
            await c.stop()
        return got, sum(o or 0 for o in committed)

    got, committed = asyncio.run(main())
    assert sorted(got) == [b"v%d" % i for i in range(N)]
    assert committed == N


def test_aiokafka_transactions(kb: KafkaBroker) -> None:
    topic = _topic(kb, 1)

    async def main() -> list[bytes]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=kb.bootstrap_servers,
                                      transactional_id=f"tx-{topic}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"committed")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aborted")
            await p.abort_transaction()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers,
                                      auto_offset_reset="earliest",
                                      isolation_level="read_committed")
        await c.start()
        try:
            batches = await c.getmany(timeout_ms=3000)
            return [r.value for records in batches.values() for r in records]
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(main(), 60)) == [b"committed"]
    assert _committed_values(kb, topic) == [b"aborted", b"committed"]


# --- pylog.client ----------------------------------------------------------------------


def test_pylog_client(kb: KafkaBroker) -> None:
    from pylog.client import Consumer, Producer, TopicPartition

    topic = _topic(kb)
    with Producer(bootstrap_servers=kb.bootstrap_servers) as p:
        for i in range(N):
            p.send(topic, b"v%d" % i, key=b"k%d" % i)
        p.flush(20)
    with Consumer({"bootstrap.servers": kb.bootstrap_servers, "group.id": f"g-{topic}",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False}) as c:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(timeout=0.5))
        c.commit()
        committed = c.committed([TopicPartition(topic, p) for p in range(2)])
    assert sorted(got) == [b"v%d" % i for i in range(N)]
    assert sum(o.offset for o in committed.values() if o is not None) == N


def test_pylog_client_transactions(kb: KafkaBroker) -> None:
    from pylog.client import Consumer, Producer, TopicPartition

    topic = _topic(kb, 1)
    with Producer(bootstrap_servers=kb.bootstrap_servers, transactional_id=f"tx-{topic}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"committed")
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"aborted")
        p.flush(20)  # in the log before the abort (an abort drops unsent records)
        p.abort_transaction()
    with Consumer(bootstrap_servers=kb.bootstrap_servers, auto_offset_reset="earliest",
                  isolation_level="read_committed") as c:
        c.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(timeout=0.3))
    assert got == [b"committed"]
    assert _committed_values(kb, topic) == [b"aborted", b"committed"]
