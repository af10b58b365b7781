"""SASL listeners with real clients: one broker with PLAINTEXT, SASL_SSL and SASL_PLAINTEXT
listeners offering PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (unsecured tokens).

SCRAM users are created with confluent-kafka's AdminClient and with ``pylog configs``; the
data directory holds salted keys only. confluent-kafka, kafka-python, aiokafka, kcat and
pylog.client produce and consume over SASL_SSL with each mechanism they speak. A wrong
password and an unknown user fail with the same sentence; a client that does not speak SASL
is closed with a log line; a v0 handshake (raw tokens) works; the broker keeps serving.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid

import pytest
from _harness.tls import make_pki
from _harness.waiting import wait_until

from pylog.client import Consumer, Producer, TopicPartition
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

N = 30
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
FAILED = "Authentication failed: Invalid username or password"


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("sasl")
    pki = make_pki(base / "pki")
    data = base / "data"
    data.mkdir()
    b = BrokerProcess(
        data,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["broker"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki["ca"],
            "sasl.enabled.mechanisms": MECHANISMS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "connection.failed.authentication.delay.ms": "50",
            "auto.create.topics.enable": "true",
        },
    )
    b.extra_args = ["--logger", "pylog.security.authentication=DEBUG"]
    b.start()
    ports = {
        name: int(port)
        for name, port in re.findall(r"listening on (\w+)://127\.0\.0\.1:(\d+)", b.read_log())
    }
    assert set(ports) == {"PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT"}, b.read_log()
    b.port = ports["PLAINTEXT"]
    try:
        _create_users(b, ports, pki)
        yield b, pki, ports
    finally:
        b.stop()


def _create_users(b: BrokerProcess, ports: dict[str, int], pki: dict[str, str]) -> None:
    """scram256/scram512 through confluent-kafka's AdminClient (authenticated as admin with
    PLAIN over SASL_SSL), bob through ``pylog configs`` over SASL_PLAINTEXT."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
                         "security.protocol": "SASL_SSL", "ssl.ca.location": pki["ca"],
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    ups = [UserScramCredentialUpsertion("scram", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                        b"scram-secret"),
           UserScramCredentialUpsertion("scram", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                        b"scram-secret")]
    for f in admin.alter_user_scram_credentials(ups).values():
        assert f.result(timeout=30) is None
    described = admin.describe_user_scram_credentials(["scram"])["scram"].result(timeout=30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    cli = [sys.executable, "-m", "pylog", "configs"]
    x = ["--bootstrap-server", f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
         "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
         "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret"]
    out = subprocess.run(cli + ["alter", "--entity-type", "users", "--entity-name", "bob",
                                "--add-config", "SCRAM-SHA-256=[iterations=8192,password=bob-secret],"
                                "SCRAM-SHA-512=[password=bob-secret],producer_byte_rate=104857600"]
                         + x, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = subprocess.run(cli + ["describe", "--entity-type", "users", "--entity-name", "bob"] + x,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "SCRAM credential configs for user-principal 'bob' are " \
           "SCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=4096" in out.stdout, out.stdout
    assert "producer_byte_rate=104857600" in out.stdout
    assert "bob-secret" not in out.stdout


def test_credentials_are_stored_salted(sasl) -> None:
    b, _pki, _ports = sasl
    stored = (b.data_dir / "scram-credentials.json").read_text()
    assert '"scram"' in stored and '"bob"' in stored and "iterations=8192" in stored
    for path in b.data_dir.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            assert b"scram-secret" not in blob and b"bob-secret" not in blob, path


def _topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() * (1 + i % 20) for i in range(N)]


USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("scram", "scram-secret"),
         "SCRAM-SHA-512": ("bob", "bob-secret")}


def _confluent(bootstrap: str, pki: dict[str, str], mech: str, topic: str, values: list[bytes],
               extra: dict | None = None) -> list[bytes]:
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": pki["ca"], "sasl.mechanism": mech}
    if mech == "OAUTHBEARER":
        conf.update({"sasl.oauthbearer.config": "principal=oauth-user",
                     "enable.sasl.oauthbearer.unsecure.jwt": True})
    else:
        conf.update({"sasl.username": USERS[mech][0], "sasl.password": USERS[mech][1]})
    conf.update(extra or {})
    p = confluent_kafka.Producer({**conf, "acks": "all", "linger.ms": 5})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


class _Token:
    def __init__(self, sub: str) -> None:
        from pylog.security.sasl.oauthbearer import unsecured_token

        self._token = unsecured_token(sub, 3600)

    def token(self) -> str:
        return self._token

    def extensions(self) -> dict:
        return {}


def _kafka_python(bootstrap: str, pki: dict[str, str], mech: str, topic: str,
                  values: list[bytes]) -> list[bytes]:
    import kafka

    conf: dict = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL",
                  "ssl_cafile": pki["ca"], "sasl_mechanism": mech}
    if mech == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self) -> str:
                return _Token("kp-user").token()
        conf["sasl_oauth_token_provider"] = Provider()
    else:
        conf.update(sasl_plain_username=USERS[mech][0], sasl_plain_password=USERS[mech][1])
    p = kafka.KafkaProducer(acks="all", **conf)
    for v in values:
        p.send(topic, v)
    p.flush(30)
    p.close()
    c = kafka.KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=15000,
                            enable_auto_commit=False, **conf)
    c.assign([kafka.TopicPartition(topic, 0)])
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == len(values):
            break
    c.close()
    return got


def _aiokafka(bootstrap: str, pki: dict[str, str], mech: str, topic: str,
              values: list[bytes]) -> list[bytes]:
    import aiokafka
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        conf: dict = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL",
                      "ssl_context": create_ssl_context(cafile=pki["ca"]), "sasl_mechanism": mech}
        if mech == "OAUTHBEARER":
            from aiokafka.abc import AbstractTokenProvider

            class Provider(AbstractTokenProvider):
                async def token(self) -> str:
                    return _Token("aio-user").token()
            conf["sasl_oauth_token_provider"] = Provider()
        else:
            conf.update(sasl_plain_username=USERS[mech][0], sasl_plain_password=USERS[mech][1])
        p = aiokafka.AIOKafkaProducer(acks="all", **conf)
        await p.start()
        try:
            for v in values:
                await p.send(topic, v)
            await p.flush()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(enable_auto_commit=False, **conf)
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


def _kcat(bootstrap: str, pki: dict[str, str], mech: str, topic: str,
          values: list[bytes]) -> list[bytes]:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    if mech == "OAUTHBEARER":  # librdkafka's own unsecured token
        creds = ["-X", "sasl.oauthbearer.config=principal=kcat-user",
                 "-X", "enable.sasl.oauthbearer.unsecure.jwt=true"]
    else:
        user, password = USERS[mech]
        creds = ["-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    common = [kcat, "-b", bootstrap, "-X", "security.protocol=SASL_SSL",
              "-X", f"ssl.ca.location={pki['ca']}", "-X", f"sasl.mechanisms={mech}",
              *creds, "-t", topic]
    subprocess.run(common + ["-P", "-p", "0"], input=b"\n".join(values) + b"\n", check=True,
                   timeout=60, capture_output=True)
    out = subprocess.run(common + ["-C", "-p", "0", "-o", "beginning", "-e", "-q"], check=True,
                         timeout=60, capture_output=True).stdout
    return out.splitlines()


def _pylog(bootstrap: str, pki: dict[str, str], mech: str, topic: str,
           values: list[bytes]) -> list[bytes]:
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "ssl.truststore.location": pki["ca"], "ssl.truststore.type": "PEM",
            "sasl.mechanism": mech}
    if mech == "OAUTHBEARER":
        conf["sasl.oauthbearer.config"] = "principal=pylog-user"
    else:
        conf.update({"sasl.username": USERS[mech][0], "sasl.password": USERS[mech][1]})
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


CLIENTS = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka,
           "kcat": _kcat, "pylog": _pylog}


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_round_trip_over_sasl_ssl(sasl, client: str, mech: str) -> None:
    b, pki, ports = sasl
    topic = _topic()
    values = _values(f"{client}-{mech}")
    got = CLIENTS[client](f"127.0.0.1:{ports['SASL_SSL']}", pki, mech, topic, values)
    assert sorted(got) == sorted(values)
    principal = {"PLAIN": "alice", "SCRAM-SHA-256": "scram", "SCRAM-SHA-512": "bob"}.get(mech)
    if principal is not None:
        assert f"authenticated as User:{principal} ({mech})" in b.read_log()
    else:
        expected = {"confluent": "oauth-user", "kafka-python": "kp-user", "aiokafka": "aio-user",
                    "kcat": "kcat-user", "pylog": "pylog-user"}[client]
        assert f"authenticated as User:{expected} (OAUTHBEARER)" in b.read_log()


def _pylog_error(port: int, mech: str, user: str, password: str) -> str:
    from pylog.client import Admin

    with pytest.raises(Exception) as info:  # noqa: PT011 - the text is what is checked
        with Admin({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password,
                    "request.timeout.ms": 3000, "default.api.timeout.ms": 3000}) as admin:
            admin.list_topics()
    return str(info.value)


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_and_unknown_user_fail_alike(sasl, mech: str) -> None:
    b, pki, ports = sasl
    user = "alice" if mech == "PLAIN" else "scram"
    wrong = _pylog_error(ports["SASL_PLAINTEXT"], mech, user, "nope")
    unknown = _pylog_error(ports["SASL_PLAINTEXT"], mech, "mallory", "nope")
    sentence = FAILED if mech == "PLAIN" else (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mech}")
    assert sentence in wrong and sentence in unknown
    log = b.read_log()
    assert f"authentication failed: {mech}: unknown user 'mallory'" in log
    # confluent-kafka sees the same sentence, and the broker goes on serving.
    import confluent_kafka

    errs: list[str] = []
    p = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                                 "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                                 "sasl.username": "mallory", "sasl.password": "x",
                                 "error_cb": lambda e: errs.append(e.str())})
    p.produce("never", b"x")
    try:
        wait_until(lambda: p.poll(0.2) is not None and bool(errs) or bool(errs), 30,
                   "confluent-kafka's authentication error")
    finally:
        p.purge()
        p.flush(1)
    assert any(sentence in e for e in errs), errs
    topic = _topic()
    assert sorted(_pylog(f"127.0.0.1:{ports['SASL_SSL']}", pki, "PLAIN", topic, [b"a", b"b"])) == [b"a", b"b"]


def _frame(api_key: int, version: int, cid: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, cid, 4) + b"test"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _recv_frame(s: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf
    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def test_requests_before_authentication_close_the_connection(sasl) -> None:
    b, _pki, ports = sasl
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as s:
        # Metadata v1 (all topics) before any SASL: closed, with a log line.
        s.sendall(_frame(3, 1, 7, struct.pack(">i", -1)))
        assert s.recv(100) == b""
    wait_until(lambda: "unexpected request (API key 3) before SASL authentication" in b.read_log(),
               10, "the log line of the closed connection")
    # kafka-python without SASL on the SASL port fails; SASL clients go on working.
    import kafka
    import kafka.errors

    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                               request_timeout_ms=3000, api_version_auto_timeout_ms=3000).list_topics()


def test_v0_handshake_then_raw_tokens(sasl) -> None:
    b, _pki, ports = sasl
    mech = b"PLAIN"
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(_frame(17, 0, 1, struct.pack(">h", len(mech)) + mech))
        resp = _recv_frame(s)
        cid, code = struct.unpack_from(">ih", resp)
        assert (cid, code) == (1, 0)
        token = b"\x00alice\x00alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)  # no Kafka header: v0 framing
        assert _recv_frame(s) == b""  # PLAIN's empty final challenge, raw
        # Now authenticated: an ordinary ApiVersions v0 request is answered.
        s.sendall(_frame(18, 0, 2, b""))
        cid, code = struct.unpack_from(">ih", _recv_frame(s))
        assert (cid, code) == (2, 0)
    assert "authenticated as User:alice (PLAIN)" in b.read_log()


def test_sasl_requests_on_a_plaintext_listener_are_illegal(sasl) -> None:
    _b, _pki, ports = sasl
    mech = b"PLAIN"
    with socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]), timeout=10) as s:
        s.sendall(_frame(17, 1, 1, struct.pack(">h", len(mech)) + mech))
        cid, code = struct.unpack_from(">ih", _recv_frame(s))
        assert (cid, code) == (1, 34)  # ILLEGAL_SASL_STATE


# --- KIP-368: connections.max.reauth.ms ----------------------------------------------------


@pytest.fixture(scope="module")
def reauth(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("reauth") / "data"
    data.mkdir()
    b = BrokerProcess(data, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": "2000",
        "auto.create.topics.enable": "true",
    })
    b.start()
    b.port = int(re.findall(r"listening on SASL_PLAINTEXT://127\.0\.0\.1:(\d+)", b.read_log())[0])
    yield b
    b.stop()


def test_clients_reauthenticate_on_live_connections(reauth) -> None:
    import confluent_kafka

    b = reauth
    topic = _topic()
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    p = confluent_kafka.Producer({**conf, "linger.ms": 0})
    delivered = []
    with Producer(conf) as ours:
        deadline = time.monotonic() + 7
        i = 0
        while time.monotonic() < deadline:
            p.produce(topic, f"c{i}".encode(), on_delivery=lambda e, m: delivered.append(e))
            ours.send(topic, f"p{i}".encode()).result(15)
            p.poll(0.1)
            i += 1
            time.sleep(0.1)
        assert p.flush(15) == 0
    assert delivered and all(e is None for e in delivered)
    log = b.read_log()
    assert log.count("User:alice re-authenticated (PLAIN)") >= 4, log[-3000:]
    assert "expired" not in log


def test_expired_session_without_reauthentication_is_closed(reauth) -> None:
    b = reauth
    mech = b"PLAIN"
    token = b"\x00alice\x00alice-secret"
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(_frame(17, 1, 1, struct.pack(">h", len(mech)) + mech))
        _recv_frame(s)
        s.sendall(_frame(36, 1, 2, struct.pack(">i", len(token)) + token))
        resp = _recv_frame(s)
        cid, code = struct.unpack_from(">ih", resp)
        assert (cid, code) == (2, 0)
        assert struct.unpack(">q", resp[-8:])[0] == 2000  # session_lifetime_ms
        s.sendall(_frame(18, 0, 3, b""))
        assert struct.unpack_from(">ih", _recv_frame(s)) == (3, 0)
        time.sleep(2.5)
        s.sendall(_frame(18, 0, 4, b""))  # not a re-authentication: closed
        assert s.recv(100) == b""
    wait_until(lambda: "expired (connections.max.reauth.ms)" in b.read_log(), 10, "the log line")


def test_the_sasl_user_is_the_quota_user(sasl) -> None:
    """A producer_byte_rate quota on /config/users/scram throttles what user scram produces
    over SASL (the principal's name is the quota user), not what others produce."""
    import confluent_kafka

    from pylog.client import Admin

    b, pki, ports = sasl
    with Admin({"bootstrap.servers": b.bootstrap}) as admin:
        admin.alter_client_quotas({"user": "scram"}, {"producer_byte_rate": 2048})

    def throttled(mech: str) -> int:
        seen: list[int] = []
        user, password = USERS[mech]
        p = confluent_kafka.Producer({
            "bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": pki["ca"], "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": password, "linger.ms": 0,
            "throttle_cb": lambda ev: seen.append(ev.throttle_time)})
        topic = _topic()
        for _ in range(25):  # until the first throttled answer (then it would only grow)
            p.produce(topic, b"x" * 2000)
            p.flush(30)
            p.poll(0.1)
            if any(t > 0 for t in seen):
                break
        return len([t for t in seen if t > 0])

    try:
        assert throttled("SCRAM-SHA-256") > 0  # user "scram"
        assert throttled("PLAIN") == 0  # user "alice": no quota
    finally:
        with Admin({"bootstrap.servers": b.bootstrap}) as admin:
            admin.alter_client_quotas({"user": "scram"}, {"producer_byte_rate": None})


def test_pylog_configs_deletes_scram_credentials(sasl) -> None:
    b, _pki, _ports = sasl
    cli = [sys.executable, "-m", "pylog", "configs"]
    x = ["--bootstrap-server", b.bootstrap]
    user = ["--entity-type", "users", "--entity-name", "temp"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cli + list(args) + x, capture_output=True, text=True, timeout=60)

    assert run("alter", *user, "--add-config",
               "SCRAM-SHA-256=[password=t1],SCRAM-SHA-512=[iterations=4096,password=t2]").returncode == 0
    assert run("alter", *user, "--delete-config", "SCRAM-SHA-512").returncode == 0
    out = run("describe", *user)
    assert "SCRAM credential configs for user-principal 'temp' are SCRAM-SHA-256=iterations=4096" \
        in out.stdout, out.stdout + out.stderr
    gone = run("alter", *user, "--delete-config", "SCRAM-SHA-512")
    assert gone.returncode != 0 and "RESOURCE_NOT_FOUND" in gone.stderr, gone.stderr
    low = run("alter", *user, "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert low.returncode != 0 and "UNACCEPTABLE_CREDENTIAL" in low.stderr, low.stderr
    assert "Iterations 100 is less than the minimum 4096" in low.stderr
