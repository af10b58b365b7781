"""Broker configuration: Kafka names and defaults, properties files, overrides, errors."""

from __future__ import annotations

import pytest

from pylog.config import (
    LONG_MAX,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    BrokerConfig,
    ConfigError,
    check_topic_configs,
    parse_properties,
    parse_topic_configs,
)


def test_defaults_are_kafkas() -> None:
    c = BrokerConfig()
    assert c.listeners[0].host == "127.0.0.1" and c.listeners[0].port == 9092
    assert c.log_dir == "./pylog-data"
    assert c.node_id == 0
    assert c["num.partitions"] == 1
    assert c["auto.create.topics.enable"] is True
    assert c["message.max.bytes"] == 1048588
    assert c["log.retention.hours"] == 168
    assert c["log.retention.check.interval.ms"] == 300000
    assert c.topic_default("retention.ms") == 604_800_000
    assert c.topic_default("segment.ms") == 604_800_000
    assert c.topic_default("max.message.bytes") == 1048588
    assert c.topic_default("message.timestamp.before.max.ms") == LONG_MAX
    assert c.topic_default("message.timestamp.after.max.ms") == 3_600_000
    assert c.topic_default("cleanup.policy") == ["delete"]
    assert c.topic_default("min.insync.replicas") == 1


def test_synonym_priority_ms_over_minutes_over_hours() -> None:
    assert BrokerConfig({"log.retention.hours": "1"}).topic_default("retention.ms") == 3_600_000
    assert BrokerConfig({"log.retention.minutes": "2", "log.retention.hours": "1"}).topic_default(
        "retention.ms") == 120_000
    c = BrokerConfig({"log.retention.ms": "5", "log.retention.minutes": "2"})
    assert c.topic_default("retention.ms") == 5
    assert BrokerConfig({"log.retention.hours": "-1"}).topic_default("retention.ms") == -1


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("no.such.key", "1", "unknown"),
        ("num.partitions", "zero", "integer"),
        ("num.partitions", "0", "at least 1"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("log.message.timestamp.type", "Now", "CreateTime"),
        ("listeners", "PLAINTEXT:/x", "listener"),
        ("sasl.enabled.mechanisms", "PLAIN,KERBEROS", "not a SASL mechanism"),
        ("message.max.bytes", str(2**31), "out of range"),
        ("default.replication.factor", "3", "single-node"),
        ("log.dirs", "/a,/b", "one directory"),
    ],
)
def test_invalid_settings_name_the_key(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({key: value})
    assert info.value.key == key
    assert key in str(info.value) and fragment in str(info.value)


def test_properties_file_and_overrides(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n! another\nnum.partitions=3\nlog.dirs : /tmp/x\n"
        "listeners PLAINTEXT://0.0.0.0:0\nlog.retention.hours=\\\n  24\n"
    )
    c = BrokerConfig.from_sources(str(path), ["num.partitions=5", "node.id=7"])
    assert c["num.partitions"] == 5
    assert c.log_dir == "/tmp/x"
    assert c.listeners[0].port == 0 and c.listeners[0].host == "0.0.0.0"
    assert c.node_id == 7
    assert c.topic_default("retention.ms") == 24 * 3_600_000


def test_missing_file_and_bad_override(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        BrokerConfig.from_sources(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.from_sources(None, ["num.partitions"])


def test_parse_properties_escapes() -> None:
    assert parse_properties("a\\:b=c\\td\nk:v\n  x = y z ") == {"a:b": "c\td", "k": "v", "x": "y z"}


def test_topic_configs_validate() -> None:
    assert parse_topic_configs({"retention.ms": "100", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": 100,
        "cleanup.policy": ["compact", "delete"],
    }
    with pytest.raises(ConfigError, match="unknown"):
        parse_topic_configs({"retention.mss": "1"})
    with pytest.raises(ConfigError, match="cleanup.policy"):
        parse_topic_configs({"cleanup.policy": "forever"})


def test_describe_topic_sources_and_synonyms() -> None:
    c = BrokerConfig({"log.retention.minutes": "10"})
    entries = {e.name: e for e in c.describe_topic({"segment.bytes": 1024})}
    seg = entries["segment.bytes"]
    assert (seg.value, seg.source) == ("1024", SOURCE_DYNAMIC_TOPIC_CONFIG)
    assert seg.synonyms[0] == ("segment.bytes", "1024", SOURCE_DYNAMIC_TOPIC_CONFIG)
    assert seg.synonyms[-1] == ("log.segment.bytes", "1073741824", SOURCE_DEFAULT_CONFIG)
    ret = entries["retention.ms"]
    assert (ret.value, ret.source) == ("600000", SOURCE_STATIC_BROKER_CONFIG)
    assert ret.synonyms[0] == ("log.retention.minutes", "10", SOURCE_STATIC_BROKER_CONFIG)
    assert ("log.retention.hours", "168", SOURCE_DEFAULT_CONFIG) in ret.synonyms
    broker = {e.name: e for e in c.describe_broker()}
    assert broker["log.retention.minutes"].source == SOURCE_STATIC_BROKER_CONFIG
    assert broker["num.partitions"].value == "1"


# --- settings pylog knows but cannot honour, bad cleaner settings, deprecated ones ---------------


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("log.cleanup.policy", "", "use delete, compact or compact,delete"),
        ("log.cleanup.policy", "compact,shrink", "expected one of delete, compact"),
        ("log.cleaner.threads", "0", "set log.cleaner.enable=false"),
        ("log.cleaner.threads", "-1", "must be at least 0"),
        ("log.cleaner.dedupe.buffer.size", "1048576", "at least 1MB per cleaner thread"),
        ("log.cleaner.io.buffer.load.factor", "1.5", "at most 1"),
        ("log.cleaner.io.buffer.load.factor", "0", "more than 0"),
        ("log.cleaner.io.max.bytes.per.second", "0", "more than 0"),
        ("log.cleaner.io.buffer.size", "-1", "must be at least 0"),
        ("log.cleaner.backoff.ms", "-1", "must be at least 0"),
        ("log.cleaner.min.cleanable.ratio", "1.1", "between 0 and 1"),
        ("num.network.threads", "8", "one event loop"),
        ("num.network.threads", "1", "remove this setting"),
        ("log.message.format.version", "0.10.9", "not a valid version"),
    ],
)
def test_unimplemented_settings_are_refused_naming_the_key(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({key: value})
    assert info.value.key == key
    assert str(info.value).startswith(key + ":") and fragment in str(info.value)


def test_cleaner_settings_accepted_with_kafkas_defaults() -> None:
    d = BrokerConfig()
    assert d["log.cleaner.enable"] is True  # Kafka's CleanerConfig defaults
    assert (d["log.cleaner.threads"], d["log.cleaner.dedupe.buffer.size"], d["log.cleaner.io.buffer.size"],
            d["log.cleaner.io.buffer.load.factor"], d["log.cleaner.backoff.ms"]) == (1, 134217728, 524288, 0.9, 15000)
    assert d["log.cleaner.io.max.bytes.per.second"] == 1.7976931348623157e308
    assert d.topic_default("cleanup.policy") == ["delete"]
    assert d.topic_default("min.cleanable.dirty.ratio") == 0.5
    c = BrokerConfig({
        "log.cleaner.enable": "false", "log.cleaner.threads": "0",  # no cleaner: 0 threads is fine
        "log.cleaner.delete.retention.ms": "1000",
        "log.cleaner.min.cleanable.ratio": "0.1",
        "log.cleanup.policy": "compact,delete",
        "num.io.threads": "4", "num.recovery.threads.per.data.dir": "2", "log.flush.interval.ms": "1000",
    })
    assert c.warnings == []
    assert c["log.cleaner.enable"] is False
    assert c.topic_default("delete.retention.ms") == 1000
    assert c.topic_default("min.cleanable.dirty.ratio") == 0.1
    assert c.topic_default("cleanup.policy") == ["compact", "delete"]
    c = BrokerConfig({"log.cleaner.threads": "4", "log.cleaner.dedupe.buffer.size": str(64 << 20),
                      "log.cleaner.io.max.bytes.per.second": "1e6", "log.cleaner.backoff.ms": "100"})
    assert c["log.cleaner.threads"] == 4 and c["log.cleaner.io.max.bytes.per.second"] == 1e6


def test_kafka_default_network_threads_accepted_with_a_warning() -> None:
    assert BrokerConfig().warnings == []
    c = BrokerConfig({"num.network.threads": "3"})
    assert c["num.network.threads"] == 3
    assert c.warnings == ["num.network.threads=3 is ignored: pylog's network layer is one event loop"]


def test_kafka_39_server_properties_starts_without_its_zookeeper_lines(tmp_path) -> None:
    # config/server.properties of Kafka 3.9 (comments dropped), without zookeeper.*.
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=0\nnum.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kafka-logs\nnum.partitions=1\nnum.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\nlog.retention.hours=168\n"
        "log.retention.check.interval.ms=300000\ngroup.initial.rebalance.delay.ms=0\n")
    c = BrokerConfig.from_sources(str(path))
    assert c.log_dir == "/tmp/kafka-logs" and len(c.warnings) == 1


def test_deprecated_broker_settings_accepted_with_a_warning() -> None:
    c = BrokerConfig({"log.message.format.version": "2.8", "log.message.downconversion.enable": "false"})
    assert c.topic_default("message.format.version") == "2.8"
    assert c.topic_default("message.downconversion.enable") is False
    assert [w.split(" ", 1)[0] for w in c.warnings] == [
        "log.message.format.version", "log.message.downconversion.enable"]
    assert all("deprecated and ignored" in w for w in c.warnings)


@pytest.mark.parametrize("value", ["0.8.2", "0.10.0", "0.10.0.0", "0.10.0-IV1", "2.8", "2.8.1", "3.0-IV1", "3.9"])
def test_message_format_version_takes_kafka_39_version_names(value: str) -> None:
    assert parse_topic_configs({"message.format.version": value}) == {"message.format.version": value}


@pytest.mark.parametrize("value", ["", "0.10", "0.10.3", "2.8-IV5", "3.10", "latest"])
def test_message_format_version_refuses_other_names(value: str) -> None:
    with pytest.raises(ConfigError, match="message.format.version"):
        parse_topic_configs({"message.format.version": value})


def test_check_topic_configs_accepts_compact_and_warns_on_deprecated() -> None:
    for policy in ("compact", "compact,delete", "delete, compact", "delete"):
        assert check_topic_configs(parse_topic_configs({"cleanup.policy": policy})) == []
    with pytest.raises(ConfigError) as info:
        parse_topic_configs({"cleanup.policy": ""})
    assert info.value.key == "cleanup.policy"
    assert check_topic_configs(parse_topic_configs({"cleanup.policy": "delete", "retention.ms": "5"})) == []
    warnings = check_topic_configs(parse_topic_configs(
        {"message.format.version": "0.10.0.0", "message.downconversion.enable": "true"}))
    assert [w.split(" ", 1)[0] for w in warnings] == ["message.downconversion.enable", "message.format.version"]


def test_deprecated_topic_configs_described_as_kafka_39_does() -> None:
    c = BrokerConfig()
    entries = {e.name: e for e in c.describe_topic({})}
    fmt, down = entries["message.format.version"], entries["message.downconversion.enable"]
    assert (fmt.value, fmt.source, fmt.type) == ("3.0-IV1", SOURCE_DEFAULT_CONFIG, "string")
    assert fmt.synonyms == (("log.message.format.version", "3.0-IV1", SOURCE_DEFAULT_CONFIG),)
    assert (down.value, down.source, down.type) == ("true", SOURCE_DEFAULT_CONFIG, "boolean")
    assert down.synonyms == (("log.message.downconversion.enable", "true", SOURCE_DEFAULT_CONFIG),)
    # A topic's own value is reported as set (Kafka keeps the original string).
    fmt = {e.name: e for e in c.describe_topic({"message.format.version": "0.10.0.0"})}["message.format.version"]
    assert (fmt.value, fmt.source) == ("0.10.0.0", SOURCE_DYNAMIC_TOPIC_CONFIG)


def test_topic_config_documentation_comes_from_the_primary_synonym() -> None:
    """segment.ms is documented by log.roll.ms (milliseconds), not by its fallback
    log.roll.hours: DescribeConfigs must not tell a user the wrong unit."""
    entries = {e.name: e for e in BrokerConfig().describe_topic({})}
    doc = entries["segment.ms"].doc
    assert doc is not None and "hours" not in doc.lower()


def test_security_settings_and_their_checks() -> None:
    c = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,INTERNAL://:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
        "advertised.listeners": "SSL://kafka1:9093,INTERNAL://10.0.0.5:9094",
        "inter.broker.listener.name": "internal",
        "ssl.client.auth": "requested",
        "listener.name.internal.ssl.client.auth": "required",
        "ssl.key.password": "secret",
        "zookeeper.connect": "zk:2181",
        "default.replication.factor": "3",
    })
    assert [(ll.name, ll.port, ll.security_protocol) for ll in c.listeners] == [
        ("PLAINTEXT", 9092, "PLAINTEXT"), ("SSL", 9093, "SSL"), ("INTERNAL", 9094, "SSL")]
    assert [ll.name for ll in c.advertised_listeners] == ["SSL", "INTERNAL"]
    assert c.inter_broker_listener == "INTERNAL"
    assert c.listener_value("INTERNAL", "ssl.client.auth") == "required"
    assert c.listener_value("SSL", "ssl.client.auth") == "requested"
    # Passwords are never described (Kafka answers null for sensitive configs).
    (pw,) = [e for e in c.describe_broker() if e.name == "ssl.key.password"]
    assert pw.is_sensitive and pw.value is None and all(v is None for _n, v, _s in pw.synonyms)


@pytest.mark.parametrize(("settings", "key", "fragment"), [
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners", "different name"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners", "different port"),
    ({"listeners": "INTERNAL://:9092"}, "listeners", "listener.security.protocol.map"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map",
     "not a security protocol"),
    ({"advertised.listeners": "SSL://h:9093"}, "advertised.listeners", "subset"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "0.0.0.0"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "inter.broker.listener.name", "only one"),
    ({"listeners": "SSL://:9093", "zookeeper.connect": "zk:2181"},
     "security.inter.broker.protocol", "advertised.listeners"),
    ({"listener.name.ssl.ssl.client.auth": "required"}, "listener.name.ssl.ssl.client.auth",
     "no listener SSL"),
    ({"listener.name.plaintext.ssl.client.auth": "always"}, "listener.name.plaintext.ssl.client.auth",
     "expected one of"),
    ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type", "expected one of"),
])
def test_listener_rules_as_kafka(settings: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(settings)
    assert info.value.key == key and fragment in str(info.value), str(info.value)
