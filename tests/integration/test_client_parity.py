"""Embedded-mode parity: one scenario suite, run against a broker subprocess (network mode,
``bootstrap.servers``) and against a data directory opened in this process (embedded mode,
``log.dir``), with the same broker settings. Every scenario must give the same answers in
both: offsets, timestamps (LogAppendTime too), keys, headers, compression on disk,
idempotent sequences, auto-created topics, admin calls, errors, retention by size and
numpy columns.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog.client import (
    Admin,
    ConfigResource,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
    aio,
    partition_for_key,
)
from pylog.protocol.messages import FetchRequest
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

# The broker settings of both modes (server.properties names).
BROKER = {
    "num.partitions": "3",
    "auto.create.topics.enable": "true",
    "log.retention.check.interval.ms": "250",
}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Target:
    """Where a scenario's clients go: ``settings`` are the mode's client settings."""

    def __init__(self, mode: str, settings: dict[str, Any]) -> None:
        self.mode = mode
        self.settings = settings

    def cfg(self, **extra: Any) -> dict[str, Any]:
        return {**self.settings, **extra}


@pytest.fixture(scope="module", params=["network", "embedded"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if request.param == "network":
        data = tmp_path_factory.mktemp("parity-network") / "data"
        data.mkdir()
        b = BrokerProcess(data, BROKER).start()
        yield Target("network", {"bootstrap.servers": b.bootstrap})
        rc = b.stop()
        assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"
        return
    data = tmp_path_factory.mktemp("parity-embedded") / "data"
    # An admin held open for the module keeps the directory open between tests (each
    # test's clients share it), as a broker stays up between them in network mode.
    with Admin({"log.dir": str(data), "broker.config": BROKER}) as keep_open:
        yield Target("embedded", {"log.dir": str(data), "broker.config": BROKER})
        assert keep_open.list_topics() is not None


def _consume(target: Target, tps: list[Any], n: int, timeout: float = 20.0,
             **settings: Any) -> list[Any]:
    out: list[Any] = []
    with Consumer(target.cfg(**{"auto.offset.reset": "earliest", **settings})) as c:
        c.assign(tps)
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            out.extend(c.poll(1.0))
    return out


def _raw_batches(target: Target, topic: str, partition: int) -> list[Any]:
    """The stored batches of a partition, as a Fetch answers them (same request in both
    modes, through the consumer's own connection)."""

    async def go() -> list[Any]:
        async with aio.Consumer(target.cfg()) as c:
            cluster = c._core.cluster
            await cluster.update({topic})
            conn = await cluster.connection(cluster.topic(topic).partitions[partition].leader)
            R = FetchRequest
            resp = await conn.send(R(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
                session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                topics=[R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                    partition=partition, fetch_offset=0, partition_max_bytes=1 << 24)])]))
            data = resp.responses[0].partitions[0].records
            return [(b.base_offset, b.last_offset, b.compression, b.producer_id, b.base_sequence,
                     b.timestamp_type) for b in logcore.iter_batches(bytes(data or b""))]

    return asyncio.run(asyncio.wait_for(go(), 60))


# --------------------------------------------------------------------------- records


def test_round_trip_keys_headers_timestamps(target: Target, topic_name: str) -> None:
    base = int(time.time() * 1000) - 60_000
    sent = [(b"key-%d" % i, b"value-%d" % i, [("n", b"%d" % i), ("empty", None)], base + i)
            for i in range(30)]
    with Producer(target.cfg(**{"linger.ms": 5})) as p:
        futs = [p.send(topic_name, v, key=k, headers=h, timestamp_ms=ts) for k, v, h, ts in sent]
        p.flush(30)
        metas = [f.result(0) for f in futs]
    for (k, _, _, ts), m in zip(sent, metas, strict=True):
        assert m.partition == partition_for_key(k, 3) and m.timestamp == ts
    got = _consume(target, [(topic_name, p) for p in range(3)], 30)
    by_key = {r.key: r for r in got}
    assert len(got) == 30 and len(by_key) == 30
    for (k, v, h, ts), m in zip(sent, metas, strict=True):
        r = by_key[k]
        assert (r.value, r.headers, r.timestamp, r.timestamp_type) == (v, h, ts, 0)
        assert (r.partition, r.offset) == (m.partition, m.offset)
    for p in range(3):
        offsets = sorted(r.offset for r in got if r.partition == p)
        assert offsets == list(range(len(offsets)))


def test_log_append_time_topic(target: Target, topic_name: str) -> None:
    with Admin(target.cfg()) as admin:
        admin.create_topics([NewTopic(topic_name, 1, config={
            "message.timestamp.type": "LogAppendTime"})])
    before = int(time.time() * 1000)
    with Producer(target.cfg()) as p:
        meta = p.send(topic_name, b"v", timestamp_ms=1_000).result(30)
    after = int(time.time() * 1000)
    assert before - 1000 <= meta.timestamp <= after + 1000
    (r,) = _consume(target, [(topic_name, 0)], 1)
    assert (r.timestamp, r.timestamp_type) == (meta.timestamp, 1)
    assert [b[5] for b in _raw_batches(target, topic_name, 0)] == ["log_append"]


@pytest.mark.parametrize("codec", CODECS)
def test_compression_types(target: Target, topic_name: str, codec: str) -> None:
    values = [(b"record %d " % i) * (i % 7 + 1) for i in range(300)]
    with Producer(target.cfg(**{"compression.type": codec, "linger.ms": 20})) as p:
        for v in values:
            p.send(topic_name, v, key=b"k", partition=0)
        p.flush(30)
    got = _consume(target, [(topic_name, 0)], 300)
    assert [r.value for r in got] == values
    batches = _raw_batches(target, topic_name, 0)
    assert {b[2] for b in batches} == {codec}
    assert batches[-1][1] == 299


def test_topic_compression_type_rewrites_batches(target: Target, topic_name: str) -> None:
    with Admin(target.cfg()) as admin:
        admin.create_topics([NewTopic(topic_name, 1, config={"compression.type": "zstd"})])
    with Producer(target.cfg(**{"compression.type": "gzip"})) as p:
        for i in range(20):
            p.send(topic_name, b"v%d" % i, partition=0)
        p.flush(30)
    assert [r.value for r in _consume(target, [(topic_name, 0)], 20)] == [
        b"v%d" % i for i in range(20)]
    assert {b[2] for b in _raw_batches(target, topic_name, 0)} == {"zstd"}


def test_idempotent_sequences_on_disk(target: Target, topic_name: str) -> None:
    with Producer(target.cfg(**{"batch.size": 1, "linger.ms": 0})) as p:
        for i in range(5):
            p.send(topic_name, b"v%d" % i, partition=0).result(30)
    with Producer(target.cfg(acks="1")) as p:
        p.send(topic_name, b"plain", partition=0).result(30)
    batches = _raw_batches(target, topic_name, 0)
    idempotent, plain = batches[:5], batches[5]
    assert len({b[3] for b in idempotent}) == 1 and idempotent[0][3] >= 0
    assert [b[4] for b in idempotent] == [0, 1, 2, 3, 4]
    assert (plain[3], plain[4]) == (-1, -1)


def test_poll_columns(target: Target, topic_name: str) -> None:
    with Producer(target.cfg()) as p:
        for i in range(50):
            p.send(topic_name, b"value-%d" % i, key=None if i % 5 == 0 else b"k%d" % i,
                   partition=1, timestamp_ms=1_700_000_000_000 + i)
        p.flush(30)
    tp = TopicPartition(topic_name, 1)
    with Consumer(target.cfg(**{"auto.offset.reset": "earliest"})) as c:
        c.assign([tp])
        rows: list[Any] = []
        deadline = time.monotonic() + 20
        while len(rows) < 50 and time.monotonic() < deadline:
            cols = c.poll_columns(1.0).get(tp)
            if cols is None:
                continue
            for i in range(cols.num_records):
                key = (bytes(cols.key_data[cols.key_offsets[i]:cols.key_offsets[i + 1]])
                       if cols.key_valid[i] else None)
                value = bytes(cols.value_data[cols.value_offsets[i]:cols.value_offsets[i + 1]])
                rows.append((int(cols.offsets[i]), int(cols.timestamps[i]), key, value))
        assert c.position(tp) == 50
    assert rows == [(i, 1_700_000_000_000 + i, None if i % 5 == 0 else b"k%d" % i,
                     b"value-%d" % i) for i in range(50)]


# --------------------------------------------------------------------------- offsets


def test_seek_offsets_for_times_beginning_end(target: Target, topic_name: str) -> None:
    base = int(time.time() * 1000) - 100_000
    with Producer(target.cfg()) as p:
        for i in range(10):
            p.send(topic_name, b"v%d" % i, partition=2, timestamp_ms=base + 1000 * i)
        p.flush(30)
    tp = TopicPartition(topic_name, 2)
    with Consumer(target.cfg(**{"auto.offset.reset": "latest"})) as c:
        c.assign([tp])
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        assert c.offsets_for_times({tp: base + 4500}) == {tp: (5, base + 5000)}
        assert c.offsets_for_times({tp: base + 99_000}) == {tp: None}
        assert c.position(tp) == 10  # latest
        c.seek(tp, 7)
        assert [r.offset for r in c.poll(10)] == [7, 8, 9]
        c.seek_to_beginning(tp)
        assert c.poll(10, max_records=1)[0].offset == 0
        c.seek_to_end(tp)
        assert c.position(tp) == 10
        assert c.poll(0.3) == []


def test_auto_topic_creation_uses_num_partitions(target: Target, topic_name: str) -> None:
    with Consumer(target.cfg()) as c:
        # Consumers do not create topics (the Metadata they send does not allow it).
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            c.end_offsets([(topic_name, 0)], timeout=10)
    with Producer(target.cfg()) as p:
        assert p.partitions_for(topic_name) == [0, 1, 2]
    with Admin(target.cfg()) as admin:
        (desc,) = admin.describe_topics([topic_name]).values()
        assert [d.partition for d in desc.partitions] == [0, 1, 2]
        assert not desc.is_internal
        res = ConfigResource("topic", topic_name)
        assert admin.describe_configs([res])[res]["retention.ms"].source == "DEFAULT_CONFIG"


# --------------------------------------------------------------------------- admin


def test_admin_topics_configs_and_delete_records(target: Target, topic_name: str) -> None:
    res = ConfigResource("topic", topic_name)
    with Admin(target.cfg()) as admin:
        admin.create_topics([NewTopic(topic_name, 2, config={"retention.ms": "86400000"})])
        with pytest.raises(errors.TopicAlreadyExistsError, match=topic_name):
            admin.create_topics([NewTopic(topic_name, 2)])
        with pytest.raises(errors.InvalidConfigError):
            admin.create_topics([NewTopic(topic_name + "-x", 1, config={"retention.ms": "-5"})])
        with pytest.raises(errors.InvalidPartitionsError):
            admin.create_partitions({topic_name: 1})
        admin.create_partitions({topic_name: 3})
        entry = admin.describe_configs([res])[res]["retention.ms"]
        assert (entry.value, entry.source) == ("86400000", "DYNAMIC_TOPIC_CONFIG")
        admin.alter_configs(res, {"retention.ms": "3600000", "cleanup.policy": "delete"})
        assert admin.describe_configs([res])[res]["retention.ms"].value == "3600000"
        admin.alter_configs(res, {"retention.ms": None})
        assert admin.describe_configs([res])[res]["retention.ms"].source == "DEFAULT_CONFIG"
        assert topic_name in admin.list_topics()
        with Producer(target.cfg()) as p:
            for i in range(10):
                p.send(topic_name, b"v%d" % i, partition=0)
            p.flush(30)
        tp = TopicPartition(topic_name, 0)
        assert admin.list_offsets({tp: "latest"})[tp][0] == 10
        assert admin.delete_records({tp: 4}) == {tp: 4}
        assert admin.list_offsets({tp: "earliest"})[tp][0] == 4
        assert [r.offset for r in _consume(target, [tp], 6)] == [4, 5, 6, 7, 8, 9]
        assert admin.describe_topics([topic_name])[topic_name].partitions[2].leader >= 0
        admin.delete_topics([topic_name])
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.delete_topics([topic_name])
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.describe_topics([topic_name])
        cluster = admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [cluster.controller_id]


def test_errors_are_the_brokers(target: Target, topic_name: str) -> None:
    with Admin(target.cfg()) as admin:
        admin.create_topics([NewTopic(topic_name, 1, config={"max.message.bytes": "2000"})])
    with Producer(target.cfg()) as p:
        fut = p.send(topic_name, b"x" * 5000, partition=0)
        with pytest.raises(errors.MessageTooLargeError):
            fut.result(30)
        assert p.send(topic_name, b"small", partition=0).result(30).offset == 0
        with pytest.raises(errors.InvalidTopicError):
            p.send("not a valid name!", b"x")


def test_retention_by_size(target: Target, topic_name: str) -> None:
    with Admin(target.cfg()) as admin:
        admin.create_topics([NewTopic(topic_name, 1, config={
            "segment.bytes": "2048", "retention.bytes": "4096"})])
    with Producer(target.cfg(**{"batch.size": 1, "linger.ms": 0})) as p:
        for i in range(100):
            p.send(topic_name, b"%03d" % i * 60, partition=0)
        p.flush(30)
    tp = TopicPartition(topic_name, 0)
    # Each record's batch takes about 250 bytes on disk; retention leaves at most
    # retention.bytes plus the active segment (Kafka's rule: whole segments go while the
    # log stays above retention.bytes). Retention runs every 250 ms, possibly while the
    # records were still coming: wait for a pass after the last one.
    most = (4096 + 2048) // 180
    with Consumer(target.cfg(**{"auto.offset.reset": "earliest"})) as c:
        deadline = time.monotonic() + 30
        start = 0
        while time.monotonic() < deadline:
            start = c.beginning_offsets([tp])[tp]
            if 100 - start <= most:
                break
            time.sleep(0.2)
        assert 0 < 100 - start <= most, f"retention left offsets {start}-99"
        c.assign([tp])
        got: list[Any] = []
        while len(got) < 100 - start and time.monotonic() < deadline:
            got.extend(c.poll(1.0))
    assert [r.offset for r in got] == list(range(start, 100))
    assert [r.value for r in got] == [b"%03d" % i * 60 for i in range(start, 100)]
