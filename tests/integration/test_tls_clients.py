"""TLS listeners with real clients: one broker with three listeners (PLAINTEXT, SSL, and
MTLS: SSL with ``ssl.client.auth=required`` and principal mapping rules), a throwaway CA.

confluent-kafka, kafka-python, aiokafka, kcat and pylog.client produce and consume over
SSL; Metadata answers each client with the addresses of the listener it came in on; a
client without a certificate is refused by the MTLS listener and one with a certificate
gets the principal the rules give; a plaintext client on the SSL port is closed with a log
line while a TLS connection opened before it goes on working.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest
from _harness.tls import make_pki
from _harness.waiting import wait_until

from pylog.client import Consumer, Producer, TopicPartition
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

N = 40
MTLS_RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("tls")
    pki = make_pki(base / "pki")
    data = base / "data"
    data.mkdir()
    b = BrokerProcess(
        data,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["broker"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki["ca"],
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": MTLS_RULES,
            "auto.create.topics.enable": "true",
        },
    )
    b.extra_args = ["--logger", "pylog.security.authentication=DEBUG"]
    b.start()
    ports = {
        name: int(port)
        for name, port in re.findall(r"listening on (\w+)://127\.0\.0\.1:(\d+)", b.read_log())
    }
    assert set(ports) == {"PLAINTEXT", "SSL", "MTLS"}, b.read_log()
    yield b, pki, ports
    b.stop()


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() * (1 + i % 50) for i in range(N)]


# --- produce and consume over SSL, one client library each -------------------------------


def _confluent(bootstrap: str, pki: dict[str, str], topic: str, values: list[bytes]) -> list[bytes]:
    import confluent_kafka

    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": pki["ca"],
        "ssl.endpoint.identification.algorithm": "https",
    }
    p = confluent_kafka.Producer({**conf, "acks": "all", "linger.ms": 5})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer(
        {
            **conf,
            "group.id": "g-" + topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def _kafka_python(
    bootstrap: str, pki: dict[str, str], topic: str, values: list[bytes]
) -> list[bytes]:
    import kafka

    conf = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SSL",
        "ssl_cafile": pki["ca"],
        "ssl_check_hostname": True,
    }
    p = kafka.KafkaProducer(acks="all", **conf)
    for v in values:
        p.send(topic, v)
    p.flush(30)
    p.close()
    c = kafka.KafkaConsumer(
        auto_offset_reset="earliest", consumer_timeout_ms=15000, enable_auto_commit=False, **conf
    )
    c.assign([kafka.TopicPartition(topic, 0)])
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == len(values):
            break
    c.close()
    return got


def _aiokafka(bootstrap: str, pki: dict[str, str], topic: str, values: list[bytes]) -> list[bytes]:
    import aiokafka
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        ctx = create_ssl_context(cafile=pki["ca"])
        p = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=ctx, acks="all"
        )
        await p.start()
        try:
            for v in values:
                await p.send(topic, v)
            await p.flush()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            security_protocol="SSL",
            ssl_context=ctx,
            enable_auto_commit=False,
        )
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: list[bytes] = []
            while len(got) < len(values):
                batch = await asyncio.wait_for(c.getmany(timeout_ms=500), 30)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


def _kcat(bootstrap: str, pki: dict[str, str], topic: str, values: list[bytes]) -> list[bytes]:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    common = [
        kcat,
        "-b",
        bootstrap,
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={pki['ca']}",
        "-t",
        topic,
    ]
    subprocess.run(
        common + ["-P", "-p", "0"],
        input=b"\n".join(values) + b"\n",
        check=True,
        timeout=60,
        capture_output=True,
    )
    out = subprocess.run(
        common + ["-C", "-p", "0", "-o", "beginning", "-e", "-q"],
        check=True,
        timeout=60,
        capture_output=True,
    ).stdout
    return out.splitlines()


def _pylog(bootstrap: str, pki: dict[str, str], topic: str, values: list[bytes]) -> list[bytes]:
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.truststore.location": pki["ca"],
        "ssl.truststore.type": "PEM",
    }
    with Producer(conf) as p:
        for v in values:
            p.send(topic, v)
        p.flush(30)
    with Consumer(conf) as c:
        c.assign([TopicPartition(topic, 0)])
        c.seek(TopicPartition(topic, 0), 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
    return got


@pytest.mark.parametrize(
    "client",
    [_confluent, _kafka_python, _aiokafka, _kcat, _pylog],
    ids=["confluent-kafka", "kafka-python", "aiokafka", "kcat", "pylog"],
)
def test_clients_produce_and_consume_over_ssl(tls, client) -> None:
    b, pki, ports = tls
    topic = _topic()
    values = _values(client.__name__)
    got = client(f"127.0.0.1:{ports['SSL']}", pki, topic, values)
    assert got == values


# --- metadata by listener -----------------------------------------------------------------


def test_metadata_gives_the_listener_the_client_connected_to(tls) -> None:
    from confluent_kafka.admin import AdminClient

    b, pki, ports = tls
    ssl_admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
            "security.protocol": "SSL",
            "ssl.ca.location": pki["ca"],
        }
    )
    plain_admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    for admin, port in ((ssl_admin, ports["SSL"]), (plain_admin, ports["PLAINTEXT"])):
        brokers = admin.list_topics(timeout=10).brokers
        assert [(bm.host, bm.port) for bm in brokers.values()] == [("127.0.0.1", port)]
        cluster = admin.describe_cluster().result(10)
        assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", port)]


# --- mutual TLS ---------------------------------------------------------------------------


def _raw_tls(port: int, pki: dict[str, str], cert: tuple[str, str] | None) -> bytes:
    """Handshake with the MTLS listener and send ApiVersions v0; the answer (b"" when the
    broker closed the connection)."""
    ctx = ssl.create_default_context(cafile=pki["ca"])
    if cert is not None:
        ctx.load_cert_chain(*cert)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as s,
    ):
        header = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        s.sendall(struct.pack(">i", len(header)) + header)
        try:
            return s.recv(4)
        except (ssl.SSLError, ConnectionError):
            return b""


def test_mtls_refuses_a_client_without_certificate_and_maps_a_principal(tls) -> None:
    import confluent_kafka

    b, pki, ports = tls
    assert _raw_tls(ports["MTLS"], pki, None) == b""  # refused: no certificate
    rogue = (pki["rogue_cert"], pki["rogue_key"])
    with pytest.raises(ssl.SSLError):  # TLS 1.2 fails in the handshake, 1.3 on the read
        if _raw_tls(ports["MTLS"], pki, rogue) == b"":
            raise ssl.SSLError("refused")
    assert len(_raw_tls(ports["MTLS"], pki, (pki["client_cert"], pki["client_key"]))) == 4
    wait_until(
        lambda: (
            "(listener MTLS): closing: TLS handshake failed: "
            "PEER_DID_NOT_RETURN_A_CERTIFICATE (ssl.client.auth=required"
            in b.read_log()
            and "CERTIFICATE_VERIFY_FAILED" in b.read_log()
        ),
        10,
        "the refusals logged",
    )
    topic = _topic()
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{ports['MTLS']}",
            "security.protocol": "SSL",
            "ssl.ca.location": pki["ca"],
            "ssl.certificate.location": pki["client_cert"],
            "ssl.key.location": pki["client_key"],
        }
    )
    p.produce(topic, b"from alice")
    assert p.flush(30) == 0
    wait_until(
        lambda: re.search(
            r"\(listener MTLS\): TLS handshake done \(TLSv1\.\d\), "
            r"principal User:alice",
            b.read_log(),
        ),
        10,
        "alice's principal",
    )


# --- garbage on the TLS port --------------------------------------------------------------


def test_plaintext_client_on_the_ssl_port_is_closed_and_others_go_on(tls) -> None:
    b, pki, ports = tls
    ctx = ssl.create_default_context(cafile=pki["ca"])
    with (
        socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as good,
    ):
        header = struct.pack(">hhih", 18, 0, 1, 4) + b"good"
        frame = struct.pack(">i", len(header)) + header
        good.sendall(frame)
        assert len(good.recv(4)) == 4
        # A plaintext Kafka client (ApiVersions in the clear) on the same port.
        with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=10) as bad:
            bad.sendall(frame)
            bad.settimeout(10)
            try:
                while bad.recv(4096):  # an alert maybe, then the close
                    pass
            except ConnectionError:
                pass
        wait_until(
            lambda: "a plaintext client on a TLS listener?" in b.read_log(),
            10,
            "the plaintext client's close logged",
        )
        good.recv(65536)  # the rest of the first answer
        good.sendall(frame)  # the TLS connection still works
        assert len(good.recv(4)) == 4


# --- the command-line tools ---------------------------------------------------------------


def test_cli_tools_connect_with_x_and_command_config(tls, tmp_path) -> None:
    import os
    import sys

    b, pki, ports = tls
    topic = _topic()
    env = dict(os.environ)
    base = [sys.executable, "-m", "pylog"]
    ssl_args = ["-b", f"127.0.0.1:{ports['SSL']}", "-X", "security.protocol=SSL",
                "-X", f"ssl.ca.location={pki['ca']}"]
    subprocess.run(base + ["topics", "create", topic, "-p", "1", *ssl_args], check=True,
                   timeout=60, env=env, capture_output=True)
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={pki['ca']}\n")
    out = subprocess.run(base + ["topics", "list", "-b", f"127.0.0.1:{ports['SSL']}",
                                 "--command-config", str(props)],
                         check=True, timeout=60, env=env, capture_output=True, text=True).stdout
    assert topic in out.split()
    groups = subprocess.run(base + ["groups", "list", "-b", f"127.0.0.1:{ports['MTLS']}",
                                    "--command-config", str(props),
                                    "-X", f"ssl.certificate.location={pki['client_cert']}",
                                    "-X", f"ssl.key.location={pki['client_key']}"],
                            timeout=60, env=env, capture_output=True, text=True)
    assert groups.returncode == 0, groups.stderr
    # produce and consume take every client setting with -X, and --command-config too.
    subprocess.run(base + ["produce", topic, "-b", f"127.0.0.1:{ports['SSL']}",
                           "--command-config", str(props)], input="over tls\n", check=True,
                   timeout=60, env=env, capture_output=True, text=True)
    got = subprocess.run(base + ["consume", topic, *ssl_args, "--from-beginning", "-n", "1"],
                         timeout=60, env=env, capture_output=True, text=True)
    assert got.returncode == 0 and got.stdout.strip() == "over tls", got.stderr
