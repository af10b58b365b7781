"""Client settings: dotted mapping and underscore keywords, Kafka defaults, clear errors."""

from __future__ import annotations

import pytest

from pylog.client.aio.producer import producer_settings
from pylog.client.config import (
    ADMIN,
    CONSUMER,
    PRODUCER,
    ConfigError,
    check_group_protocol,
    resolve,
)

B = {"bootstrap.servers": "127.0.0.1:9092"}


def test_mapping_and_keywords_give_the_same_settings() -> None:
    a = resolve(PRODUCER, {"bootstrap.servers": "h:1,h2:2", "linger.ms": 7, "acks": "1"}, {})
    b = resolve(PRODUCER, None, {"bootstrap_servers": ["h:1", "h2:2"], "linger_ms": "7", "acks": 1})
    assert a == b
    assert a["bootstrap.servers"] == [("h", 1), ("h2", 2)]
    assert a["linger.ms"] == 7 and a["acks"] == 1
    assert a.explicit == {"bootstrap.servers", "linger.ms", "acks"}


def test_kafka_defaults() -> None:
    p = resolve(PRODUCER, B, {})
    assert p["acks"] == -1  # all
    assert p["enable.idempotence"] is True
    assert p["linger.ms"] == 5 and p["batch.size"] == 16384
    assert p["buffer.memory"] == 33554432 and p["max.block.ms"] == 60000
    assert p["delivery.timeout.ms"] == 120000 and p["request.timeout.ms"] == 30000
    assert p["max.in.flight.requests.per.connection"] == 5 and p["retries"] == 2147483647
    assert p["compression.type"] == "none" and p["retry.backoff.ms"] == 100
    c = resolve(CONSUMER, B, {})
    assert c["auto.offset.reset"] == "latest" and c["fetch.min.bytes"] == 1
    assert c["fetch.max.wait.ms"] == 500 and c["max.partition.fetch.bytes"] == 1048576
    assert c["fetch.max.bytes"] == 52428800 and c["isolation.level"] == "read_uncommitted"
    assert c["max.poll.records"] == 500
    assert resolve(ADMIN, B, {})["default.api.timeout.ms"] == 60000


@pytest.mark.parametrize(("config", "kwargs", "message"), [
    ({"linger.msec": 5}, {}, "unknown setting 'linger.msec'; did you mean 'linger.ms'?"),
    ({}, {"linger_msec": 5}, "unknown setting 'linger_msec'; did you mean 'linger_ms'?"),
    ({}, {"bootstrap_server": "h:1"}, "did you mean 'bootstrap_servers'?"),
    ({"group.id": "g"}, {}, "unknown setting 'group.id'"),  # a consumer setting
    ({"linger.ms": "soon"}, {}, "linger.ms: expected an integer, got 'soon'"),
    ({"linger.ms": -1}, {}, "linger.ms: -1 is outside"),
    ({"acks": "2"}, {}, "acks: '2' is not one of all, -1, 0, 1"),
    ({"compression.type": "brotli"}, {}, "compression.type: 'brotli' is not one of"),
    ({"enable.idempotence": "yes"}, {}, "enable.idempotence: expected true or false"),
    ({"linger.ms": 5}, {"linger_ms": 6}, "linger.ms given twice"),
])
def test_bad_settings_are_named(config: dict, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        resolve(PRODUCER, {**B, **config}, kwargs)
    assert message in str(info.value)


def test_bootstrap_servers_is_required_and_checked() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers is required"):
        resolve(CONSUMER, {}, {})
    with pytest.raises(ConfigError, match="bad address 'nohost'"):
        resolve(CONSUMER, {"bootstrap.servers": "nohost"}, {})


def test_same_value_twice_is_fine() -> None:
    assert resolve(PRODUCER, {**B, "linger.ms": 5}, {"linger_ms": "5"})["linger.ms"] == 5


def test_idempotence_settles_as_kafka() -> None:
    # Left at its default, a conflicting setting turns idempotence off ...
    assert producer_settings({**B, "acks": 1}, {})["enable.idempotence"] is False
    assert producer_settings(
        {**B, "max.in.flight.requests.per.connection": 6}, {})["enable.idempotence"] is False
    # ... asked for explicitly, the conflict is an error.
    with pytest.raises(ConfigError, match="acks must be all"):
        producer_settings({**B, "acks": 1, "enable.idempotence": True}, {})
    # A transactional id turns idempotence on; a conflict with it is an error.
    assert producer_settings({**B, "transactional.id": "tx"}, {})["enable.idempotence"] is True
    with pytest.raises(ConfigError, match="transactional.id needs idempotence"):
        producer_settings({**B, "transactional.id": "tx", "acks": 1}, {})
    with pytest.raises(ConfigError, match="delivery.timeout.ms must be at least"):
        producer_settings({**B, "delivery.timeout.ms": 1000}, {})


def test_log_dir_selects_embedded_mode(tmp_path) -> None:
    import pathlib

    s = resolve(CONSUMER, None, {"log_dir": pathlib.Path(tmp_path), "broker_config": {
        "num.partitions": 3, "auto.create.topics.enable": False, "log.dirs.extra": ["a", "b"]}})
    assert s["log.dir"] == str(tmp_path) and s["bootstrap.servers"] is None
    # Values kept as the strings a properties file holds: two clients giving the same
    # settings in different forms compare equal.
    assert s["broker.config"] == {"num.partitions": "3", "auto.create.topics.enable": "false",
                                  "log.dirs.extra": "a,b"}
    assert resolve(ADMIN, {"log.dir": "d", "broker.config": "server.properties"}, {})[
        "broker.config"] == "server.properties"
    with pytest.raises(ConfigError, match="not both"):
        resolve(PRODUCER, {**B, "log.dir": "d"}, {})
    with pytest.raises(ConfigError, match="embedded mode only"):
        resolve(PRODUCER, {**B, "broker.config": {"num.partitions": 2}}, {})
    with pytest.raises(ConfigError, match="log.dir: expected a directory path"):
        resolve(PRODUCER, {"log.dir": ""}, {})
    with pytest.raises(ConfigError, match="broker.config: expected a mapping"):
        resolve(PRODUCER, {"log.dir": "d", "broker.config": 3}, {})


def test_tls_settings_fail_at_construction_naming_the_setting(tmp_path) -> None:
    from pylog.client import ConfigError, Producer

    with pytest.raises(ConfigError, match="sasl.mechanism: 'GSSAPI' is not one of PLAIN"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL"})
    with pytest.raises(ConfigError, match="SCRAM-SHA-256 needs sasl.username and sasl.password"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-256"})
    with pytest.raises(ConfigError, match=r"ssl.ca.location: .*nope.pem: no such file"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
                  "ssl.ca.location": str(tmp_path / "nope.pem")})
    with pytest.raises(ConfigError, match="ssl.certificate.location goes with ssl.key.location"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
                  "ssl.certificate.location": str(tmp_path / "c.pem")})


def test_group_protocol_refuses_the_settings_that_do_not_apply() -> None:
    consumer = {**B, "group.id": "g", "group.protocol": "consumer"}
    assert resolve(CONSUMER, B, {})["group.protocol"] == "classic"
    check_group_protocol(resolve(CONSUMER, {**consumer, "group.remote.assignor": "range",
                                            "max.poll.interval.ms": 1000}, {}))
    # The broker owns these under the consumer protocol (Kafka's ConsumerConfig refuses them).
    for name, value in [("session.timeout.ms", 10000), ("heartbeat.interval.ms", 1000),
                        ("partition.assignment.strategy", "range")]:
        with pytest.raises(ConfigError, match=f"{name} cannot be set when group.protocol=consumer"):
            check_group_protocol(resolve(CONSUMER, {**consumer, name: value}, {}))
    with pytest.raises(ConfigError, match="group.remote.assignor cannot be set when group.protocol=classic"):
        check_group_protocol(resolve(CONSUMER, {**B, "group.remote.assignor": "uniform"}, {}))
    with pytest.raises(ConfigError, match="group.protocol: 'eager' is not one of classic, consumer"):
        resolve(CONSUMER, {**B, "group.protocol": "eager"}, {})
    from pylog.client import Consumer

    with pytest.raises(ConfigError, match="session.timeout.ms cannot be set"):
        Consumer({**consumer, "session.timeout.ms": 10000})  # refused before connecting
