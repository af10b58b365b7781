"""pylog.spark.options: Spark's Kafka options, parsed and refused as Spark does (no Spark)."""

from __future__ import annotations

import logging

import pytest

from pylog.spark.options import (
    SparkOptionError,
    offsets_from_json,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
)

NET = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def src(streaming: bool = False, **opts: str):
    return parse_source_options({**NET, **opts}, streaming=streaming)


def refused(match: str, streaming: bool = False, base=NET, **opts: str) -> None:
    with pytest.raises(SparkOptionError, match=match):
        parse_source_options({**base, **opts}, streaming=streaming)


def test_exactly_one_subscription_strategy() -> None:
    refused("One of the following options must be specified for Kafka source: subscribe, "
            "subscribepattern, assign")
    refused("Only one of the following options can be specified",
            subscribe="a", assign='{"a":[0]}')
    refused("No topics to subscribe to as specified value for option 'subscribe' is ' , '",
            subscribe=" , ")
    refused("Pattern to subscribe is empty", subscribePattern="  ")
    refused("not a valid regular expression", subscribePattern="a(")
    refused("No topicpartitions to assign as specified value for option 'assign' is 'a'",
            assign="a")
    refused(r'Expected e.g. \{"topicA":\[0,1\],"topicB":\[0,1\]\}, got \{"a": 0\}',
            assign='{"a": 0}')


def test_strategies_parsed() -> None:
    o = src(subscribe="a, b,,c")
    assert (o.strategy, o.topics) == ("subscribe", ("a", "b", "c"))
    o = src(SUBSCRIBEPATTERN="clicks-.*")  # option names are case-insensitive
    assert (o.strategy, o.pattern) == ("subscribePattern", "clicks-.*")
    o = src(assign='{"a":[1,0,1],"b":[2]}')
    assert o.strategy == "assign" and o.assign == {"a": (0, 1), "b": (2,)}
    assert "assign" in o.subscription()


def test_mode_network_or_direct() -> None:
    refused("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka "
            "consumer", base={}, subscribe="a")
    refused("exclude each other", path="/data", subscribe="a")
    o = parse_source_options({"path": "/data", "subscribe": "a"}, streaming=False)
    assert o.direct and o.path == "/data" and o.bootstrap_servers is None
    assert not src(subscribe="a").direct


def test_options_spark_refuses_with_spark_messages() -> None:
    refused("Kafka option 'auto.offset.reset' is not supported.\nInstead set the source "
            "option 'startingoffsets'", subscribe="a", **{"kafka.auto.offset.reset": "x"})
    refused("Kafka option 'key.deserializer' is not supported as keys are deserialized as "
            "byte arrays", subscribe="a", **{"kafka.key.deserializer": "x"})
    refused("Kafka option 'value.deserializer' is not supported",
            subscribe="a", **{"kafka.value.deserializer": "x"})
    refused("Kafka option 'enable.auto.commit' is not supported",
            subscribe="a", **{"kafka.enable.auto.commit": "false"})
    refused("Kafka option 'interceptor.classes' is not supported",
            subscribe="a", **{"kafka.interceptor.classes": "x"})


def test_kafka_group_id_is_warned_about_not_refused(caplog) -> None:
    with caplog.at_level(logging.WARNING, "pylog.spark"):
        o = src(subscribe="a", **{"kafka.group.id": "g"})
    assert "never joins a consumer group" in caplog.text
    assert "group.id" not in o.consumer_config()


def test_kafka_settings_go_to_the_client_and_unknown_ones_are_refused() -> None:
    o = src(subscribe="a", **{"kafka.max.partition.fetch.bytes": "8388608",
                              "kafka.isolation.level": "read_committed"})
    conf = o.consumer_config()
    assert conf["max.partition.fetch.bytes"] == "8388608"
    assert conf["isolation.level"] == "read_committed" and conf["auto.offset.reset"] == "none"
    assert o.admin_config() == {"bootstrap.servers": "127.0.0.1:9092"}
    refused("unknown setting 'sasl.kerberos.service.name'.*docs/client.md", subscribe="a",
            **{"kafka.sasl.kerberos.service.name": "kafka"})
    refused("isolation.level' must be read_uncommitted or read_committed", subscribe="a",
            **{"kafka.isolation.level": "serializable"})


def test_batch_offset_rules() -> None:
    o = src(subscribe="a")
    assert (o.starting.kind, o.ending.kind) == ("earliest", "latest")
    refused("starting offset can't be latest for batch queries on Kafka",
            subscribe="a", startingOffsets="latest")
    refused("startingOffsets for a-0 can't be latest for batch queries on Kafka",
            subscribe="a", startingOffsets='{"a":{"0":-1}}')
    refused("ending offset can't be earliest for batch queries on Kafka",
            subscribe="a", endingOffsets="earliest")
    refused("ending offset for a-1 can't be earliest for batch queries on Kafka",
            subscribe="a", endingOffsets='{"a":{"1":-2}}')
    refused(r'Expected e.g. \{"topicA":\{"0":23,"1":-1\},"topicB":\{"0":-2\}\}, got nope',
            subscribe="a", startingOffsets="nope")
    refused("The starting offset \\(9\\) for a-0 is greater than the ending offset \\(3\\)",
            subscribe="a", startingOffsets='{"a":{"0":9}}', endingOffsets='{"a":{"0":3}}')
    refused("starting and ending offsets differ", subscribe="a",
            startingOffsets='{"a":{"0":1}}', endingOffsets='{"a":{"1":3}}')
    o = src(subscribe="a", startingOffsets='{"a":{"0":5,"1":-2}}',
            endingOffsets='{"a":{"0":-1,"1":9}}')
    assert dict(o.starting.per_partition) == {("a", 0): 5, ("a", 1): -2}
    assert dict(o.ending.per_partition) == {("a", 0): -1, ("a", 1): 9}


def test_timestamp_options_and_their_precedence() -> None:
    o = src(subscribe="a", startingTimestamp="1000", startingOffsetsByTimestamp='{"a":{"0":5}}',
            startingOffsets="earliest")
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1000)
    o = src(subscribe="a", startingOffsetsByTimestamp='{"a":{"0":5}}', startingOffsets="earliest")
    assert o.starting.kind == "timestamps" and dict(o.starting.per_partition) == {("a", 0): 5}
    o = src(subscribe="a", endingTimestamp="2000")
    assert (o.ending.kind, o.ending.timestamp) == ("timestamp", 2000)
    refused("Expected a single long value, got soon", subscribe="a", startingTimestamp="soon")
    refused('Expected e.g. {"topicA": {"0": 123456789', subscribe="a",
            endingOffsetsByTimestamp="[]")
    refused("startingOffsetsByTimestampStrategy' must be 'error' or 'latest'",
            subscribe="a", startingOffsetsByTimestampStrategy="first")
    assert src(subscribe="a", startingOffsetsByTimestampStrategy="LATEST"
               ).starting_by_timestamp_strategy == "latest"


def test_streaming_offset_rules() -> None:
    o = src(streaming=True, subscribe="a")
    assert o.starting.kind == "latest"  # a new streaming query starts at the end
    assert src(streaming=True, subscribe="a", startingOffsets="earliest").starting.kind == \
        "earliest"
    refused("ending offset not valid in streaming queries", streaming=True, subscribe="a",
            endingOffsets="latest")
    refused("ending timestamp not valid in streaming queries", streaming=True, subscribe="a",
            endingOffsetsByTimestamp='{"a":{"0":1}}')


def test_numbers_booleans_and_durations() -> None:
    o = src(subscribe="a", minPartitions="8", maxRecordsPerPartition="1000",
            failOnDataLoss="False", includeHeaders="TRUE")
    assert (o.min_partitions, o.max_records_per_partition) == (8, 1000)
    assert (o.fail_on_data_loss, o.include_headers) == (False, True)
    refused("minPartitions must be positive", subscribe="a", minPartitions="0")
    refused("option 'minPartitions' must be an integer, got 'many'", subscribe="a",
            minPartitions="many")
    refused("maxRecordsPerPartition must be positive", subscribe="a", maxRecordsPerPartition="-1")
    refused("option 'failOnDataLoss' must be 'true' or 'false', got 'yes'", subscribe="a",
            failOnDataLoss="yes")
    s = src(streaming=True, subscribe="a", maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10",
            maxTriggerDelay="30s")
    assert (s.max_offsets_per_trigger, s.min_offsets_per_trigger, s.max_trigger_delay_ms) == (
        100, 10, 30_000)
    assert src(streaming=True, subscribe="a").max_trigger_delay_ms == 15 * 60_000
    refused(r"The value of minOffsetPerTrigger\(10\) is higher than the "
            r"maxOffsetsPerTrigger\(5\)", streaming=True, subscribe="a",
            maxOffsetsPerTrigger="5", minOffsetsPerTrigger="10")
    refused("must be a duration", streaming=True, subscribe="a", maxTriggerDelay="soon")


def test_batch_ignores_trigger_options_with_a_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING, "pylog.spark"):
        src(subscribe="a", maxOffsetsPerTrigger="5")
    assert "maxOffsetsPerTrigger option ignored in batch queries" in caplog.text


def test_offsets_json_round_trip() -> None:
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert offsets_from_json(as_json) == offsets
    assert offsets_from_json('{"a": {"2": 0}}') == {("a", 2): 0}


def test_sink_options() -> None:
    s = parse_sink_options({**NET, "topic": " out ", "kafka.linger.ms": "20"})
    assert s.topic == "out" and not s.include_headers
    assert s.producer_config() == {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": "20"}
    assert parse_sink_options(NET).topic is None
    with pytest.raises(SparkOptionError, match="Kafka option 'key.serializer' is not supported "
                       "as keys are serialized with ByteArraySerializer"):
        parse_sink_options({**NET, "kafka.key.serializer": "x"})
    with pytest.raises(SparkOptionError, match="Kafka option 'value.serializer' is not supported"):
        parse_sink_options({**NET, "kafka.value.serializer": "x"})
    with pytest.raises(SparkOptionError, match="configuring Kafka producer"):
        parse_sink_options({"topic": "x"})
    with pytest.raises(SparkOptionError, match="for reads only"):
        parse_sink_options({"path": "/data"})
    with pytest.raises(SparkOptionError, match="unknown setting 'lingering.ms'"):
        parse_sink_options({**NET, "kafka.lingering.ms": "1"})
