"""Embedded mode (``log_dir=``) on its own: consumer groups through the in-process group
coordinator, the data directory shared by the clients of one process and refused to other
processes, and a broker started on a directory embedded clients wrote (same layout, read by
confluent-kafka). The scenarios both modes share are in test_client_parity.py."""

from __future__ import annotations

import asyncio
import os
import pathlib
import subprocess
import sys
import textwrap
import time
from typing import Any

import confluent_kafka
import pytest

from pylog import errors
from pylog.client import (
    Admin,
    ConfigError,
    Consumer,
    IllegalStateError,
    LogDirInUseError,
    NewTopic,
    Producer,
    TopicPartition,
    aio,
)
from pylog.client.aio import _embedded
from tests.integration.conftest import REPO, BrokerProcess

pytestmark = pytest.mark.integration


def _drain(c: Consumer, n: int, timeout: float = 20.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(0.5))
    return out


def _open_dirs() -> dict[str, int]:
    return {path: eb.refs for path, eb in _embedded._OPEN.items()}


# --------------------------------------------------------------------------- groups


def test_auto_commit_in_embedded_mode(tmp_path: pathlib.Path) -> None:
    """enable.auto.commit (the default) commits consumed positions from poll every
    auto.commit.interval.ms and on close, in embedded mode as over TCP."""
    cfg = {"log.dir": str(tmp_path / "data")}
    with Producer(cfg) as p:
        for i in range(30):
            p.send("clicks", b"click %d" % i)
        p.flush(30)
    group = {**cfg, "group.id": "auto", "auto.offset.reset": "earliest",
             "auto.commit.interval.ms": 200}
    with Consumer(group) as c:
        c.subscribe(["clicks"])
        assert len(_drain(c, 30)) == 30
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the interval passes during poll
            c.poll(0.3)
            got = c.committed([("clicks", 0)])[("clicks", 0)]
            if got is not None and got.offset == 30:
                break
        assert got is not None and got.offset == 30, got
    with Producer(cfg) as p:
        for i in range(5):
            p.send("clicks", b"late %d" % i)
        p.flush(30)
    with Consumer({**group, "auto.commit.interval.ms": 60_000}) as c:
        c.subscribe(["clicks"])
        assert [r.value for r in _drain(c, 5)] == [b"late %d" % i for i in range(5)]
    # Closing committed the last five (the interval had not passed).
    with Consumer(group) as c:
        assert c.committed([("clicks", 0)])[("clicks", 0)].offset == 35


def test_commits_survive_reopen(tmp_path: pathlib.Path) -> None:
    d = str(tmp_path / "data")
    cfg = {"log.dir": d, "broker.config": {"num.partitions": 3}}
    with Producer(cfg) as p:
        for i in range(60):
            p.send("orders", b"order %d" % i, key=b"%d" % i)
        p.flush(30)
    group = {**cfg, "group.id": "billing", "auto.offset.reset": "earliest"}
    with Consumer(group) as c:
        c.subscribe(["orders"])
        first = _drain(c, 25)
        c.commit()
        committed = c.committed([("orders", p) for p in range(3)])
        assert sum(o.offset for o in committed.values() if o is not None) == len(first)
    assert _open_dirs() == {}  # the last client closed the directory
    assert (tmp_path / "data" / "orders-0" / ".kafka_cleanshutdown").exists()
    with Consumer(group) as c:
        assert c.committed([("orders", p) for p in range(3)]) == committed
        c.subscribe(["orders"])
        rest = _drain(c, 60 - len(first))
        assert c.poll(0.3) == []
        c.commit()
    seen = sorted((r.partition, r.offset) for r in first + rest)
    assert len(seen) == 60 and len(set(seen)) == 60  # nothing lost, nothing twice
    # assign() with a group.id starts from the committed offsets too (Kafka's consumer).
    with Consumer(group) as c:
        c.assign([("orders", 0)])
        assert c.position(("orders", 0)) == c.committed([("orders", 0)])[
            TopicPartition("orders", 0)].offset == sum(1 for r in first + rest if r.partition == 0)
        c.commit({("orders", 0): 2})
        assert c.committed([("orders", 0)])[TopicPartition("orders", 0)].offset == 2
        c.commit({("orders", 0): 5}, asynchronous=True)
        deadline = time.monotonic() + 20
        while c.committed([("orders", 0)])[TopicPartition("orders", 0)].offset != 5:
            assert time.monotonic() < deadline, "the asynchronous commit did not land"
            time.sleep(0.05)
        c.seek_to_beginning()
        assert c.position(("orders", 0)) == 0  # an explicit reset wins over the commit


def _poll_until(consumers: list[Consumer], done: Any, timeout: float = 30.0) -> None:
    """Poll every consumer, each in a thread of its own (a member rejoins from its own
    poll, as Kafka's do), until ``done()``."""
    import threading

    stop = threading.Event()

    def run(c: Consumer) -> None:
        while not stop.is_set():
            c.poll(0.1)

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert done()


def test_subscribe_pattern_listener_and_group_members_in_one_process(
        tmp_path: pathlib.Path) -> None:
    cfg = {"log.dir": str(tmp_path / "data"), "metadata.max.age.ms": 200}
    events: list[tuple[str, list[TopicPartition]]] = []

    class Listener:
        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            events.append(("assigned", sorted(partitions)))

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            events.append(("revoked", sorted(partitions)))
            if partitions:
                c.commit()  # the listener may call the consumer (it runs in poll's thread)

    def send(topic: str, value: bytes) -> None:
        # A producer of its own each time: a producer keeps asking for the metadata of
        # the topics it wrote to, which recreates a deleted topic (auto.create.topics.enable).
        with Producer(cfg) as p:
            p.send(topic, value, partition=0).result(30)

    pat_a = {TopicPartition("pat-a", 0), TopicPartition("pat-a", 1)}
    with Admin(cfg) as admin:
        admin.create_topics([NewTopic("pat-a", 2), NewTopic("other", 1)])
        send("pat-a", b"a")
        member = {"group.id": "g", "auto.offset.reset": "earliest",
                  "heartbeat.interval.ms": 200, "enable.auto.commit": False}
        with Consumer({**cfg, **member}) as c:
            c.subscribe(pattern="pat-.*", listener=Listener())
            assert [r.value for r in _drain(c, 1)] == [b"a"]
            assert c.assignment() == pat_a
            with pytest.raises(IllegalStateError, match="assign"):
                c.assign([("other", 0)])
            # A second member of the group in this process: the group's partitions are
            # shared out by the assignor, as between processes.
            with Consumer({**cfg, **member}) as twin:
                twin.subscribe(["pat-a"])
                _poll_until([c, twin], lambda: len(c.assignment()) == 1
                            and len(twin.assignment()) == 1
                            and c.assignment() | twin.assignment() == pat_a)
            _poll_until([c], lambda: c.assignment() == pat_a)  # the twin left: all back
            with Consumer({**cfg, "group.id": "other-group"}) as c2:
                c2.subscribe(["pat-a"])  # another group: its own assignment
                _poll_until([c2], lambda: c2.assignment() == pat_a)
            admin.create_topics([NewTopic("pat-b", 1)])
            send("pat-b", b"b")
            assert [r.value for r in _drain(c, 1)] == [b"b"]
            assert c.assignment() == pat_a | {TopicPartition("pat-b", 0)}
            admin.delete_topics(["pat-a"])
            _poll_until([c], lambda: c.assignment() == {TopicPartition("pat-b", 0)})
        assert events[0] == ("assigned", sorted(pat_a))
        assert events[-1] == ("revoked", [TopicPartition("pat-b", 0)])  # close
        with Consumer(cfg) as no_group:
            with pytest.raises(errors.InvalidGroupIdError, match="group.id"):
                no_group.subscribe(["pat-b"])
            no_group.assign([("pat-b", 0)])
            with pytest.raises(errors.InvalidGroupIdError):
                no_group.commit()
        with Consumer({**cfg, "group.id": "g", "auto.offset.reset": "none"}) as c:
            c.assign([("pat-b", 0)])
            assert c.position(("pat-b", 0)) == 1  # committed by the listener at close


def test_asyncio_clients(tmp_path: pathlib.Path) -> None:
    cfg = {"log.dir": str(tmp_path / "data")}

    async def go() -> None:
        async with aio.Admin(cfg) as admin:
            await admin.create_topics([NewTopic("events", 2)])
        async with aio.Producer(cfg) as p:
            metas = [await p.send_and_wait("events", b"e%d" % i, partition=i % 2)
                     for i in range(10)]
        assert [m.offset for m in metas] == [i // 2 for i in range(10)]
        async with aio.Consumer({**cfg, "group.id": "g", "auto.offset.reset": "earliest"}) as c:
            await c.subscribe(["events"])
            got: list[Any] = []
            while len(got) < 10:
                got.extend(await c.poll(1.0))
            await c.commit()
            got_offsets = await c.committed([("events", 0), ("events", 1)])
            assert {tp: o.offset for tp, o in got_offsets.items()} == {
                TopicPartition("events", 0): 5, TopicPartition("events", 1): 5}

    asyncio.run(asyncio.wait_for(go(), 60))
    assert _open_dirs() == {}


# --------------------------------------------------------------------------- the directory


def test_clients_of_a_process_share_the_directory(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "data"
    cfg = {"log.dir": str(d), "broker.config": {"num.partitions": "2"}}
    with Producer(cfg) as p, Consumer({**cfg, "auto.offset.reset": "earliest"}) as c:
        assert _open_dirs() == {os.path.realpath(d): 2}
        p.send("shared", b"x", partition=1).result(30)
        c.assign([("shared", 1)])
        assert [r.value for r in _drain(c, 1)] == [b"x"]
        with Admin(log_dir=str(d)) as admin:  # no broker.config: whatever is open
            assert _open_dirs() == {os.path.realpath(d): 3}
            assert len(admin.describe_topics(["shared"])["shared"].partitions) == 2
        with pytest.raises(ConfigError, match="already open in this process"):
            Admin(log_dir=str(d), broker_config={"num.partitions": "5"})
    assert _open_dirs() == {}


def test_settings_are_checked(tmp_path: pathlib.Path) -> None:
    d = str(tmp_path / "data")
    with pytest.raises(ConfigError, match="not both"):
        Producer(log_dir=d, bootstrap_servers="127.0.0.1:9092")
    with pytest.raises(ConfigError, match="embedded mode only"):
        Producer(bootstrap_servers="127.0.0.1:9092", broker_config={"num.partitions": 2})
    with pytest.raises(ConfigError, match="or log.dir"):
        Consumer({})
    with pytest.raises(ConfigError, match="listeners does not apply"):
        Admin(log_dir=d, broker_config={"listeners": "PLAINTEXT://:9092"})
    with pytest.raises(ConfigError, match="num.partitionz"):
        Admin(log_dir=d, broker_config={"num.partitionz": 2})
    with pytest.raises(ConfigError, match="cannot read"):
        Admin(log_dir=d, broker_config=str(tmp_path / "missing.properties"))
    props = tmp_path / "server.properties"
    props.write_text("# broker settings\nnum.partitions=4\n")
    with Producer(log_dir=d, broker_config=str(props)) as p:
        assert p.partitions_for("from-file") == [0, 1, 2, 3]
    assert _open_dirs() == {}


_HOLD = textwrap.dedent("""
    import sys, time
    from pylog.client import Producer
    p = Producer(log_dir=sys.argv[1])
    p.send("held", b"x").result(30)
    print("ready", flush=True)
    sys.stdin.read()
    p.close()
""")

_TRY = textwrap.dedent("""
    import sys
    from pylog.client import Admin, LogDirInUseError
    try:
        Admin(log_dir=sys.argv[1]).close()
    except LogDirInUseError as exc:
        print("REFUSED", exc)
        sys.exit(3)
    print("OPENED")
""")


def _python(code: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_a_second_process_is_refused_naming_the_holder(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "data"
    with Producer(log_dir=str(d)) as p:
        p.send("t", b"x").result(30)
        out, err = _python(_TRY, str(d)).communicate(timeout=60)
        assert "REFUSED" in out, out + err
        assert f"pid {os.getpid()}" in out and "in embedded mode" in out and "log.dir" in out
        broker = BrokerProcess(d)
        with pytest.raises(RuntimeError, match="did not start") as info:
            broker.start(timeout=30)
        assert f"pid {os.getpid()}" in str(info.value) and "embedded pylog clients" in str(info.value)
    out, err = _python(_TRY, str(d)).communicate(timeout=60)
    assert "OPENED" in out, out + err
    # The other way round: another program holds it; this one is told who.
    holder = _python(_HOLD, str(d), stdin=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(LogDirInUseError, match=f"pid {holder.pid} ") as info:
            Consumer(log_dir=str(d))
        assert info.value.holder is not None and info.value.holder[0] == holder.pid
        assert _open_dirs() == {}
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0


def test_a_running_broker_keeps_embedded_clients_out(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "data"
    d.mkdir()
    b = BrokerProcess(d).start()
    try:
        with pytest.raises(LogDirInUseError, match=f"pid {b.proc.pid} .*pylog") as info:
            Producer(log_dir=str(d))
        assert "stop that process or close its clients" in str(info.value)
    finally:
        assert b.stop() == 0
    with Producer(log_dir=str(d)) as p:
        assert p.send("after", b"x").result(30).offset == 0


def test_a_broker_reads_what_embedded_clients_wrote(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "data"
    cfg = {"log.dir": str(d)}
    with Admin(cfg) as admin:
        admin.create_topics([NewTopic("books", 2), NewTopic("stamped", 1, config={
            "message.timestamp.type": "LogAppendTime"})])
    sent = []
    with Producer({**cfg, "compression.type": "gzip"}) as p:
        for i in range(40):
            meta = p.send("books", b"book %d" % i, key=b"k%d" % i, headers=[("i", b"%d" % i)],
                          timestamp_ms=1_700_000_000_000 + i).result(30)
            sent.append((meta.partition, meta.offset, b"k%d" % i, b"book %d" % i, meta.timestamp))
        stamped = p.send("stamped", b"s").result(30)
    with Consumer({**cfg, "group.id": "readers", "auto.offset.reset": "earliest",
                   "enable.auto.commit": False}) as c:  # no commit of the positions at close
        c.assign([("books", 0), ("books", 1)])
        assert len(_drain(c, 40)) == 40
        c.commit({("books", 0): 3, ("books", 1): 4})
    b = BrokerProcess(d).start()
    try:
        conf = {"bootstrap.servers": b.bootstrap, "group.id": "readers",
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        consumer = confluent_kafka.Consumer(conf)
        try:
            tps = [confluent_kafka.TopicPartition("books", p) for p in (0, 1)]
            assert sorted((tp.partition, tp.offset) for tp in consumer.committed(tps, 30)) == [
                (0, 3), (1, 4)]
            consumer.assign([confluent_kafka.TopicPartition("books", p, 0) for p in (0, 1)]
                            + [confluent_kafka.TopicPartition("stamped", 0, 0)])
            got, deadline = [], time.monotonic() + 30
            while len(got) < 41 and time.monotonic() < deadline:
                m = consumer.poll(1.0)
                if m is not None and m.error() is None:
                    got.append(m)
        finally:
            consumer.close()
        books = sorted((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1])
                       for m in got if m.topic() == "books")
        assert books == sorted(sent)
        assert all(m.headers() == [("i", m.value().split()[1])] for m in got if m.topic() == "books")
        (s,) = [m for m in got if m.topic() == "stamped"]
        assert s.timestamp() == (confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, stamped.timestamp)
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        producer.produce("books", b"from the broker", partition=0)
        assert producer.flush(30) == 0
    finally:
        assert b.stop() == 0, b.read_log()
    # And back: the broker's writes read in embedded mode.
    with Consumer({**cfg, "group.id": "readers", "auto.offset.reset": "earliest"}) as c:
        c.assign([("books", 0)])
        n0 = sum(1 for p, *_ in sent if p == 0)
        records = _drain(c, n0 + 1 - 3)
        assert [r.offset for r in records] == list(range(3, n0 + 1))
        assert records[-1].value == b"from the broker"
