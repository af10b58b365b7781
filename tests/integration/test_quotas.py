"""Client quotas against a real broker process, with real clients (docs/quotas.md).

One 20-second run measures four limited clients and two unlimited ones at once on the same
broker: a confluent-kafka and a kafka-python producer limited to 1 MiB/s each
(``producer_byte_rate`` of their client ids), a confluent-kafka and a kafka-python consumer
limited to 1 MiB/s (``consumer_byte_rate``), an unlimited confluent-kafka producer paced at 6
MiB/s and an unlimited kafka-python consumer. Each limited client must move 0.8-1.2 MiB/s
over the 20 s, the unlimited ones must not be slowed, the clients see ``throttle_time_ms``
(librdkafka's throttle callback), and the metrics show the throttle time.

The broker runs with ``quota.window.num=3`` (Kafka's default is 11): with 11 one-second
windows a client may use ten windows' worth at once when it starts and whenever a full
sample ages out, so its rate over 20 s swings between 0.7 and 1.35 of its quota while its
long-run average is the quota (tests/unit/pylog/broker/test_quota_manager.py simulates
both); 3 windows average out within 20 s. The arithmetic is Kafka's either way. The
consumers fetch 64 KiB a partition at a time (FETCH_BYTES says why).
"""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time
import traceback
import uuid

import pytest
from _harness.scrape import metrics_port, scrape
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer

from pylog.client import Admin, QuotaFilter
from tests.integration.conftest import BrokerProcess, cluster_size

pytestmark = pytest.mark.integration

MIB = 1048576
RUN_S = 20.0
VALUE = b"q" * 4000  # big records: the batch overhead is about 1% of what the quota counts
# A fetch answer is all or nothing: over the quota it is dropped and asked again after the
# throttle, so a consumer's rate falls short of its quota by up to an answer per few
# windows. With 3 windows of 1 MiB/s, answers of 1 MiB (one librdkafka batch of the
# default batch.size) gave 0.76 MiB/s, answers of 64 KiB from 16 KiB batches 0.96.
FETCH_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def qbroker(tmp_path_factory):
    if cluster_size():
        pytest.skip("starts its own single broker (the cluster test is test_quotas_cluster.py)")
    data = tmp_path_factory.mktemp("quotas") / "data"
    data.mkdir()
    b = BrokerProcess(
        data,
        {"metrics.listener": "http://127.0.0.1:0", "quota.window.num": "3", "num.partitions": "1"},
    )
    b.start()
    b.metrics_port = metrics_port(b)
    yield b
    assert b.stop() == 0, b.read_log()


def _fill(bootstrap: str, topic: str, nbytes: int) -> None:
    p = CKProducer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "filler",
            "linger.ms": 20,
            "batch.size": 16384,
        }
    )
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


class Run:
    """Clients started together, each counting the value bytes it moved in the window."""

    def __init__(self) -> None:
        self.start = threading.Event()
        self.deadline = 0.0
        self.moved: dict[str, int] = {}
        self.elapsed: dict[str, float] = {}
        self.throttled: dict[str, list[int]] = {}
        self.errors: list[str] = []

    def go(self) -> None:
        self.deadline = time.monotonic() + RUN_S
        self.start.set()

    def thread(self, name: str, fn, *args) -> threading.Thread:
        def body() -> None:
            try:
                fn(name, *args)
            except BaseException:  # noqa: BLE001 - reported by the test
                self.errors.append(f"{name}: {traceback.format_exc()}")

        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        return t


def ck_producer(
    run: Run, name: str, bootstrap: str, topic: str, pace_bytes_s: float | None
) -> None:
    acked = [0]
    throttles = run.throttled.setdefault(name, [])
    p = CKProducer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": name,
            "linger.ms": 5,
            "batch.size": 65536,  # requests of 64 KiB: a quota window holds many of them
            "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
        }
    )

    def on_delivery(err, msg) -> None:
        if err is None and time.monotonic() < run.deadline:
            acked[0] += len(msg.value())

    run.start.wait()
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() < run.deadline:
        if pace_bytes_s is not None and sent > (time.monotonic() - t0) * pace_bytes_s:
            p.poll(0.002)
            continue
        try:
            p.produce(topic, VALUE, on_delivery=on_delivery)
            sent += len(VALUE)
        except BufferError:
            p.poll(0.02)
        p.poll(0)
    run.moved[name], run.elapsed[name] = acked[0], time.monotonic() - t0
    p.purge()
    p.flush(5)


def kp_producer(run: Run, name: str, bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer

    acked = [0]
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=name, linger_ms=5, max_block_ms=200)

    def ok(_meta) -> None:
        if time.monotonic() < run.deadline:
            acked[0] += len(VALUE)

    done = [0]

    def finished(_result) -> None:
        done[0] += len(VALUE)

    run.start.wait()
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() < run.deadline:
        if sent - done[0] >= 2 * MIB:  # keep 2 MiB in flight: close() need not wait long
            time.sleep(0.005)
            continue
        f = p.send(topic, VALUE)
        f.add_callback(ok)
        f.add_both(finished)
        sent += len(VALUE)
    run.moved[name], run.elapsed[name] = acked[0], time.monotonic() - t0
    p.close(timeout=30)


def ck_consumer(run: Run, name: str, bootstrap: str, topic: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": name,
            "group.id": name,
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": FETCH_BYTES,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group: no join to wait for
    run.start.wait()
    t0 = time.monotonic()
    got = 0
    while time.monotonic() < run.deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None and time.monotonic() < run.deadline:
            got += len(msg.value())
    run.moved[name], run.elapsed[name] = got, time.monotonic() - t0
    c.close()


def kp_consumer(run: Run, name: str, bootstrap: str, topic: str, stop_at: int | None) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=name,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=FETCH_BYTES,
    )
    c.assign([TopicPartition(topic, 0)])  # no group: no join to wait for
    run.start.wait()
    t0 = time.monotonic()
    got = 0
    while time.monotonic() < run.deadline and (stop_at is None or got < stop_at):
        for records in c.poll(timeout_ms=100).values():
            if time.monotonic() < run.deadline:
                got += sum(len(r.value) for r in records)
    run.moved[name], run.elapsed[name] = got, time.monotonic() - t0
    c.close()


def test_limited_clients_get_their_quota_and_unlimited_ones_are_not_slowed(qbroker):
    bootstrap = qbroker.bootstrap
    tag = uuid.uuid4().hex[:6]
    topics = {k: f"q-{k}-{tag}" for k in ("ckp", "kpp", "free", "read")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics(list(topics.values()))
        for cid in ("ck-prod", "kp-prod"):
            admin.alter_client_quotas({"client-id": cid}, {"producer_byte_rate": MIB})
        for cid in ("ck-cons", "kp-cons"):
            admin.alter_client_quotas({"client-id": cid}, {"consumer_byte_rate": MIB})
    _fill(bootstrap, topics["read"], 32 * MIB)  # more than any consumer reads in 20 s

    run = Run()
    threads = [
        run.thread("ck-prod", lambda n: ck_producer(run, n, bootstrap, topics["ckp"], None)),
        run.thread("kp-prod", lambda n: kp_producer(run, n, bootstrap, topics["kpp"])),
        run.thread("ck-cons", lambda n: ck_consumer(run, n, bootstrap, topics["read"])),
        run.thread("kp-cons", lambda n: kp_consumer(run, n, bootstrap, topics["read"], None)),
        run.thread("ck-free", lambda n: ck_producer(run, n, bootstrap, topics["free"], 6 * MIB)),
        run.thread("kp-free", lambda n: kp_consumer(run, n, bootstrap, topics["read"], 24 * MIB)),
    ]
    time.sleep(2.0)  # connections, metadata
    run.go()
    time.sleep(RUN_S - 5)
    during = scrape(qbroker.metrics_port)  # the windowed rates are those of the last 3 s
    for t in threads:
        t.join(RUN_S + 30)
    rates = {n: run.moved[n] / run.elapsed[n] / MIB for n in run.moved}
    print("MiB/s:", {n: round(r, 2) for n, r in rates.items()})
    assert not run.errors, run.errors
    for name in ("ck-prod", "kp-prod", "ck-cons", "kp-cons"):
        assert 0.8 <= rates[name] <= 1.2, (name, rates)
    # Unlimited: the paced producer gets its 6 MiB/s, the consumer reads 24 MiB well within
    # the time a 1 MiB/s quota would need.
    assert rates["ck-free"] >= 4.5, rates
    assert run.moved["kp-free"] >= 24 * MIB and run.elapsed["kp-free"] < 15, (
        run.moved,
        run.elapsed,
    )
    # librdkafka saw throttle_time_ms (and held back by itself, as KIP-219 asks).
    assert run.throttled["ck-prod"] and max(run.throttled["ck-prod"]) > 0
    assert not any(run.throttled["ck-free"])

    samples = scrape(qbroker.metrics_port)

    def quota(name: str, resource: str, client: str, scraped=samples) -> float:
        return scraped[
            (
                f"kafka_server_quota_{name}",
                (("clientId", client), ("resource", resource), ("user", "")),
            )
        ]

    for client, resource in (
        ("ck-prod", "Produce"),
        ("kp-prod", "Produce"),
        ("ck-cons", "Fetch"),
        ("kp-cons", "Fetch"),
    ):
        assert quota("throttle_time", resource, client) > 0, (client, resource)
        # Over the last 3 one-second windows: bursts and pauses, around the quota.
        assert 0.3 * MIB < quota("byte_rate", resource, client, during) < 3 * MIB, (client, during)
    assert math.isnan(quota("throttle_time", "Produce", "ck-free"))
    assert quota("byte_rate", "Produce", "ck-free", during) > 3 * MIB
    throttled_produce = [
        v
        for (n, labels), v in samples.items()
        if n == "kafka_network_requestmetrics_throttletimems_sum"
        and dict(labels) == {"request": "Produce"}
    ]
    assert throttled_produce and throttled_produce[0] > 0


def _cli(capsys, bootstrap: str, *args: str) -> tuple[int, str, str]:
    from pylog.cli.main import main

    code = main(["configs", *args, "-b", bootstrap])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_alter_describe_round_trip_and_restart(new_broker, capsys):
    """kafka-configs.sh's shape through `pylog configs` (pylog.client's Admin), on a single
    node whose quotas live in its data directory and survive a restart."""
    b = new_broker().start()
    cid = f"app-{uuid.uuid4().hex[:6]}"
    assert _cli(
        capsys,
        b.bootstrap,
        "alter",
        "--entity-type",
        "clients",
        "--entity-name",
        cid,
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    ) == (0, f"Completed updating config for client {cid}.\n", "")
    assert _cli(
        capsys,
        b.bootstrap,
        "alter",
        "--entity-type",
        "users",
        "--entity-default",
        "--add-config",
        "request_percentage=250",
    ) == (0, "Completed updating default config for users in the cluster.\n", "")
    code, _, err = _cli(
        capsys,
        b.bootstrap,
        "alter",
        "--entity-type",
        "clients",
        "--entity-name",
        cid,
        "--add-config",
        "producer_byte_rate=1.5",
    )
    assert code == 1 and "INVALID_REQUEST: producer_byte_rate cannot be a fractional value" in err
    code, _, err = _cli(
        capsys,
        b.bootstrap,
        "alter",
        "--entity-type",
        "clients",
        "--entity-name",
        cid,
        "--add-config",
        "producer_byte_rates=1",
    )
    assert code == 1 and "Invalid configuration key producer_byte_rates" in err
    assert (
        _cli(
            capsys,
            b.bootstrap,
            "alter",
            "--entity-type",
            "clients",
            "--entity-name",
            cid,
            "--delete-config",
            "consumer_byte_rate",
        )[0]
        == 0
    )
    assert (
        _cli(
            capsys,
            b.bootstrap,
            "alter",
            "--validate-only",
            "--entity-type",
            "clients",
            "--entity-name",
            cid,
            "--add-config",
            "producer_byte_rate=5",
        )[0]
        == 0
    )
    stored = json.loads((b.data_dir / "client-quotas.json").read_text())
    assert stored == {
        "version": 1,
        "entities": {
            f"clients/{cid}": {"producer_byte_rate": "1048576"},
            "users/<default>": {"request_percentage": "250.0"},
        },
    }
    b.stop()
    b.start()
    assert _cli(capsys, b.bootstrap, "describe", "--entity-type", "clients") == (
        0,
        f"Quota configs for client-id '{cid}' are producer_byte_rate=1048576.0\n",
        "",
    )
    assert _cli(capsys, b.bootstrap, "describe", "--entity-type", "users", "--entity-default") == (
        0,
        "Quota configs for the default user-principal are request_percentage=250.0\n",
        "",
    )
    with Admin({"bootstrap.servers": b.bootstrap}) as admin:
        assert admin.describe_client_quotas([QuotaFilter.of_entity("client-id", cid)]) == {
            (("client-id", cid),): {"producer_byte_rate": 1048576.0}
        }
    for action in ("describe", "alter"):
        with pytest.raises(SystemExit):
            _cli(capsys, b.bootstrap, action, "--help")
        text = capsys.readouterr().out
        assert "--entity-type" in text and "--entity-default" in text


def _kp_roundtrip(sock, request, response_cls, version: int, correlation_id: int):
    """One request encoded and one response decoded by kafka-python's protocol classes (an
    encoder independent of pylog's), over a plain socket."""
    request.with_header(correlation_id=correlation_id, client_id="kp-wire")
    sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return response_cls.decode(sock.recv(size, socket.MSG_WAITALL), version=version, header=True)


def test_describe_and_alter_on_the_wire_with_kafka_pythons_codec(qbroker):
    """Neither confluent-kafka 2.16 nor kafka-python 3.0 has client-quota admin calls;
    kafka-python's protocol classes still encode and decode both APIs, versions 0 and 1."""
    from kafka.protocol.admin import (
        AlterClientQuotasRequest as A,
    )
    from kafka.protocol.admin import (
        AlterClientQuotasResponse as AR,
    )
    from kafka.protocol.admin import (
        DescribeClientQuotasRequest as D,
    )
    from kafka.protocol.admin import (
        DescribeClientQuotasResponse as DR,
    )

    tag = uuid.uuid4().hex[:6]
    with socket.create_connection((qbroker.host, qbroker.port), timeout=10) as sock:
        for v in (0, 1):
            user = f"u{v}-{tag}"
            alter = A(
                entries=[
                    A.EntryData(
                        entity=[
                            A.EntryData.EntityData(entity_type="user", entity_name=user),
                            A.EntryData.EntityData(entity_type="client-id", entity_name=None),
                        ],
                        ops=[
                            A.EntryData.OpData(key="consumer_byte_rate", value=2048.0, remove=False)
                        ],
                    ),
                    A.EntryData(
                        entity=[A.EntryData.EntityData(entity_type="client-id", entity_name="x")],
                        ops=[A.EntryData.OpData(key="bogus", value=1.0, remove=False)],
                    ),
                ],
                validate_only=False,
            )
            resp = _kp_roundtrip(sock, alter, AR, v, 1 + 2 * v)
            assert [(e.error_code, e.error_message) for e in resp.entries] == [
                (0, None),
                (
                    42,
                    "Invalid configuration key bogus; the quota keys are producer_byte_rate, "
                    "consumer_byte_rate, request_percentage",
                ),
            ]
            describe = D(
                components=[D.ComponentData(entity_type="user", match_type=0, match=user)],
                strict=False,
            )
            resp = _kp_roundtrip(sock, describe, DR, v, 2 + 2 * v)
            assert resp.error_code == 0
            assert [
                (
                    [(e.entity_type, e.entity_name) for e in entry.entity],
                    [(x.key, x.value) for x in entry.values],
                )
                for entry in resp.entries
            ] == [([("user", user), ("client-id", None)], [("consumer_byte_rate", 2048.0)])]


def test_a_throttled_connection_is_muted_after_its_response(qbroker):
    """KIP-219: the response carries throttle_time_ms at once, then nothing more is read
    from the connection until the throttle time is over."""
    from _harness.wire import BrokerConnection

    from pylog.protocol.messages import MetadataRequest, ProduceRequest

    cid = f"mute-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": qbroker.bootstrap}) as admin:
        admin.alter_client_quotas({"client-id": cid}, {"producer_byte_rate": 10_000})
    P = ProduceRequest
    # 50 KB over the 2 s a new client is measured over (3 windows): 25,000 B/s, 2.5 times
    # the quota: (25000 - 10000) / 10000 x 2 s = 3 s of throttle.
    big = P(
        acks=1,
        timeout_ms=1000,
        transactional_id=None,
        topic_data=[
            P.TopicProduceData(
                name=f"mute-{cid}",
                partition_data=[P.PartitionProduceData(index=0, records=b"x" * 50_000)],
            )
        ],
    )
    with BrokerConnection(qbroker.host, qbroker.port, 20, client_id=cid) as conn:
        started = time.monotonic()
        resp = conn.request(big)
        answered = time.monotonic()
        assert 2500 <= resp.throttle_time_ms <= 3500, resp.throttle_time_ms
        assert answered - started < 1.0  # the response is not held back
        meta = conn.request(MetadataRequest(topics=[], allow_auto_topic_creation=False))
        waited = time.monotonic() - answered
    assert meta.throttle_time_ms == 0  # no request quota: the metadata itself is free
    assert waited >= resp.throttle_time_ms / 1000 - 0.2, waited


def test_request_percentage_throttles_any_api_for_at_most_one_window(qbroker):
    """request_percentage counts handler time of every API; its throttle is capped at one
    quota window (1 s), and the connection is muted that long."""
    from _harness.wire import BrokerConnection

    from pylog.protocol.messages import MetadataRequest

    cid = f"busy-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": qbroker.bootstrap}) as admin:
        admin.alter_client_quotas({"client-id": cid}, {"request_percentage": 0.0001})
    with BrokerConnection(qbroker.host, qbroker.port, 20, client_id=cid) as conn:
        req = MetadataRequest(topics=[], allow_auto_topic_creation=False)
        first = conn.request(req)
        started = time.monotonic()
        second = conn.request(req)
        waited = time.monotonic() - started
    assert first.throttle_time_ms == 1000, first.throttle_time_ms  # capped: one window
    assert waited >= 0.8, waited  # muted after the first answer
    assert second.throttle_time_ms == 1000


def test_embedded_mode_stores_quotas_and_reports_them(tmp_path):
    """Embedded mode (``log.dir``): AlterClientQuotas goes to the broker run in process,
    is kept in its data directory, and its quota metrics are in ``embedded_metrics``
    (no socket, so nothing is muted: the response's throttle_time_ms is all there is)."""
    from _harness.scrape import parse

    from pylog.client import Producer, embedded_metrics

    data = str(tmp_path / "data")
    with Admin({"log.dir": data}) as admin:
        admin.alter_client_quotas({"client-id": "emb"}, {"producer_byte_rate": MIB})
        with Producer({"log.dir": data, "client.id": "emb"}) as p:
            p.send("emb-t", b"x" * 1000)
            p.flush(30)
            samples = parse(embedded_metrics(data))
    assert json.loads((tmp_path / "data" / "client-quotas.json").read_text())["entities"] == {
        "clients/emb": {"producer_byte_rate": "1048576"}
    }
    rate = samples[
        (
            "kafka_server_quota_byte_rate",
            (("clientId", "emb"), ("resource", "Produce"), ("user", "")),
        )
    ]
    assert rate > 0
