"""pylog.testing.KafkaBroker: the real broker on a thread of the test process (lifecycle,
settings, topics, reading the log back, restarts, and the errors of bad use)."""

from __future__ import annotations

import asyncio
import os
import socket
import warnings

import pytest

from pylog import errors
from pylog.config import ConfigError
from pylog.testing import BrokerNotRunningError, KafkaBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import kafka

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    for v in values:
        p.produce(topic, value=v, key=b"k")
    assert p.flush(30) == 0


def test_context_manager_serves_on_an_os_chosen_port_and_cleans_up() -> None:
    with KafkaBroker() as broker:
        host, port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        data_dir = broker.data_dir
        assert data_dir is not None and os.path.isdir(data_dir)
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    assert not os.path.exists(data_dir)
    assert not broker.running


def test_settings_in_both_spellings_reach_the_broker() -> None:
    with KafkaBroker(num_partitions=3, **{"auto.create.topics.enable": False}) as broker:
        assert broker.broker is not None
        assert broker.broker.config["num.partitions"] == 3
        assert broker.broker.config["auto.create.topics.enable"] is False
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                       max_block_ms=2000)
        try:
            with pytest.raises(kafka.errors.KafkaTimeoutError):  # no auto-creation
                producer.send("nope", b"x").get(5)
        finally:
            producer.close(0)
        broker.create_topic("t3")  # partitions=1 given
        assert len(broker.broker.log_manager.topics["t3"].partitions) == 1
        broker.create_topic("t4", partitions=4, config={"cleanup.policy": "compact"})
        assert broker.broker.log_manager.topics["t4"].config["cleanup.policy"] == ["compact"]


def test_a_mapping_and_keywords_combine() -> None:
    with KafkaBroker({"log.retention.hours": 1}, log_segment_bytes=1 << 20) as broker:
        assert broker.broker is not None
        assert broker.broker.config["log.retention.hours"] == 1
        assert broker.broker.config["log.segment.bytes"] == 1 << 20
    with pytest.raises(ConfigError, match="given twice"):
        KafkaBroker({"num.partitions": 2}, num_partitions=3)


def test_bad_settings_fail_at_construction_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match="did you mean 'num.partitions'"):
        KafkaBroker(num_partitons=3)
    with pytest.raises(ConfigError, match="num.partitions"):
        KafkaBroker(num_partitions="three")
    with pytest.raises(ConfigError, match="chosen by KafkaBroker"):
        KafkaBroker(listeners="PLAINTEXT://0.0.0.0:9092")
    with pytest.raises(ValueError, match="'system', 'virtual'"):
        KafkaBroker(clock="fake")


def test_records_wait_for_and_restart_keeping_the_data() -> None:
    with KafkaBroker() as broker:
        broker.create_topic("orders", partitions=2)
        _produce(broker.bootstrap_servers, "orders", [b"a", b"b", b"c"])
        got = broker.wait_for("orders", 3, timeout=10)
        assert [r.value for r in got] == [b"a", b"b", b"c"]  # one key: one partition
        assert {r.key for r in got} == {b"k"} and not any(r.transactional for r in got)
        assert [r.offset for r in got] == [0, 1, 2]
        port = broker.port
        broker.restart()
        assert broker.port == port
        assert [r.value for r in broker.records("orders")] == [b"a", b"b", b"c"]
        _produce(broker.bootstrap_servers, "orders", [b"d"])
        assert len(broker.wait_for("orders", 4)) == 4
        with pytest.raises(TimeoutError, match="holds 4 records after 0.2 s, waited for 5"):
            broker.wait_for("orders", 5, timeout=0.2)
        with pytest.raises(KeyError, match="no topic 'missing'"):
            broker.records("missing")
        with pytest.raises(errors.TopicAlreadyExistsError):
            broker.create_topic("orders")


def test_keep_data_and_a_given_directory_survive_stop(tmp_path) -> None:
    broker = KafkaBroker(keep_data=True).start()
    broker.create_topic("kept")
    broker.stop()
    assert broker.data_dir is not None and os.path.isdir(os.path.join(broker.data_dir, "kept-0"))
    again = KafkaBroker(data_dir=broker.data_dir).start()
    try:
        assert "kept" in again.topics()
    finally:
        again.stop()
    assert os.path.isdir(broker.data_dir)  # a given directory is the caller's


def test_a_stopped_broker_says_so() -> None:
    broker = KafkaBroker()
    with pytest.raises(BrokerNotRunningError, match="call start"):
        _ = broker.bootstrap_servers
    broker.start()
    broker.stop()
    for use in (lambda: broker.bootstrap_servers, lambda: broker.records("t"),
                lambda: broker.create_topic("t"), lambda: broker.fail_next("Produce", 6),
                broker.pause, broker.drop_connections):
        with pytest.raises(BrokerNotRunningError, match="not running"):
            use()
    broker.stop()  # stopping twice is fine


def test_advance_needs_the_virtual_clock() -> None:
    with KafkaBroker() as broker:
        with pytest.raises(RuntimeError, match="KafkaBroker\\(clock='virtual'\\)"):
            broker.advance(1)


def test_usable_from_asyncio_tests() -> None:
    """The broker's loop is its own: an asyncio test's loop and client run beside it."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main(bootstrap: str) -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("aio", b"one")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio", bootstrap_servers=bootstrap,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 20)
            return [msg.value]
        finally:
            await consumer.stop()

    with KafkaBroker() as broker:
        assert asyncio.run(main(broker.bootstrap_servers)) == [b"one"]
        assert [r.value for r in broker.records("aio")] == [b"one"]


def test_restart_after_refusing_connections_listens_again() -> None:
    """Faults belong to one run of the broker: a restart starts without them."""
    with KafkaBroker() as broker:
        broker.create_topic("t")
        broker.refuse_connections()
        broker.fail_next("Produce", "TOPIC_AUTHORIZATION_FAILED")
        broker.restart()
        assert broker.faults is not None and not broker.faults.active
        _produce(broker.bootstrap_servers, "t", [b"after restart"])
        assert [r.value for r in broker.records("t")] == [b"after restart"]
        broker.accept_connections()  # nothing refused any more: no second listener


def test_pylog_log_level_is_restored_after_the_last_broker() -> None:
    import logging

    logger = logging.getLogger("pylog")
    before = logger.level
    logger.setLevel(logging.NOTSET)  # as an application that configures nothing
    try:
        with KafkaBroker() as first:
            second = KafkaBroker().start()
            first.stop()
            assert logger.level == logging.INFO  # the second still runs
            second.stop()
        assert logger.level == logging.NOTSET
        logger.setLevel(logging.ERROR)  # the application's choice is left alone
        with KafkaBroker():
            assert logger.level == logging.ERROR
    finally:
        logger.setLevel(before)
