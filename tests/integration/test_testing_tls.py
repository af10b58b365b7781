"""``pylog.testing.KafkaBroker(security_protocol="SSL")``: a test broker with a throwaway
CA, reached by confluent-kafka, kafka-python and pylog.client with ``client_config()``;
with ``ssl_client_auth="required"`` only clients holding a certificate from
``client_certificate()`` get in, under the principal it names."""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as CConsumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer as CProducer
from confluent_kafka.admin import AdminClient

from pylog.testing import KafkaBroker
from tests._harness.waiting import wait_until

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import kafka

pytestmark = pytest.mark.integration

CONF = {"broker.address.family": "v4"}


@pytest.fixture(scope="module")
def ssl_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(security_protocol="SSL") as broker:
        yield broker


def _topic(kb: KafkaBroker) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kb.create_topic(name, 1)
    return name


def _consume(conf: dict, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    c = CConsumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                   "auto.offset.reset": "earliest", **CONF})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        wait_until(lambda: got.extend(m.value() for m in c.consume(count, 1.0)
                                      if m.error() is None) or len(got) >= count,
                   timeout, f"{count} records from {topic}")
    finally:
        c.close()
    return got


def test_client_config_reaches_an_ssl_broker(ssl_broker: KafkaBroker) -> None:
    conf = ssl_broker.client_config()
    assert conf["security.protocol"] == "SSL"
    with open(conf["ssl.ca.location"]) as f:
        assert f.read().startswith("-----BEGIN CERTIFICATE-----")
    topic = _topic(ssl_broker)
    p = CProducer({**conf, **CONF})
    for i in range(5):
        p.produce(topic, b"v%d" % i)
    assert p.flush(30) == 0
    assert sorted(_consume(conf, topic, 5)) == [b"v%d" % i for i in range(5)]
    assert [r.value for r in ssl_broker.records(topic)] == [b"v%d" % i for i in range(5)]


def test_kafka_python_and_pylog_client_over_ssl(ssl_broker: KafkaBroker) -> None:
    from pylog.client import Producer

    topic = _topic(ssl_broker)
    kp = kafka.KafkaProducer(bootstrap_servers=ssl_broker.bootstrap_servers,
                             security_protocol="SSL",
                             ssl_cafile=ssl_broker.client_config()["ssl.ca.location"])
    kp.send(topic, b"from kafka-python").get(timeout=30)
    kp.close()
    with Producer(ssl_broker.client_config()) as p:
        p.send(topic, b"from pylog.client").result(timeout=30)
    ssl_broker.wait_for(topic, 2)
    assert {r.value for r in ssl_broker.records(topic)} == {b"from kafka-python",
                                                           b"from pylog.client"}


def test_a_plaintext_client_does_not_get_in(ssl_broker: KafkaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": ssl_broker.bootstrap_servers, **CONF})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


@pytest.fixture
def auth_debug() -> Iterator[None]:
    """The handshake's principal is logged at DEBUG by the authentication logger."""
    auth_log = logging.getLogger("pylog.security.authentication")
    saved = auth_log.level
    auth_log.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        auth_log.setLevel(saved)


@pytest.mark.usefixtures("auth_debug")
def test_mutual_tls_admits_certificates_of_its_ca_under_their_principal() -> None:
    with KafkaBroker(security_protocol="SSL", ssl_client_auth="required") as kb:
        topic = _topic(kb)
        alice = kb.client_certificate("alice")
        assert alice.principal == "User:CN=alice,O=pylog-test"
        p = CProducer({**kb.client_config(certificate=alice), **CONF})
        p.produce(topic, b"from alice")
        assert p.flush(30) == 0
        assert [r.value for r in kb.records(topic)] == [b"from alice"]
        wait_until(lambda: "principal User:CN=alice,O=pylog-test" in kb.log_text(), 10,
                   "alice's principal in the broker's log")
        # Without a certificate the handshake fails: no metadata, nothing written.
        admin = AdminClient({**kb.client_config(), **CONF})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)
        # A restarted broker keeps its CA: the same client settings work.
        kb.restart()
        p = CProducer({**kb.client_config(certificate=alice), **CONF})
        p.produce(topic, b"after restart")
        assert p.flush(30) == 0
        assert [r.value for r in kb.records(topic)] == [b"from alice", b"after restart"]


def test_bad_arguments_are_refused_with_what_to_give() -> None:
    with pytest.raises(ValueError, match="PLAINTEXT or SSL"):
        KafkaBroker(security_protocol="SASL_SSL")
    with pytest.raises(ValueError, match="none, requested, required"):
        KafkaBroker(security_protocol="SSL", ssl_client_auth="always")
    with pytest.raises(RuntimeError, match="security_protocol='SSL'"):
        KafkaBroker().client_certificate("alice")


@pytest.mark.kafka_broker(security_protocol="SSL")
def test_the_fixture_takes_the_security_protocol(kafka_broker: KafkaBroker) -> None:
    md = AdminClient({**kafka_broker.client_config(), **CONF}).list_topics(timeout=30)
    assert md.orig_broker_name.startswith("ssl://127.0.0.1:")
