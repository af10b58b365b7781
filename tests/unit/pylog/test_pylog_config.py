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
        ("listeners", "SSL://127.0.0.1:9093", "PLAINTEXT"),
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
