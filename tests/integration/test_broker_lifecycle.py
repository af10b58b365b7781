"""Start, stop, crash and restart: SIGTERM clean shutdown then a quick restart with data
intact, kill -9 then recovery and serving, retention on its interval, topic deletion in the
background, start-up refusals (bad config, pure-Python logcore)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from _harness.wire import BrokerConnection

from pylog.protocol.messages import ListOffsetsRequest


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1, ts: int | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                  "compression.type": "lz4"})
    failed = []
    for i in range(n):
        kwargs = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, key=b"%d" % i, value=b"value-%d" % i, partition=i % partitions,
                  on_delivery=lambda err, msg: failed.append(err) if err else None, **kwargs)
    assert p.flush(20) == 0 and not failed


def _consume_all(bootstrap: str, topic: str, partitions: int, n: int) -> dict[int, list[tuple[int, bytes, bytes]]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 20
    try:
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            for tp, rs in c.poll(300).items():
                got[tp.partition] += [(r.offset, r.key, r.value) for r in rs]
    finally:
        c.close()
    return got


def _earliest(bootstrap: str, topic: str) -> int:
    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), timeout=10) as conn:
        L = ListOffsetsRequest
        resp = conn.request(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-2)])]))
        return resp.topics[0].partitions[0].offset


def _check(got, partitions: int, n: int) -> None:
    for p in range(partitions):
        rows = got[p]
        assert [o for o, _k, _v in rows] == list(range(len(rows)))
        for _o, k, v in rows:
            i = int(k)
            assert i % partitions == p and v == b"value-%d" % i
    assert sum(map(len, got.values())) == n


def test_sigterm_clean_shutdown_then_fast_restart(new_broker, topic_name) -> None:
    b = new_broker().start()
    _produce(b.bootstrap, topic_name, 600, partitions=1)
    assert b.stop(signal.SIGTERM) == 0
    log = b.read_log()
    assert "shut down cleanly" in log and "Traceback" not in log
    t0 = time.monotonic()
    b.start()
    assert time.monotonic() - t0 < 10
    _check(_consume_all(b.bootstrap, topic_name, 1, 600), 1, 600)
    _produce(b.bootstrap, topic_name, 10)
    assert b.stop(signal.SIGINT) == 0


def test_kill9_then_recovery_and_serving(new_broker, topic_name) -> None:
    b = new_broker({"num.partitions": "2"}).start()
    _produce(b.bootstrap, topic_name, 400, partitions=2)
    b.stop(signal.SIGKILL)
    # A torn write at the tail of one partition: recovery must cut it off.
    seg = os.path.join(b.data_dir, f"{topic_name}-0", "00000000000000000000.log")
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00garbage")
    b.start()
    got = _consume_all(b.bootstrap, topic_name, 2, 400)
    _check(got, 2, 400)
    _produce(b.bootstrap, topic_name, 100, partitions=2)
    assert b.stop(signal.SIGTERM) == 0


def test_retention_runs_on_its_interval(new_broker, topic_name) -> None:
    b = new_broker({"log.retention.check.interval.ms": "200"}).start()
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    futs = admin.create_topics([NewTopic(topic_name, 1, 1, config={
        "retention.ms": "60000", "segment.bytes": "2000", "file.delete.delay.ms": "0"})])
    futs[topic_name].result(10)
    old = int(time.time() * 1000) - 3_600_000
    for _ in range(5):
        _produce(b.bootstrap, topic_name, 30, ts=old)
    _produce(b.bootstrap, topic_name, 5)  # recent records in the active segment
    deadline = time.monotonic() + 10
    while _earliest(b.bootstrap, topic_name) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    start = _earliest(b.bootstrap, topic_name)
    assert 0 < start <= 150
    assert b.stop() == 0


def test_deleted_topic_directories_are_removed_in_background(new_broker, topic_name) -> None:
    b = new_broker({"log.segment.delete.delay.ms": "100", "num.partitions": "3"}).start()
    _produce(b.bootstrap, topic_name, 30, partitions=3)
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_topics([topic_name])[topic_name].result(10)
    names = os.listdir(b.data_dir)
    assert not any(n.startswith(topic_name + "-") and not n.endswith("-delete") for n in names)
    deadline = time.monotonic() + 10
    while any(n.startswith(topic_name) for n in os.listdir(b.data_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(n.startswith(topic_name) for n in os.listdir(b.data_dir))
    # The name can be used again at once.
    _produce(b.bootstrap, topic_name, 3)
    assert b.stop() == 0


@pytest.mark.parametrize(
    ("override", "fragment"),
    [("no.such.setting=1", "no.such.setting"), ("num.partitions=many", "num.partitions"),
     ("log.retention.hourz=5",
      "log.retention.hourz: unknown configuration; did you mean 'log.retention.hours'?"),
     ("listeners=SASL_SSL://127.0.0.1:0",
      "listener.name.sasl_ssl.ssl.keystore.location: an SSL listener needs a certificate"),
     ("listeners=QUIC://127.0.0.1:0", "listeners"),
     ("log.cleanup.policy=compact,shrink", "log.cleanup.policy: invalid value 'shrink'"),
     ("log.cleaner.threads=0", "log.cleaner.threads: 0 threads clean nothing: set log.cleaner.enable=false"),
     ("log.cleaner.dedupe.buffer.size=1000000",
      "log.cleaner.dedupe.buffer.size: must be at least 1MB per cleaner thread"),
     # Accepted by Kafka, not implemented by pylog: refused with what to do instead.
     ("num.network.threads=8", "num.network.threads: pylog's network layer is one event loop")],
)
def test_invalid_settings_fail_at_start_naming_the_key(tmp_path, override, fragment) -> None:
    proc = subprocess.run([sys.executable, "-m", "pylog", "broker", "--override", override,
                           "--override", f"log.dirs={tmp_path}", "--allow-pure-python"],
                          capture_output=True, timeout=30)
    assert proc.returncode == 1  # as every pylog command that cannot do its job
    err = proc.stderr.decode()
    assert fragment in err and "Traceback" not in err
    assert err.count("\n") == 1  # one line
    assert os.listdir(tmp_path) == []  # nothing written


def test_kafka_server_properties_starts_with_warnings(new_broker, tmp_path) -> None:
    """Kafka 3.9's config/server.properties (without its zookeeper.* lines) starts: its
    num.network.threads=3 is accepted with a warning."""
    props = tmp_path / "server.properties"
    props.write_text(
        "broker.id=0\nnum.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kafka-logs\nnum.partitions=1\nnum.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\nlog.retention.hours=168\n"
        "log.retention.check.interval.ms=300000\ngroup.initial.rebalance.delay.ms=0\n"
        "log.message.format.version=2.8\n")
    b = new_broker()  # --override log.dirs and listeners win over the file's
    b.extra_args = ["--config", str(props)]
    b.start()
    assert b.stop() == 0
    log = b.read_log()
    assert "WARNING pylog.broker: num.network.threads=3 is ignored" in log
    assert "WARNING pylog.broker: log.message.format.version is deprecated and ignored" in log


def test_pure_python_refused_without_flag(tmp_path) -> None:
    env = dict(os.environ, LOGCORE_PUREPYTHON="1")
    proc = subprocess.run([sys.executable, "-m", "pylog", "broker", "--override",
                           "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path}"],
                          capture_output=True, timeout=30, env=env)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "logcore implementation: python" in err and "--allow-pure-python" in err


def test_config_file_and_durable_topic_configs(new_broker, topic_name, tmp_path) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    props = tmp_path / "server.properties"
    props.write_text("# a Kafka-style file\nnum.partitions=3\nlog.retention.hours=24\n")
    b = new_broker()
    b.overrides["num.partitions"] = "5"  # --override wins over --config
    b.extra_args = ["--config", str(props)]
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, -1, -1)])[topic_name].result(10)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 5
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("max.message.bytes", "5000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    assert b.stop() == 0
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    described = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([described])[described].result(10)
    assert configs["max.message.bytes"].value == "5000"
    assert configs["retention.ms"].value == str(24 * 3_600_000)  # from the file's log.retention.hours
    assert b.stop() == 0


def _failed_start(*overrides: str) -> str:
    cmd = [sys.executable, "-m", "pylog", "broker", "--allow-pure-python"]
    for o in overrides:
        cmd += ["--override", o]
    proc = subprocess.run(cmd, capture_output=True, timeout=30)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "shut down cleanly" not in err, err
    return err


def test_port_in_use_is_a_clear_error(broker, tmp_path) -> None:
    """Named host:port, found before anything is created on disk (meta.properties was
    written into the new directory first)."""
    data = tmp_path / "new-data"
    err = _failed_start(f"listeners=PLAINTEXT://{broker.bootstrap}", f"log.dirs={data}")
    assert f"cannot start: cannot listen on {broker.bootstrap} (listeners): Address already in use" in err
    assert not data.exists()


def test_second_broker_on_the_same_data_directory(new_broker, topic_name) -> None:
    """Fails at once naming the data directory and the pid and command line holding its
    lock, and writes nothing (it used to fail on one partition's lock, after printing
    "shut down cleanly"); once the first broker stops, the directory can be used again."""
    b = new_broker().start()
    _produce(b.bootstrap, topic_name, 10)
    before = sorted(os.listdir(b.data_dir))
    assert ".lock" in before and "meta.properties" in before
    err = _failed_start("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={b.data_dir}")
    (line,) = err.splitlines()  # one line says it all
    assert "ERROR pylog.broker: cannot start:" in line
    assert f"data directory {b.data_dir} is in use: pid {b.proc.pid} (" in line
    assert "-m pylog broker" in line and f"{b.data_dir}/.lock" in line
    assert sorted(os.listdir(b.data_dir)) == before
    _produce(b.bootstrap, topic_name, 10)  # the first broker is undisturbed
    assert b.stop() == 0
    b.start()
    _check(_consume_all(b.bootstrap, topic_name, 1, 20), 1, 20)
    assert b.stop() == 0
