"""Fetch semantics: long poll woken by appends, max_wait_ms=0, KIP-74, byte limits,
seeks and offsets for times through real clients."""

from __future__ import annotations

import threading
import time

import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import CreateTopicsRequest, FetchRequest, ProduceRequest


def _conn(broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=20)


def _create(conn, name, partitions=1, configs=None) -> None:
    R = CreateTopicsRequest
    resp = conn.request(R(topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000))
    assert resp.topics[0].error_code == 0


def _produce(conn, topic, records, partition=0) -> int:
    R = ProduceRequest
    resp = conn.request(R(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=partition, records=records)])]))
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0
    return p.base_offset


def _batch(n: int, size: int = 10, ts: int | None = None) -> bytes:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(bytes([65 + i % 26]) * size, timestamp_ms=ts)
    return b.build()


def _fetch(conn, parts, *, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20):
    """parts: [(topic, partition, offset, partition_max_bytes)]"""
    R = FetchRequest
    topics: dict[str, list] = {}
    for topic, p, offset, pmax in parts:
        topics.setdefault(topic, []).append(R.FetchPartition(
            partition=p, fetch_offset=offset, partition_max_bytes=pmax, log_start_offset=-1,
            current_leader_epoch=-1))
    resp = conn.request(R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                          isolation_level=0, session_id=0, session_epoch=-1,
                          topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                          forgotten_topics_data=[], rack_id=""))
    return [p for t in resp.responses for p in t.partitions]


@pytest.mark.single_broker("speaks the raw protocol to the one broker address")
def test_long_poll_is_woken_by_append_not_timeout(broker, topic_name) -> None:
    consumer, producer = _conn(broker), _conn(broker)
    try:
        _create(consumer, topic_name, partitions=2)
        result = {}

        def poll() -> None:
            t0 = time.monotonic()
            result["parts"] = _fetch(consumer, [(topic_name, 0, 0, 1 << 20), (topic_name, 1, 0, 1 << 20)],
                                     max_wait_ms=10_000, min_bytes=1)
            result["elapsed"] = time.monotonic() - t0

        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.3)
        t_append = time.monotonic()
        _produce(producer, topic_name, _batch(3), partition=1)
        th.join(15)
        woke = time.monotonic() - t_append
        assert not th.is_alive()
        assert result["elapsed"] >= 0.25  # it did wait
        assert woke < 2.0, f"fetch answered {woke:.3f}s after the append"
        data = [p for p in result["parts"] if p.partition_index == 1][0]
        assert data.high_watermark == 3 and len(data.records) > 0
    finally:
        consumer.close()
        producer.close()


@pytest.mark.single_broker("speaks the raw protocol to the one broker address")
def test_max_wait_zero_and_min_bytes_timeout(broker, topic_name) -> None:
    conn = _conn(broker)
    try:
        _create(conn, topic_name)
        t0 = time.monotonic()
        (p,) = _fetch(conn, [(topic_name, 0, 0, 1 << 20)], max_wait_ms=0, min_bytes=1)
        assert time.monotonic() - t0 < 1.5 and p.error_code == 0 and len(p.records) == 0
        _produce(conn, topic_name, _batch(2))
        t0 = time.monotonic()
        (p,) = _fetch(conn, [(topic_name, 0, 0, 1 << 20)], max_wait_ms=400, min_bytes=1_000_000)
        elapsed = time.monotonic() - t0
        assert 0.35 <= elapsed < 3.0  # waited for min_bytes until max_wait_ms, then answered
        assert len(p.records) > 0
    finally:
        conn.close()


@pytest.mark.single_broker("speaks the raw protocol to the one broker address")
def test_kip74_byte_limits_and_whole_batches(broker, topic_name) -> None:
    conn = _conn(broker)
    try:
        _create(conn, topic_name, partitions=2)
        big = _batch(10, size=1000)  # ~10 KB in one batch
        for _ in range(3):
            _produce(conn, topic_name, big, partition=0)
            _produce(conn, topic_name, big, partition=1)
        size = len(big)
        # partition_max_bytes smaller than one batch: the first partition still gets one batch.
        p0, p1 = _fetch(conn, [(topic_name, 0, 0, 100), (topic_name, 1, 0, 100)])
        assert len(p0.records) == size and len(p1.records) == 0
        assert p1.high_watermark == 30
        # partition_max_bytes of two batches: two whole batches, never a cut one.
        (p0,) = _fetch(conn, [(topic_name, 0, 0, 2 * size + 10)])
        assert len(p0.records) == 2 * size
        # response max_bytes: shared by the partitions, in order.
        p0, p1 = _fetch(conn, [(topic_name, 0, 0, 1 << 20), (topic_name, 1, 0, 1 << 20)],
                        max_bytes=size + size // 2)
        assert len(p0.records) == size and len(p1.records) == 0
        # A fetch offset inside a batch returns that whole batch.
        (p0,) = _fetch(conn, [(topic_name, 0, 15, 1 << 20)])
        first = next(iter(logcore.iter_batches(bytes(p0.records))))
        assert first.base_offset == 10
    finally:
        conn.close()


def test_seeks_and_offsets_for_times_kafka_python(broker, topic_name) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    base = 1_700_000_000_000
    now = int(time.time() * 1000)
    # acks=all: against a cluster (PYLOG_TEST_CLUSTER) LATEST is the high watermark, which an
    # acks=1 answer comes before.
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, acks="all")
    for i in range(30):
        p.send(topic_name, value=b"%d" % i, partition=0, timestamp_ms=now - 30_000 + i * 1000)
    p.flush(10)
    p.close(5)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    tp = TopicPartition(topic_name, 0)
    try:
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp) == 30
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        c.seek(tp, 17)
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 13 and time.monotonic() < deadline:
            for rs in c.poll(300).values():
                got += [r.offset for r in rs]
        assert got == list(range(17, 30))
        found = c.offsets_for_times({tp: now - 30_000 + 12_500})[tp]
        assert (found.offset, found.timestamp) == (13, now - 30_000 + 13_000)
        assert c.offsets_for_times({tp: now + 60_000})[tp] is None
        assert c.beginning_offsets([tp])[tp] == 0 and c.end_offsets([tp])[tp] == 30
        del base
    finally:
        c.close()


def test_offsets_for_times_and_max_timestamp_confluent(broker, topic_name) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    now = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    stamps = [now - 50_000, now - 10_000, now - 40_000, now - 20_000]
    for i, ts in enumerate(stamps):
        p.produce(topic_name, value=b"%d" % i, partition=0, timestamp=ts)
        p.flush(5)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "enable.auto.commit": False})
    try:
        (tp,) = c.offsets_for_times([TopicPartition(topic_name, 0, now - 30_000)], timeout=10)
        assert tp.offset == 1
        lo, hi = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (lo, hi) == (0, 4)
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.max_timestamp()})
    (info,) = [f.result(10) for f in fut.values()]
    assert (info.offset, info.timestamp) == (1, now - 10_000)


@pytest.mark.single_broker("reads the partition's segment file in the broker's data dir")
def test_max_timestamp_inside_a_batch_names_the_record_confluent(broker, topic_name) -> None:
    """The largest timestamp in the middle of a produced batch: ListOffsets MAX_TIMESTAMP
    names that record (Kafka >= 3.8), while the time index keeps the batch's last offset."""
    from _harness.kafka_format import read_batches
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    now = int(time.time() * 1000)
    stamps = [now - 50_000, now - 20_000, now - 5_000, now - 30_000, now - 40_000]
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500})
    # The partition's leader known first: with the topic unknown (auto-created by the first
    # send), a loaded machine saw librdkafka send the five records as five batches.
    p.list_topics(topic_name, timeout=30)
    for i, ts in enumerate(stamps):
        p.produce(topic_name, value=b"%d" % i, partition=0, timestamp=ts)
    assert p.flush(10) == 0
    log = broker.data_dir / f"{topic_name}-0" / f"{0:020d}.log"
    batches, _end = read_batches(str(log))
    assert [(b.base_offset, b.last_offset, b.max_timestamp) for b in batches] == [
        (0, 4, now - 5_000)]  # one batch: the record is inside it
    fut = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.max_timestamp()})
    (info,) = [f.result(10) for f in fut.values()]
    assert (info.offset, info.timestamp) == (2, now - 5_000)


@pytest.mark.timeout(60)
def test_aiokafka_long_poll_consumer_sees_new_records_quickly(broker, topic_name) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def go() -> float:
        prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await prod.start()
        await prod.send_and_wait(topic_name, b"first", partition=0)
        cons = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                fetch_max_wait_ms=5000)
        await cons.start()
        try:
            tp = TopicPartition(topic_name, 0)
            cons.assign([tp])
            cons.seek(tp, 1)
            getter = asyncio.ensure_future(cons.getone())
            await asyncio.sleep(0.5)
            t0 = time.monotonic()
            await prod.send_and_wait(topic_name, b"second", partition=0)
            msg = await asyncio.wait_for(getter, 10)
            assert msg.value == b"second"
            return time.monotonic() - t0
        finally:
            await cons.stop()
            await prod.stop()

    latency = asyncio.run(asyncio.wait_for(go(), 30))
    assert latency < 2.0  # far below fetch_max_wait_ms: the append woke the fetch


@pytest.mark.single_broker("speaks the raw protocol to the one broker address")
@pytest.mark.parametrize("bad", ["unknown-topic", "unknown-partition", "offset-out-of-range"])
def test_fetch_with_an_erroring_partition_answers_at_once(broker, topic_name, bad) -> None:
    """Kafka answers a fetch at once when any partition has an error, with the others' data;
    it must not hold the error for max_wait_ms."""
    conn = _conn(broker)
    try:
        _create(conn, topic_name)
        _produce(conn, topic_name, _batch(2))
        wrong = {
            "unknown-topic": (f"{topic_name}-missing", 0, 0, 1 << 20),
            "unknown-partition": (topic_name, 7, 0, 1 << 20),
            "offset-out-of-range": (topic_name, 0, 999, 1 << 20),
        }[bad]
        good = (topic_name, 0, 0, 1 << 20)
        parts = [good] if bad == "offset-out-of-range" else [good, wrong]
        if bad == "offset-out-of-range":
            # Two entries cannot name one partition: the good data comes from a second topic.
            other = f"{topic_name}-b"
            _create(conn, other)
            _produce(conn, other, _batch(2))
            parts = [(other, 0, 0, 1 << 20), wrong]
        t0 = time.monotonic()
        got = _fetch(conn, parts, max_wait_ms=10_000, min_bytes=1 << 20)
        elapsed = time.monotonic() - t0
        assert elapsed < 2.0, f"answered after {elapsed:.2f} s (max_wait_ms=10000)"
        codes = sorted(p.error_code for p in got)
        expected = {"unknown-topic": 3, "unknown-partition": 3, "offset-out-of-range": 1}[bad]
        assert codes == [0, expected]
        ok = [p for p in got if p.error_code == 0][0]
        assert ok.high_watermark == 2 and len(ok.records) > 0
    finally:
        conn.close()


def test_per_fetch_timings_are_logged_at_debug(new_broker, topic_name) -> None:
    """The per-request and per-fetch debug lines say whether a fetch waited and why; a
    fetch that has data is answered at once, one with none waits out max_wait_ms."""
    b = new_broker({"auto.create.topics.enable": "true"})
    b.extra_args = ["--log-level", "DEBUG"]
    b.start()
    conn = _conn(b)
    try:
        _create(conn, topic_name, partitions=2)
        _produce(conn, topic_name, _batch(3), partition=1)
        _fetch(conn, [(topic_name, 0, 0, 1 << 20), (topic_name, 1, 0, 1 << 20)], max_wait_ms=5000)
        _fetch(conn, [(topic_name, 0, 0, 1 << 20)], max_wait_ms=200)
    finally:
        conn.close()
    assert b.stop() == 0
    lines = [line for line in b.read_log().splitlines() if "pylog.broker.fetch: fetch from" in line]
    assert len(lines) == 2, lines
    assert "answered at once" in lines[0] and "2 partitions" in lines[0]
    assert "waited out max_wait_ms" in lines[1] and "0 bytes" in lines[1]
    assert any("Fetch v" in line and "queued" in line and "idle" in line
               for line in b.read_log().splitlines())
