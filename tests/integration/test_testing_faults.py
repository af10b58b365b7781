"""pylog.testing's fault injection as the clients people use see it: each injected fault
arrives as Kafka's error (or a timeout, a reset, a refused connection), and the broker's
log shows it."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from pylog import errors
from pylog.testing import KafkaBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import aiokafka
    import aiokafka.errors
    import kafka
    import kafka.errors

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.integration

CONF = {"broker.address.family": "v4"}


@pytest.fixture
def broker():
    with KafkaBroker() as b:
        b.create_topic("t")
        yield b


def _confluent_produce(broker: KafkaBroker, value: bytes, **conf) -> KafkaError | None:
    errs: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, **CONF, **conf})
    p.produce("t", value=value, on_delivery=lambda err, msg: errs.append(err))
    assert p.flush(30) == 0
    return errs[0]


# --- fail_next: a non-retriable error reaches every client as Kafka's error -----------------


def test_fail_next_confluent_kafka(broker: KafkaBroker) -> None:
    broker.fail_next("Produce", "TOPIC_AUTHORIZATION_FAILED")
    err = _confluent_produce(broker, b"x")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert broker.records("t") == []
    assert _confluent_produce(broker, b"y") is None  # one request only
    assert "fault: answering Produce" in broker.log_text()
    assert "TOPIC_AUTHORIZATION_FAILED (29)" in broker.log_text()


def test_fail_next_kafka_python(broker: KafkaBroker) -> None:
    broker.fail_next("Produce", "TOPIC_AUTHORIZATION_FAILED")
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            p.send("t", b"x").get(20)
    finally:
        p.close(5)
    assert broker.records("t") == []


def test_fail_next_aiokafka(broker: KafkaBroker) -> None:
    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await p.start()
        try:
            broker.fail_next("Produce", "TOPIC_AUTHORIZATION_FAILED")
            with pytest.raises(aiokafka.errors.TopicAuthorizationFailedError):
                await p.send_and_wait("t", b"x")
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_fail_next_pylog_client(broker: KafkaBroker) -> None:
    from pylog.client import Producer as PylogProducer

    broker.fail_next("Produce", errors.TopicAuthorizationFailedError)
    with PylogProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False,
                       acks=1) as p:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.send("t", b"x").result(20)


def test_a_retriable_error_is_retried_by_the_client(broker: KafkaBroker) -> None:
    broker.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    assert _confluent_produce(broker, b"once", **{"enable.idempotence": True}) is None
    assert [r.value for r in broker.records("t")] == [b"once"]
    assert broker.faults is not None and broker.faults.injected == 2
    assert broker.log_text().count("with NOT_LEADER_OR_FOLLOWER (6)") == 2


def test_group_and_transaction_apis_fail_with_their_error(broker: KafkaBroker) -> None:
    broker.fail_next("JoinGroup", "GROUP_AUTHORIZATION_FAILED")
    c = kafka.KafkaConsumer("t", bootstrap_servers=broker.bootstrap_servers, group_id="g")
    try:
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            for _ in range(20):
                c.poll(500)
    finally:
        c.close()
    broker.fail_next("InitProducerId", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx", **CONF})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(20)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# --- latency, pause, dropped and refused connections ------------------------------------


def test_delay_makes_a_client_time_out(broker: KafkaBroker) -> None:
    broker.delay("Produce", 1500)
    err = _confluent_produce(broker, b"late", **{"message.timeout.ms": 300, "linger.ms": 0})
    assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT
    broker.delay("Produce", 0)
    assert _confluent_produce(broker, b"now") is None
    assert "delaying Produce" in broker.log_text()


def test_pause_holds_requests_until_resume(broker: KafkaBroker) -> None:
    from pylog.client import Admin, KafkaTimeoutError

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **CONF})
    admin.list_topics(timeout=10)
    pylog_admin = Admin(bootstrap_servers=broker.bootstrap_servers, default_api_timeout_ms=500,
                        request_timeout_ms=400)
    pylog_admin.list_topics()  # connected before the pause
    broker.pause()
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=0.5)
    # A timed-out request, or (librdkafka opening its connection to the broker's
    # advertised address meanwhile) a connection whose ApiVersions went unanswered.
    assert info.value.args[0].code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)
    with pylog_admin, pytest.raises(KafkaTimeoutError):
        pylog_admin.list_topics()
    broker.resume()
    assert "t" in admin.list_topics(timeout=10).topics
    assert "holding Metadata" in broker.log_text()


def test_drop_connections_resets_clients_which_reconnect(broker: KafkaBroker) -> None:
    from pylog.client import Producer as PylogProducer

    async def aio() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await p.start()
        try:
            await p.send_and_wait("t", b"before")
            assert await asyncio.to_thread(broker.drop_connections) >= 1
            await p.send_and_wait("t", b"after")
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(aio(), 60))
    with PylogProducer(bootstrap_servers=broker.bootstrap_servers) as p:
        p.send("t", b"pylog-before").result(20)
        assert broker.drop_connections() >= 1
        p.send("t", b"pylog-after").result(20)
    values = [r.value for r in broker.records("t")]
    assert values == [b"before", b"after", b"pylog-before", b"pylog-after"]
    assert "dropping" in broker.log_text()


def test_refuse_connections_until_accepted(broker: KafkaBroker) -> None:
    from pylog.client import Admin
    from pylog.client.errors import KafkaConnectionError

    broker.refuse_connections()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **CONF})
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=1)
    assert info.value.args[0].code() == KafkaError._TRANSPORT
    ours = Admin(bootstrap_servers=broker.bootstrap_servers, default_api_timeout_ms=1000)
    try:
        with pytest.raises(KafkaConnectionError, match="Connect call failed"):
            ours.list_topics()
    finally:
        ours.close()
    broker.accept_connections()
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        p.send("t", b"in").get(20)
    finally:
        p.close(5)
    assert [r.value for r in broker.records("t")] == [b"in"]
    assert "refusing connections" in broker.log_text()


def test_clear_faults_removes_everything(broker: KafkaBroker) -> None:
    broker.fail_next("Produce", "TOPIC_AUTHORIZATION_FAILED", count=5)
    broker.delay("Fetch", 100)
    broker.refuse_connections()
    broker.clear_faults()
    assert broker.faults is not None and not broker.faults.active
    assert _confluent_produce(broker, b"ok") is None
