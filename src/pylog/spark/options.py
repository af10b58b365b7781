"""The options of the ``pylog`` Spark data source: Spark's Kafka options, parsed and checked.

The names, defaults and refusals are those of Spark's own Kafka source and sink
(``spark-sql-kafka-0-10``: ``KafkaSourceProvider``, ``JsonUtils``, ``KafkaWriter``), so a
pipeline moves over by changing the format name. Option names are case-insensitive, as in
Spark; ``kafka.<name>`` options are Kafka client settings, handed to pylog's client (which
refuses a setting it does not implement, naming it).

One addition: the ``path`` option (or ``load(path)``) names a broker's data directory
(``log.dirs``) instead of ``kafka.bootstrap.servers``: *direct mode*, where the segment files
are read with logcore and no broker is involved. Exactly one of the two is given.

Nothing here imports pyspark or pyarrow: the parsing is unit-tested without Spark, and every
refusal is a ``SparkOptionError`` (a ``ValueError``; Spark raises IllegalArgumentException)
whose message says what to set instead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("pylog.spark")

__all__ = [
    "SparkOptionError", "OffsetSpec", "SourceOptions", "SinkOptions", "parse_source_options",
    "parse_sink_options", "EARLIEST", "LATEST",
]

#: Offsets' special values in JSON, as in Spark and Kafka's ListOffsets.
EARLIEST = -2
LATEST = -1

# Spark's JsonUtils messages.
_ASSIGN_EXAMPLE = 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got '
_OFFSETS_EXAMPLE = 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got '
_TIMESTAMPS_EXAMPLE = ('Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
                       '"topicB": {"0": 123456789, "1": 123456789}}, got ')

_STRATEGIES = ("subscribe", "subscribepattern", "assign")
_AUTO_OFFSET_RESET = (
    "Kafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details.")
_REFUSED_CONSUMER = {
    "auto.offset.reset": _AUTO_OFFSET_RESET,
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_REFUSED_PRODUCER = {
    "key.serializer": ("Kafka option 'key.serializer' is not supported as keys are serialized "
                       "with ByteArraySerializer."),
    "value.serializer": ("Kafka option 'value.serializer' is not supported as value are "
                         "serialized with ByteArraySerializer."),
}
_CUSTOM_GROUP_ID = (
    "Kafka option 'kafka.group.id' has been set on this query; pylog's source never joins a "
    "consumer group (offsets are tracked in Spark's checkpoint), so it is not used")
# Kafka consumer settings our source sets itself (Spark sets the same ones).
_SET_BY_SOURCE = {"group.id", "auto.offset.reset", "enable.auto.commit"}
_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|sec|m|min|h|d)?\s*$", re.I)
_DURATION_MS = {None: 1, "us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000,
                "min": 60_000, "h": 3_600_000, "d": 86_400_000}


class SparkOptionError(ValueError):
    """An option Spark's Kafka source would refuse (IllegalArgumentException there), or one
    that cannot be parsed; the message says what to set instead."""


# --------------------------------------------------------------------------- offset specs


@dataclasses.dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end, before it is resolved against the log.

    kind:
        ``earliest``, ``latest``; ``offsets`` (``per_partition``: offset, -2 earliest, -1
        latest); ``timestamps`` (``per_partition``: ms); ``timestamp`` (``timestamp``:
        one ms value for every partition).
    """

    kind: str
    per_partition: Mapping[tuple[str, int], int] | None = None
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return f"{self.kind} {dict(self.per_partition or {})}"


_SPEC_EARLIEST = OffsetSpec("earliest")
_SPEC_LATEST = OffsetSpec("latest")


def _tp_str(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def parse_assign(text: str) -> dict[str, list[int]]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` (Spark's JsonUtils.partitions)."""
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or not value:
            raise ValueError
        out: dict[str, list[int]] = {}
        for topic, parts in value.items():
            if not isinstance(parts, list) or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
                raise ValueError
            out[str(topic)] = sorted(set(parts))
        return out
    except ValueError:
        raise SparkOptionError(_ASSIGN_EXAMPLE + text) from None


def _parse_per_partition(text: str, example: str) -> dict[tuple[str, int], int]:
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError
        out: dict[tuple[str, int], int] = {}
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                raise ValueError
            for p, off in parts.items():
                if isinstance(off, bool) or not isinstance(off, int) or not str(p).isdigit():
                    raise ValueError
                out[(str(topic), int(p))] = off
        return out
    except ValueError:
        raise SparkOptionError(example + text) from None


def parse_offsets_json(text: str) -> dict[tuple[str, int], int]:
    """``{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}`` (JsonUtils.partitionOffsets)."""
    out = _parse_per_partition(text, _OFFSETS_EXAMPLE)
    for tp, off in out.items():
        if off < EARLIEST:
            raise SparkOptionError(f"offset {off} for {_tp_str(tp)} is not an offset, -1 "
                                   f"(latest) or -2 (earliest): {_OFFSETS_EXAMPLE}{text}")
    return out


def parse_timestamps_json(text: str) -> dict[tuple[str, int], int]:
    """``{"topicA": {"0": 1700000000000}}`` (JsonUtils.partitionTimestamps)."""
    out = _parse_per_partition(text, _TIMESTAMPS_EXAMPLE)
    for tp, ts in out.items():
        if ts < 0:
            raise SparkOptionError(f"timestamp {ts} for {_tp_str(tp)} is negative: "
                                   f"{_TIMESTAMPS_EXAMPLE}{text}")
    return out


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """Offsets as Spark's Kafka source writes them to its checkpoint:
    ``{"topic": {"0": 23, "1": 7}}`` (partitions in order)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return out


def offsets_from_json(value: Any) -> dict[tuple[str, int], int]:
    """The inverse of ``offsets_to_json`` (accepts the dict or its JSON text)."""
    if isinstance(value, str):
        value = json.loads(value)
    return {(str(t), int(p)): int(o) for t, parts in value.items() for p, o in parts.items()}


def _offset_range_limit(opts: Mapping[str, str], ts_key: str, by_ts_key: str, offsets_key: str,
                        default: OffsetSpec) -> OffsetSpec:
    """Spark's getKafkaOffsetRangeLimit: global timestamp > per-partition timestamps >
    offsets (``earliest``, ``latest`` or JSON) > the default."""
    if ts_key in opts:
        text = opts[ts_key].strip()
        try:
            return OffsetSpec("timestamp", timestamp=int(text))
        except ValueError:
            raise SparkOptionError(f"Expected a single long value, got {text}") from None
    if by_ts_key in opts:
        return OffsetSpec("timestamps", per_partition=parse_timestamps_json(opts[by_ts_key].strip()))
    if offsets_key in opts:
        text = opts[offsets_key].strip()
        if text.lower() == "latest":
            return _SPEC_LATEST
        if text.lower() == "earliest":
            return _SPEC_EARLIEST
        return OffsetSpec("offsets", per_partition=parse_offsets_json(text))
    return default


# --------------------------------------------------------------------------- scalar parsing


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    if key not in opts:
        return default
    text = opts[key].strip().lower()
    if text not in ("true", "false"):
        raise SparkOptionError(f"option '{name}' must be 'true' or 'false', got {opts[key]!r}")
    return text == "true"


def _int(opts: Mapping[str, str], key: str, name: str, *, positive: bool = False,
         message: str | None = None) -> int | None:
    if key not in opts:
        return None
    try:
        value = int(opts[key].strip())
    except ValueError:
        raise SparkOptionError(f"option '{name}' must be an integer, got {opts[key]!r}") from None
    if positive and value <= 0:
        raise SparkOptionError(message or f"{name} must be positive")
    return value


def _duration_ms(opts: Mapping[str, str], key: str, name: str, default: str) -> int:
    text = opts.get(key, default)
    m = _DURATION.match(text)
    if m is None:
        raise SparkOptionError(f"option '{name}' must be a duration such as '15m', '30s' or "
                               f"'500ms', got {text!r}")
    return int(int(m.group(1)) * _DURATION_MS[m.group(2).lower() if m.group(2) else None])


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in options.items():
        if v is None:
            continue
        out[str(k).lower()] = str(v)
    return out


def _kafka_params(opts: Mapping[str, str]) -> dict[str, str]:
    return {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}


# --------------------------------------------------------------------------- source


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """A checked set of source options (picklable: it travels to Spark's executors)."""

    bootstrap_servers: str | None
    path: str | None
    strategy: str                        # subscribe | subscribePattern | assign
    topics: tuple[str, ...] = ()         # subscribe
    pattern: str | None = None           # subscribePattern
    assign: Mapping[str, tuple[int, ...]] | None = None
    starting: OffsetSpec = _SPEC_EARLIEST
    ending: OffsetSpec = _SPEC_LATEST
    starting_by_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    isolation_level: str = "read_uncommitted"
    kafka: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def direct(self) -> bool:
        """True in direct mode (``path``: read the data directory with logcore)."""
        return self.path is not None

    def subscription(self) -> str:
        if self.strategy == "assign":
            return f"assign {json.dumps({t: list(p) for t, p in (self.assign or {}).items()})}"
        if self.strategy == "subscribe":
            return "subscribe " + ",".join(self.topics)
        return f"subscribePattern {self.pattern}"

    def consumer_config(self) -> dict[str, Any]:
        """Settings for a ``pylog.client.Consumer`` (network mode)."""
        conf: dict[str, Any] = {k: v for k, v in self.kafka.items() if k not in _SET_BY_SOURCE}
        conf["bootstrap.servers"] = self.bootstrap_servers
        conf["isolation.level"] = self.isolation_level
        conf["auto.offset.reset"] = "none"  # executors do only what the driver planned
        return conf

    def admin_config(self) -> dict[str, Any]:
        """Settings for a ``pylog.client.Admin`` (the driver's offset lookups)."""
        from pylog.client.config import ADMIN

        conf: dict[str, Any] = {k: v for k, v in self.kafka.items() if k in ADMIN}
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf


def parse_source_options(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    """Check and parse the options of a read (batch) or readStream (streaming).

    Raises:
        SparkOptionError: with Spark's message for the options Spark refuses, and a message
            naming the option and what it takes for the others.
    """
    opts = _lower(options)
    strategies = [k for k in _STRATEGIES if k in opts]
    if not strategies:
        raise SparkOptionError(
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details.")
    if len(strategies) > 1:
        raise SparkOptionError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details.")
    strategy = strategies[0]
    value = opts[strategy]
    fields: dict[str, Any] = {}
    if strategy == "assign":
        if not value.strip().startswith("{"):
            raise SparkOptionError("No topicpartitions to assign as specified value for option "
                                   f"'assign' is '{value}'")
        fields["assign"] = {t: tuple(ps) for t, ps in parse_assign(value).items()}
        fields["strategy"] = "assign"
    elif strategy == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise SparkOptionError("No topics to subscribe to as specified value for option "
                                   f"'subscribe' is '{value}'")
        fields["topics"], fields["strategy"] = topics, "subscribe"
    else:
        pattern = value.strip()
        if not pattern:
            raise SparkOptionError("Pattern to subscribe is empty as specified value for option "
                                   f"'subscribePattern' is '{value}'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SparkOptionError(f"option 'subscribePattern' is not a valid regular "
                                   f"expression ({exc}): {pattern!r}") from None
        fields["pattern"], fields["strategy"] = pattern, "subscribePattern"

    kafka = _kafka_params(opts)
    for name, message in _REFUSED_CONSUMER.items():
        if name in kafka:
            raise SparkOptionError(message)
    if "group.id" in kafka:
        log.warning(_CUSTOM_GROUP_ID)
    _check_mode(opts, kafka, "source")
    if "isolation.level" in kafka:
        level = kafka["isolation.level"].strip().lower()
        if level not in ("read_uncommitted", "read_committed"):
            raise SparkOptionError("Kafka option 'isolation.level' must be read_uncommitted or "
                                   f"read_committed, got {kafka['isolation.level']!r}")
        fields["isolation_level"] = level
    if opts.get("kafka.bootstrap.servers"):
        _check_client_settings(kafka, "consumer")

    min_parts = _int(opts, "minpartitions", "minPartitions", positive=True,
                     message="minPartitions must be positive")
    max_per_part = _int(opts, "maxrecordsperpartition", "maxRecordsPerPartition", positive=True,
                        message="maxRecordsPerPartition must be positive")
    max_trigger = _int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", positive=True)
    min_trigger = _int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger", positive=True)
    if min_trigger is not None and max_trigger is not None and min_trigger > max_trigger:
        raise SparkOptionError(f"The value of minOffsetPerTrigger({min_trigger}) is higher than "
                               f"the maxOffsetsPerTrigger({max_trigger}).")
    strategy_on_no_match = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_on_no_match not in ("error", "latest"):
        raise SparkOptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                               f"'latest', got {opts['startingoffsetsbytimestampstrategy']!r}")

    if streaming:
        if "endingoffsets" in opts:
            raise SparkOptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
            raise SparkOptionError("ending timestamp not valid in streaming queries")
        starting = _offset_range_limit(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                                       "startingoffsets", _SPEC_LATEST)
        ending = _SPEC_LATEST
    else:
        starting = _offset_range_limit(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                                       "startingoffsets", _SPEC_EARLIEST)
        if starting.kind == "latest":
            raise SparkOptionError("starting offset can't be latest for batch queries on Kafka")
        if starting.kind == "offsets":
            for tp, off in (starting.per_partition or {}).items():
                if off == LATEST:
                    raise SparkOptionError(f"startingOffsets for {_tp_str(tp)} can't be latest "
                                           "for batch queries on Kafka")
        ending = _offset_range_limit(opts, "endingtimestamp", "endingoffsetsbytimestamp",
                                     "endingoffsets", _SPEC_LATEST)
        if ending.kind == "earliest":
            raise SparkOptionError("ending offset can't be earliest for batch queries on Kafka")
        if ending.kind == "offsets":
            for tp, off in (ending.per_partition or {}).items():
                if off == EARLIEST:
                    raise SparkOptionError(f"ending offset for {_tp_str(tp)} can't be earliest "
                                           "for batch queries on Kafka")
        _check_offset_limits(starting, ending)
        for key, name in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                          ("minoffsetspertrigger", "minOffsetsPerTrigger"),
                          ("maxtriggerdelay", "maxTriggerDelay")):
            if key in opts:
                log.warning("%s option ignored in batch queries", name)

    return SourceOptions(
        bootstrap_servers=opts.get("kafka.bootstrap.servers"),
        path=opts.get("path"),
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy=strategy_on_no_match,
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        min_partitions=min_parts,
        max_records_per_partition=max_per_part,
        max_offsets_per_trigger=max_trigger,
        min_offsets_per_trigger=min_trigger,
        max_trigger_delay_ms=_duration_ms(opts, "maxtriggerdelay", "maxTriggerDelay", "15m"),
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs",
                             positive=True) or 120_000,
        fetch_offset_num_retries=_int(opts, "fetchoffset.numretries",
                                      "fetchOffset.numRetries") or 3,
        fetch_offset_retry_interval_ms=_int(opts, "fetchoffset.retryintervalms",
                                            "fetchOffset.retryIntervalMs") or 10,
        kafka=kafka,
        **fields,
    )


def _check_mode(opts: Mapping[str, str], kafka: Mapping[str, str], what: str) -> None:
    has_servers = bool(opts.get("kafka.bootstrap.servers", "").strip())
    has_path = bool(opts.get("path", "").strip())
    if not has_servers and not has_path:
        raise SparkOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
            if what == "source" else
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    if has_servers and has_path:
        raise SparkOptionError(
            "Options 'kafka.bootstrap.servers' (read through a broker) and 'path' (read a data "
            "directory directly, with no broker) exclude each other: give one of them")


def _check_client_settings(kafka: Mapping[str, str], which: str) -> None:
    """Refuse, naming it, a kafka.* setting pylog's client does not implement."""
    from pylog.client.config import CONSUMER, PRODUCER, ConfigError, resolve

    table = CONSUMER if which == "consumer" else PRODUCER
    conf = {k: v for k, v in kafka.items() if k not in _SET_BY_SOURCE}
    try:
        resolve(table, conf, {})
    except ConfigError as exc:
        raise SparkOptionError(f"Kafka option in 'kafka.*': {exc} (pylog's {which} accepts the "
                               "Kafka settings listed in docs/client.md)") from None


def _check_offset_limits(start: OffsetSpec, end: OffsetSpec) -> None:
    """Spark's checkOffsetLimitValidity (batch): the same partitions on both sides, and a
    start not past the end."""
    if start.kind != end.kind or start.kind not in ("offsets", "timestamps"):
        return
    s, e = dict(start.per_partition or {}), dict(end.per_partition or {})
    if set(s) != set(e):
        raise SparkOptionError(
            "The topic partitions in the starting and ending offsets differ: starting "
            f"{sorted(map(_tp_str, s))}, ending {sorted(map(_tp_str, e))}; give the same "
            "partitions in both")
    what = "offset" if start.kind == "offsets" else "timestamp"
    for tp, so in s.items():
        eo = e[tp]
        if so >= 0 and eo >= 0 and so > eo:
            raise SparkOptionError(f"The starting {what} ({so}) for {_tp_str(tp)} is greater "
                                   f"than the ending {what} ({eo})")


# --------------------------------------------------------------------------- sink


@dataclasses.dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    include_headers: bool
    kafka: Mapping[str, str]

    def producer_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = dict(self.kafka)
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    """Check and parse the options of a write or writeStream.

    Raises:
        SparkOptionError: Spark's message for refused serializers; a missing
            ``kafka.bootstrap.servers``; a ``path`` (the sink writes through a broker).
    """
    opts = _lower(options)
    kafka = _kafka_params(opts)
    for name, message in _REFUSED_PRODUCER.items():
        if name in kafka:
            raise SparkOptionError(message)
    if opts.get("path", "").strip() and not opts.get("kafka.bootstrap.servers", "").strip():
        raise SparkOptionError(
            "The pylog sink writes through a broker: set 'kafka.bootstrap.servers' (the 'path' "
            "option, direct mode, is for reads only)")
    _check_mode({k: v for k, v in opts.items() if k != "path"}, kafka, "sink")
    _check_client_settings(kafka, "producer")
    topic = opts.get("topic")
    return SinkOptions(
        bootstrap_servers=opts["kafka.bootstrap.servers"],
        topic=topic.strip() if topic is not None and topic.strip() else None,
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        kafka=kafka,
    )
