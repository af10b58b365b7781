"""The wire fuzzer aimed at SASL (``tests/fuzz/sasl.py``): mutants of SaslHandshake,
SaslAuthenticate (PLAIN, SCRAM, OAUTHBEARER) and raw v0 tokens, each sent on a connection
led into the matching state of the broker's SASL state machine, against a broker whose
only listener is SASL_PLAINTEXT. Every mutant is answered or closed, never a hang; the
broker stays up with a clean log, and a SCRAM client still logs in and round-trips."""

from __future__ import annotations

import concurrent.futures
import pathlib
import time

import pytest
from integration.conftest import BrokerProcess  # type: ignore[import-not-found]

from pylog.security.sasl.credentials import ScramCredentials
from pylog.security.sasl.scram import make_credential

from . import driver, sasl

pytestmark = pytest.mark.integration

SEED = 21  # issue 21
MUTANTS = 1200


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("sasl-fuzz") / "data"
    data.mkdir()
    ScramCredentials.write_file(str(data / "scram-credentials.json"), {sasl.USER: {
        m: make_credential(m, sasl.PASSWORD) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}})
    b = BrokerProcess(data, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": sasl.PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "10",
        "connections.max.reauth.ms": "60000",
        "auto.create.topics.enable": "true",
    })
    b.start()
    import re

    b.port = int(re.findall(r"listening on SASL_PLAINTEXT://127\.0\.0\.1:(\d+)", b.read_log())[0])
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log tail:\n{b.read_log()[-5000:]}"


def test_sasl_fuzz(sasl_broker: BrokerProcess, tmp_path: pathlib.Path) -> None:
    health = driver.Health(sasl_broker.proc.pid, sasl_broker.log_path)
    address = (sasl_broker.host, sasl_broker.port)
    report = driver.Report(SEED)
    t0 = time.monotonic()
    gen = list(sasl.mutants(SEED, MUTANTS))
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(lambda m: sasl.send_session(address, m[2], m[3]), gen))
    for (index, kind, _prefix, data), outcome in zip(gen, outcomes, strict=True):
        report.add(index, kind, data, outcome)
        if outcome.status in driver.FAILURES:
            report.saved.append(driver.save(tmp_path, SEED, index, kind, data))
    report.seconds = time.monotonic() - t0
    report.broker_problems += health.problems()
    print(report.summary())
    assert report.ok and not report.broker_problems, report.summary()
    # The seeds reached every state: logins succeeded and failed, connections were closed.
    log = sasl_broker.read_log()
    assert "authenticated as User:fuzz (PLAIN)" in log
    assert "authentication failed" in log and "before SASL authentication" in log
    assert report.by_kind["seed", "answered"] > 50
    # A normal SCRAM client still logs in and round-trips.
    from pylog.client import Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": sasl_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": sasl.USER,
            "sasl.password": sasl.PASSWORD}
    with Producer(conf) as p:
        p.send("after-sasl-fuzz", b"ok").result(30)
    with Consumer(conf) as c:
        c.assign([TopicPartition("after-sasl-fuzz", 0)])
        c.seek(TopicPartition("after-sasl-fuzz", 0), 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
    assert got == [b"ok"]
    assert health.problems() == []
