"""pylog.client's public API against a real broker: producer, consumer, admin, asyncio.

Tests taking ``any_broker`` run against pylog's broker and then Tansu (an independent
Kafka-compatible broker; tests/_harness/tansu.py): what they check holds for any broker."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from _harness.tansu import skip_if_tansu_lacks

from pylog import errors
from pylog.client import (
    Admin,
    ClientClosedError,
    ConfigError,
    ConfigResource,
    Consumer,
    IllegalStateError,
    KafkaTimeoutError,
    NewTopic,
    NoOffsetForPartitionError,
    Producer,
    RecordTooLargeError,
    TopicPartition,
    aio,
)

# --------------------------------------------------------------------------- producer


def test_send_flush_callbacks_and_metadata(any_broker, topic_name) -> None:
    seen: list = []
    done = threading.Event()

    def cb(err, meta) -> None:
        seen.append((err, meta))
        if len(seen) == 50:
            done.set()

    with Producer({"bootstrap.servers": any_broker.bootstrap, "linger.ms": 20}) as p:
        futs = [p.send(topic_name, b"v%d" % i, partition=0, timestamp_ms=1_600_000_000_000 + i,
                       on_delivery=cb) for i in range(50)]
        p.flush(30)
        assert done.wait(10)
        metas = [f.result() for f in futs]
    assert [m.offset for m in metas] == list(range(50))
    assert metas[3].timestamp == 1_600_000_000_003 and metas[3].topic == topic_name
    assert metas[3].serialized_key_size == -1 and metas[3].serialized_value_size == 2
    assert sorted(m.offset for e, m in seen if e is None) == list(range(50))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(any_broker, topic_name, acks) -> None:
    with Producer(bootstrap_servers=any_broker.bootstrap, acks=acks) as p:
        assert p.settings["enable.idempotence"] is (acks == "all")
        metas = [p.send(topic_name, b"x", partition=0) for _ in range(20)]
        p.flush(30)
        offsets = [f.result().offset for f in metas]
    assert offsets == ([-1] * 20 if acks == "0" else list(range(20)))
    with Consumer(bootstrap_servers=any_broker.bootstrap, auto_offset_reset="earliest") as c:
        tp = TopicPartition(topic_name, 0)
        c.assign([tp])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(1)
        assert [r.offset for r in got] == list(range(20))
        end = c.end_offsets([tp])[tp]
        skip_if_tansu_lacks(any_broker, end != 20, f"answers ListOffsets LATEST with {end} after 20 "
                            "records (its last batch's base offset + 1, not the high watermark)")
        assert end == 20


def test_serializers_and_header_forms(any_broker, topic_name) -> None:
    with Producer(bootstrap_servers=any_broker.bootstrap, value_serializer=str.encode,
                  key_serializer=lambda k: None if k is None else str(k).encode()) as p:
        p.send(topic_name, "héllo", key=42, headers={"a": b"1"}, partition=0).result(30)
    with Consumer(bootstrap_servers=any_broker.bootstrap, auto_offset_reset="earliest",
                  value_deserializer=bytes.decode) as c:
        c.assign([(topic_name, 0)])
        (r,) = c.poll(10)
    assert (r.key, r.value, r.headers) == (b"42", "héllo", [("a", b"1")])


def test_bad_sends_fail_clearly(any_broker, topic_name) -> None:
    with Producer(bootstrap_servers=any_broker.bootstrap, max_request_size=1000) as p:
        with pytest.raises(TypeError, match="value must be bytes"):
            p.send(topic_name, "text")
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            p.send(topic_name, b"x" * 2000)
        with pytest.raises(ValueError, match="partition 5 is not in topic"):
            p.send(topic_name, b"x", partition=5)
        with pytest.raises(errors.InvalidTopicError):
            p.send("bad topic name!", b"x")
        p.send(topic_name, b"ok").result(30)
    with pytest.raises(ClientClosedError):
        p.send(topic_name, b"late")
    p.close()  # twice is fine


def test_unknown_setting_names_the_closest(broker) -> None:
    with pytest.raises(ConfigError, match="did you mean 'batch_size'"):
        Producer(bootstrap_servers=broker.bootstrap, batch_sise=10)
    with pytest.raises(ConfigError, match="did you mean 'auto.offset.reset'"):
        Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.rest": "earliest"})


def test_blocking_call_inside_a_callback_is_refused(broker, topic_name) -> None:
    errs: list = []
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        def cb(err, meta) -> None:
            try:
                p.flush()
            except IllegalStateError as exc:
                errs.append(exc)

        p.send(topic_name, b"x", on_delivery=cb).result(30)
        deadline = time.monotonic() + 5
        while not errs and time.monotonic() < deadline:
            time.sleep(0.01)
    assert errs and "deadlock" in str(errs[0])


# --------------------------------------------------------------------------- consumer


def _fill(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=10) as p:
        for i in range(n):
            p.send(topic, b"m%d" % i, key=b"k", partition=partition,
                   timestamp_ms=1_700_000_000_000 + 1000 * i)
        p.flush(30)


def test_reset_seek_position_and_max_records(broker, topic_name) -> None:
    _fill(broker.bootstrap, topic_name, 30)
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:  # latest by default
        c.assign([tp])
        assert c.position(tp) == 30
        assert c.poll(0.3) == []
        c.seek(tp, 10)
        recs = c.poll(10, max_records=5)
        assert [r.offset for r in recs] == [10, 11, 12, 13, 14]
        assert c.position(tp) == 15
        c.seek_to_beginning()
        assert c.position(tp) == 0
        got = []
        while len(got) < 30:
            got += c.poll(10)
        assert [r.value for r in got] == [b"m%d" % i for i in range(30)]
        assert c.highwater(tp) == 30
        c.seek_to_end(tp)
        assert c.position(tp) == 30
        assert c.offsets_for_times({tp: 1_700_000_000_000 + 5500}) == {
            tp: (6, 1_700_000_000_000 + 6000)}
        assert c.offsets_for_times({tp: 1_900_000_000_000}) == {tp: None}
        assert c.beginning_offsets([tp]) == {tp: 0}
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(NoOffsetForPartitionError, match="auto.offset.reset is none"):
            c.poll(1)
        c.seek(tp, 28)
        assert [r.offset for r in c.poll(10)] == [28, 29]


def test_out_of_range_position_is_reset(broker, topic_name) -> None:
    _fill(broker.bootstrap, topic_name, 20)
    tp = TopicPartition(topic_name, 0)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.delete_records({tp: 12}) == {tp: 12}
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 3)  # below the log start offset now
        recs = c.poll(10)
        assert recs and recs[0].offset == 12
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 3)
        with pytest.raises(NoOffsetForPartitionError, match="out of range"):
            for _ in range(20):
                c.poll(0.5)


def test_iteration_pause_and_columns(any_broker, topic_name) -> None:
    _fill(any_broker.bootstrap, topic_name, 10, partition=0)
    _fill(any_broker.bootstrap, topic_name + "-b", 5, partition=0)
    a, b = TopicPartition(topic_name, 0), TopicPartition(topic_name + "-b", 0)
    with Consumer(bootstrap_servers=any_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([a, b])
        c.pause(b)
        assert c.paused() == {b}
        it = iter(c)
        first = [next(it) for _ in range(10)]
        assert {r.topic for r in first} == {topic_name}
        assert c.position(a) == 10
        c.resume(b)
        cols = {}
        deadline = time.monotonic() + 10
        while b not in cols and time.monotonic() < deadline:
            cols.update(c.poll_columns(1))
        col = cols[b]
        assert list(col.offsets) == [0, 1, 2, 3, 4] and c.position(b) == 5
        values = [bytes(col.value_data[col.value_offsets[i]:col.value_offsets[i + 1]])
                  for i in range(col.num_records)]
        assert values == [b"m%d" % i for i in range(5)]


def test_poll_needs_an_assignment_or_a_subscription(broker) -> None:
    with Consumer({"bootstrap.servers": broker.bootstrap}) as c:
        with pytest.raises(errors.InvalidGroupIdError, match="group.id"):
            c.subscribe(["t"])
        with pytest.raises(errors.InvalidGroupIdError, match="group.id"):
            c.committed([("t", 0)])
        with pytest.raises(IllegalStateError, match="before assign"):
            c.poll(0.1)
        with pytest.raises(IllegalStateError, match="not assigned"):
            c.position(("t", 0))


# --------------------------------------------------------------------------- admin


def test_admin_topics_configs_and_cluster(broker, topic_name) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, config={"retention.ms": "3600000"})])
        with pytest.raises(errors.TopicAlreadyExistsError, match=topic_name):
            admin.create_topics([topic_name])
        assert topic_name in admin.list_topics()
        desc = admin.describe_topics([topic_name])[topic_name]
        assert [p.partition for p in desc.partitions] == [0, 1]
        with pytest.raises(errors.InvalidPartitionsError):
            admin.create_partitions({topic_name: 1})
        admin.create_partitions({topic_name: 4})
        assert len(admin.describe_topics([topic_name])[topic_name].partitions) == 4
        res = ConfigResource("topic", topic_name)
        assert admin.describe_configs([res])[res]["retention.ms"].value == "3600000"
        admin.alter_configs(res, {"retention.ms": "7200000", "segment.ms": "600000"})
        cfg = admin.describe_configs([res])[res]
        assert cfg["retention.ms"].value == "7200000"
        assert cfg["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
        admin.alter_configs(res, {"retention.ms": None})  # back to the default
        assert admin.describe_configs([res])[res]["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
        broker_cfg = admin.describe_configs([("broker", "0")])
        assert broker_cfg[ConfigResource("broker", "0")]["num.partitions"].value == "1"
        cluster = admin.describe_cluster()
        assert cluster.controller_id == 0 and cluster.brokers[0].port == broker.port
        offsets = admin.list_offsets({(topic_name, 0): "earliest", (topic_name, 1): "latest"})
        assert offsets[TopicPartition(topic_name, 0)][0] == 0
        admin.delete_topics([topic_name])
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.delete_topics([topic_name])


# --------------------------------------------------------------------------- asyncio


def test_asyncio_producer_and_consumer(broker, topic_name) -> None:
    async def go() -> None:
        async with aio.Producer({"bootstrap.servers": broker.bootstrap}) as p:
            futs = [await p.send(topic_name, b"a%d" % i, partition=0) for i in range(100)]
            meta = await p.send_and_wait(topic_name, b"last", partition=0)
            assert meta.offset == 100
            assert [(await f).offset for f in futs] == list(range(100))
            assert await p.partitions_for(topic_name) == [0]
        async with aio.Consumer(bootstrap_servers=broker.bootstrap,
                                auto_offset_reset="earliest") as c:
            await c.assign([(topic_name, 0)])
            got = []
            while len(got) < 101:
                got += await c.poll(5)
            assert got[-1].value == b"last" and await c.position((topic_name, 0)) == 101
            c.seek((topic_name, 0), 50)
            cols = await c.poll_columns(5)
            assert cols[TopicPartition(topic_name, 0)].offsets[0] == 50
        async with aio.Admin(bootstrap_servers=broker.bootstrap) as admin:
            assert (await admin.describe_cluster()).controller_id == 0

    asyncio.run(asyncio.wait_for(go(), 60))


def test_asyncio_back_pressure_times_out(new_broker, topic_name) -> None:
    b = new_broker({"auto.create.topics.enable": "true"}).start()

    async def go() -> None:
        p = aio.Producer(bootstrap_servers=b.bootstrap, buffer_memory=20_000, max_block_ms=500)
        try:
            await p.send_and_wait(topic_name, b"first")
            b.stop()
            with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
                for _ in range(100):
                    await p.send(topic_name, b"x" * 1000)
        finally:
            started = time.monotonic()
            await p.close(timeout=1)
            # close() keeps to its timeout with the broker gone (it once ran on until
            # delivery.timeout.ms when a cancel of the sender loop was swallowed).
            assert time.monotonic() - started < 10

    asyncio.run(asyncio.wait_for(go(), 60))


# --------------------------------------------------------------------------- docs


def _doc_blocks() -> list[str]:
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("index", range(len(_doc_blocks())))
def test_docs_examples_run(broker, index, capsys) -> None:
    """Every Python example of docs/client.md runs as written (against this test's broker)."""
    code = _doc_blocks()[index].replace("127.0.0.1:9092", broker.bootstrap)
    exec(compile(code, f"docs/client.md example {index}", "exec"), {"__name__": "__doc__"})
