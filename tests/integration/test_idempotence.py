"""Idempotent producers against a real broker process: real clients with their default
(idempotent) settings, and exact requests for the duplicate / sequence / epoch rules."""

from __future__ import annotations

import signal
import time

import pytest
from _harness.kafka_python import close_producer
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import InitProducerIdRequest, ProduceRequest

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
NOT_COORDINATOR = 16


def connect(broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=10)


def init_pid(conn, transactional_id=None):
    return conn.request(InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1))


def pbatch(pid: int, seq: int, epoch: int = 0, n: int = 2) -> bytes:
    b = logcore.BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(b"v%d" % (seq + i), key=b"k")
    return b.build()


def produce(conn, topic, records):
    R = ProduceRequest
    body = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=0, records=records)])])
    return conn.request(body).responses[0].partition_responses[0]


def test_kafka_python_default_producer_is_idempotent_and_exactly_once(broker, topic_name) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=broker.bootstrap)  # defaults: idempotence on, acks=all
    try:
        futures = [p.send(topic_name, value=b"m%d" % i, partition=0) for i in range(200)]
        p.flush(30)
        offsets = [f.get(10).offset for f in futures]
    finally:
        close_producer(p, 5)
    assert offsets == list(range(200))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      fetch_max_wait_ms=100)
    tp = TopicPartition(topic_name, 0)
    got = []
    deadline = time.monotonic() + 20
    try:
        c.assign([tp])
        c.seek(tp, 0)
        while len(got) < 200 and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += [(r.offset, r.value) for r in records]
        got += [(r.offset, r.value) for rs in c.poll(300).values() for r in rs]
    finally:
        c.close()
    assert got == [(i, b"m%d" % i) for i in range(200)]


def test_confluent_idempotent_producer_1000_records(broker, topic_name) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5, "batch.num.messages": 50})
    delivered, failed = [], []

    def on_delivery(err, msg) -> None:
        (failed if err else delivered).append(err or msg.offset())

    for i in range(1000):
        p.produce(topic_name, value=b"r%d" % i, partition=0, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(30) == 0
    assert not failed
    assert sorted(delivered) == list(range(1000))


@pytest.mark.single_broker("speaks the raw protocol to the one broker address")
def test_retried_batch_gets_its_original_offset(broker, topic_name) -> None:
    conn = connect(broker)
    try:
        resp = init_pid(conn)
        assert resp.error_code == 0 and resp.producer_id >= 0 and resp.producer_epoch == 0
        pid = resp.producer_id
        assert produce(conn, topic_name, pbatch(pid, 0)).base_offset == 0
        again = produce(conn, topic_name, pbatch(pid, 0))
        assert (again.error_code, again.base_offset) == (0, 0)
        nxt = produce(conn, topic_name, pbatch(pid, 2))
        assert (nxt.error_code, nxt.base_offset) == (0, 2)  # the retry wrote nothing
        gap = produce(conn, topic_name, pbatch(pid, 7))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(conn, topic_name, pbatch(pid, 0, epoch=1)).base_offset == 4
        stale = produce(conn, topic_name, pbatch(pid, 4, epoch=0))
        assert stale.error_code == INVALID_PRODUCER_EPOCH
        assert produce(conn, topic_name, pbatch(pid, 2, epoch=1)).base_offset == 6
        other = init_pid(conn)
        assert other.producer_id != pid
        # A transactional id goes to its coordinator, which does not exist before the first
        # FindCoordinator for a transactional id.
        tx = init_pid(conn, transactional_id="tx")
        assert tx.error_code == NOT_COORDINATOR and tx.producer_id == -1
    finally:
        conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_duplicate_detected_after_broker_restart(new_broker, sig) -> None:
    b = new_broker({"auto.create.topics.enable": "true"}).start()
    conn = connect(b)
    try:
        pid = init_pid(conn).producer_id
        for seq in range(0, 20, 2):
            assert produce(conn, "idem", pbatch(pid, seq)).base_offset == seq
    finally:
        conn.close()
    b.stop(sig=sig)
    b.start()
    conn = connect(b)
    try:
        again = produce(conn, "idem", pbatch(pid, 18))
        assert (again.error_code, again.base_offset) == (0, 18)
        assert produce(conn, "idem", pbatch(pid, 30)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(conn, "idem", pbatch(pid, 20)).base_offset == 20
        assert init_pid(conn).producer_id > pid  # ids are not reused after a restart
    finally:
        conn.close()
    assert b.stop() == 0


def test_aiokafka_idempotent_producer(broker, topic_name) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def go() -> list[int]:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                             linger_ms=5)
        await p.start()
        try:
            futs = [await p.send(topic_name, value=b"a%d" % i, partition=0) for i in range(300)]
            return [md.offset for md in await asyncio.gather(*futs)]
        finally:
            await p.stop()

    assert asyncio.run(asyncio.wait_for(go(), 30)) == list(range(300))


def test_confluent_idempotent_producer_across_a_broker_restart(new_broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = new_broker({"auto.create.topics.enable": "true"}).start()
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 30000, "reconnect.backoff.ms": 50})
    failed: list = []

    def on_delivery(err, msg) -> None:
        if err:
            failed.append(err)

    for i in range(300):
        p.produce("idem-restart", value=b"r%d" % i, partition=0, on_delivery=on_delivery)
    assert p.flush(30) == 0
    b.stop()
    b.start()
    for i in range(300, 600):
        p.produce("idem-restart", value=b"r%d" % i, partition=0, on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert not failed
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition("idem-restart", 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < 600 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    assert got == [(i, b"r%d" % i) for i in range(600)]
    assert b.stop() == 0
