"""SASL principals under the ACL authorizer: a broker with a SASL_PLAINTEXT (PLAIN) listener,
``authorizer.class.name`` set and ``User:admin`` a super user. alice, logged in with PLAIN,
may do nothing until the admin grants it, over the same SASL listener; the SCRAM admin APIs
need DESCRIBE / ALTER on the cluster, as in Kafka."""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as CProducer

from pylog import errors
from pylog.client import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Admin,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("sasl-acls")
    b = BrokerProcess(data, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "auto.create.topics.enable": "false",
    })
    b.start()
    port = re.search(r"listening on SASL_PLAINTEXT://127\.0\.0\.1:(\d+)", b.read_log())
    assert port, b.read_log()
    b.port = int(port.group(1))
    try:
        yield b
    finally:
        b.stop()


def _conf(b: BrokerProcess, user: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{b.port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}


def _produce(conf: dict[str, str], topic: str) -> KafkaError | None:
    errs: list[KafkaError | None] = []
    p = CProducer({**conf, "message.timeout.ms": 10000})
    try:
        p.produce(topic, b"v", on_delivery=lambda err, _m: errs.append(err))
    except KafkaException as exc:  # librdkafka may know the denial from its metadata
        return exc.args[0]
    p.flush(30)
    return errs[0]


def test_a_sasl_principal_gets_what_the_admin_grants(broker) -> None:
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    with Admin(_conf(broker, "admin")) as admin:
        from pylog.client import NewTopic

        admin.create_topics([NewTopic(topic, 1, 1)])
    err = _produce(_conf(broker, "alice"), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with Admin(_conf(broker, "admin")) as admin:
        admin.create_acls([AclBinding(
            ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
            AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW))])
    assert _produce(_conf(broker, "alice"), topic) is None
    assert "Principal = User:alice is Denied operation = " in broker.read_log()


def test_scram_admin_apis_need_the_cluster(broker) -> None:
    with Admin(_conf(broker, "alice")) as alice:
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            alice.alter_user_scram_credentials({"mallory": {"SCRAM-SHA-256": "x" * 12}})
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            alice.describe_user_scram_credentials()
    with Admin(_conf(broker, "admin")) as admin:
        admin.alter_user_scram_credentials({"carol": {"SCRAM-SHA-256": "carol-secret"}})
        assert admin.describe_user_scram_credentials(["carol"]) == {
            "carol": {"SCRAM-SHA-256": 4096}}
