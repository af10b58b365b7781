"""pylog.client against other clients through a real broker, every codec, byte-exact.

Records written by our producer are read by confluent-kafka (librdkafka) and kafka-python
consumers; records written by those producers are read by our consumer, as records and as
columns. Keys, null keys and values, empty values, headers (with None values), explicit
timestamps.
"""

from __future__ import annotations

import time

import pytest
from _harness.kafka_python import close_producer

from pylog.client import Consumer, Producer, TopicPartition

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 150


def _records(none_headers: bool = True):
    out = []
    for i in range(N):
        key = f"key-{i % 7}".encode() if i % 5 else None
        if i % 11 == 3 and key is not None:  # kafka-python needs a key or a value
            value = None
        elif i % 13 == 4:
            value = b""
        else:
            value = f"value-{i}-".encode() + bytes(range(i % 256)) * 3
        headers = [("h1", f"x{i}".encode()), ("empty", b"")] if i % 3 else []
        if i % 17 == 5 and none_headers:
            headers.append(("none", None))
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def _norm_headers(h):
    return [(k, bytes(v) if v is not None else None) for k, v in (h or [])]


def _expected(records):
    return [(i, k, v, _norm_headers(h), ts) for i, (k, v, h, ts) in enumerate(records)]


# --- other clients ------------------------------------------------------------------------


def consume_confluent(bootstrap: str, topic: str, n: int):
    from confluent_kafka import Consumer as CK
    from confluent_kafka import TopicPartition as CTP

    c = CK({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100})
    c.assign([CTP(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value(), _norm_headers(m.headers()),
                        m.timestamp()[1]))
    finally:
        c.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, n: int):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    tp = KTP(topic, 0)
    got = []
    deadline = time.monotonic() + 30
    try:
        c.assign([tp])
        c.seek(tp, 0)
        while len(got) < n and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += [(r.offset, r.key, r.value, _norm_headers(r.headers), r.timestamp)
                        for r in records]
    finally:
        c.close()
    return got


def produce_confluent(bootstrap: str, topic: str, codec: str, records) -> None:
    from confluent_kafka import Producer as CP

    p = CP({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    errs = []
    for key, value, headers, ts in records:
        p.produce(topic, key=key, value=value, headers=headers or None, partition=0,
                  timestamp=ts, on_delivery=lambda err, msg: errs.append(err) if err else None)
    assert p.flush(30) == 0
    assert not errs


def produce_kafka_python(bootstrap: str, topic: str, codec: str, records) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                      compression_type=None if codec == "none" else codec)
    try:
        futures = [p.send(topic, key=k, value=v, headers=h, partition=0, timestamp_ms=ts)
                   for k, v, h, ts in records]
        p.flush(30)
        assert [f.get(10).offset for f in futures] == list(range(len(records)))
    finally:
        close_producer(p, 5)


# --- ours ---------------------------------------------------------------------------------


def produce_pylog(bootstrap: str, topic: str, codec: str, records) -> None:
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec}) as p:
        futs = [p.send(topic, v, key=k, headers=h, partition=0, timestamp_ms=ts)
                for k, v, h, ts in records]
        p.flush(30)
        assert [f.result(10).offset for f in futs] == list(range(len(records)))


def consume_pylog(bootstrap: str, topic: str, n: int):
    got = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "fetch.max.wait.ms": 100}) as c:
        c.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got += [(r.offset, r.key, r.value, _norm_headers(r.headers), r.timestamp)
                    for r in c.poll(0.5)]
    return got


def consume_pylog_columns(bootstrap: str, topic: str, n: int):
    got = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "fetch.max.wait.ms": 100}) as c:
        c.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for cols in c.poll_columns(0.5).values():
                for i in range(cols.num_records):
                    k = (bytes(cols.key_data[cols.key_offsets[i]:cols.key_offsets[i + 1]])
                         if cols.key_valid[i] else None)
                    v = (bytes(cols.value_data[cols.value_offsets[i]:cols.value_offsets[i + 1]])
                         if cols.value_valid[i] else None)
                    got.append((int(cols.offsets[i]), k, v, int(cols.header_counts[i]),
                                int(cols.timestamps[i])))
    return got


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader", ["confluent", "kafka-python"])
def test_pylog_producer_read_by_other_clients(broker, topic_name, codec, reader) -> None:
    records = _records()
    produce_pylog(broker.bootstrap, topic_name, codec, records)
    consume = consume_confluent if reader == "confluent" else consume_kafka_python
    assert consume(broker.bootstrap, topic_name, N) == _expected(records)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer", ["confluent", "kafka-python"])
def test_other_producers_read_by_pylog_consumer(broker, topic_name, codec, writer) -> None:
    records = _records(none_headers=writer != "kafka-python")  # it refuses None values
    produce = produce_confluent if writer == "confluent" else produce_kafka_python
    produce(broker.bootstrap, topic_name, codec, records)
    assert consume_pylog(broker.bootstrap, topic_name, N) == _expected(records)
    cols = consume_pylog_columns(broker.bootstrap, topic_name, N)
    assert cols == [(o, k, v, len(h), ts) for o, k, v, h, ts in _expected(records)]


def test_keyed_placement_equals_librdkafka_and_kafka_python(broker, topic_name) -> None:
    """The same keys land on the same partitions whichever client wrote them (librdkafka's
    murmur2_random partitioner is the Java client's default)."""
    import warnings

    from confluent_kafka import Producer as CP

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from kafka.partitioner.default import murmur2 as kp_murmur2

    from pylog.client import Admin, NewTopic

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, num_partitions=7)])
    keys = [b"user-%d" % i for i in range(300)] + [bytes([i]) * (i % 9) for i in range(1, 60)]
    theirs: dict[bytes, int] = {}
    p = CP({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for k in keys:
        p.produce(topic_name, key=k, value=b"x",
                  on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()))
    assert p.flush(30) == 0
    with Producer(bootstrap_servers=broker.bootstrap) as ours:
        futs = {k: ours.send(topic_name, b"y", key=k) for k in keys}
        ours.flush(30)
        placed = {k: f.result().partition for k, f in futs.items()}
    assert placed == theirs
    assert placed == {k: (kp_murmur2(bytearray(k)) & 0x7FFFFFFF) % 7 for k in keys}
