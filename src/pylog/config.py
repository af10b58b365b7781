"""Broker and topic configuration: Kafka's names, types, defaults and validators.

Sources: ``ServerLogConfigs``, ``LogConfig``, ``ServerConfigs``, ``SocketServerConfigs`` in
apache/kafka (names and defaults as Kafka 3.9 has them; reference: docs/configuration.md).
A broker is configured from a ``server.properties`` file plus ``--override key=value`` flags; an unknown key or a bad value
fails at start with a message naming the key (``ConfigError``).

Topic-level configs (``retention.ms``, ``max.message.bytes``, ...) each have broker-level
synonyms (``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``) in
priority order; a topic's effective value is its own override if any, else the first broker
synonym set explicitly, else the first synonym's default. DescribeConfigs reports the same
chain (``synonyms``), with Kafka's source codes.

Immutable values; safe to share between threads.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE

# DescribeConfigs ConfigSource codes (DescribeConfigsResponse.json).
SOURCE_UNKNOWN = 0
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

# DescribeConfigs ConfigType codes (v3+).
CONFIG_TYPE_CODES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


class ConfigError(ValueError):
    """A configuration key is unknown or its value invalid. ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


# --- value parsing -------------------------------------------------------------------------

_RANGES = {"int": (-(2**31), INT_MAX), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}


def parse_value(key: str, type_: str, raw: Any) -> Any:
    """Parse ``raw`` (a string from a file or the wire, or an already typed value)."""
    if raw is None:
        return None
    if type_ in _RANGES:
        if isinstance(raw, bool):
            raise ConfigError(key, f"expected an integer, got {raw!r}")
        if isinstance(raw, int):
            value = raw
        else:
            text = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", text):
                raise ConfigError(key, f"expected an integer, got {raw!r}")
            value = int(text)
        lo, hi = _RANGES[type_]
        if not lo <= value <= hi:
            raise ConfigError(key, f"value {value} is out of range for a {type_}")
        return value
    if type_ == "boolean":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(key, f"expected true or false, got {raw!r}")
        return text == "true"
    if type_ == "double":
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(key, f"expected a number, got {raw!r}") from None
    if type_ == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(raw).strip()
        return [p.strip() for p in text.split(",")] if text else []
    return str(raw).strip()


def format_value(type_: str, value: Any) -> str | None:
    """Kafka's string form of a value (DescribeConfigs, the stored topic configs)."""
    if value is None:
        return None
    if type_ == "boolean":
        return "true" if value else "false"
    if type_ == "list":
        return ",".join(value)
    return str(value)


def at_least(n: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and value < n:
            raise ConfigError(key, f"value {value} must be at least {n}")

    return check


def between(lo: float, hi: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and not lo <= value <= hi:
            raise ConfigError(key, f"value {value} must be between {lo} and {hi}")

    return check


def one_of(*choices: str, case_insensitive: bool = False) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        for item in items:
            probe = item.lower() if case_insensitive else item
            allowed = [c.lower() for c in choices] if case_insensitive else list(choices)
            if probe not in allowed:
                raise ConfigError(key, f"invalid value {item!r}; expected one of {', '.join(choices)}")

    return check


def cleanup_policy(key: str, value: Any) -> None:
    """Kafka's ``ValidList.in("compact", "delete")``, and not empty (a topic must have a policy)."""
    if not value:
        raise ConfigError(key, "an empty policy is not valid; use delete, compact or compact,delete")
    one_of("delete", "compact")(key, value)


def load_factor(key: str, value: Any) -> None:
    if not 0 < value <= 1:
        raise ConfigError(key, f"value {value} must be more than 0 and at most 1")


def positive(key: str, value: Any) -> None:
    if not value > 0:
        raise ConfigError(key, f"value {value} must be more than 0")


def _metadata_version_names() -> frozenset[str]:
    """Kafka 3.9's ``MetadataVersion`` names: each release, and each release-IVn."""
    releases = {
        "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1,
        "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1,
        "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3,
        "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1, "4.0": 2,
    }  # release: number of IV sub-versions (0: named by the release alone)
    names = set(releases)
    for release, ivs in releases.items():
        names.update(f"{release}-IV{i}" for i in range(ivs))
    return frozenset(names)


_METADATA_VERSIONS = _metadata_version_names()
MESSAGE_FORMAT_VERSION_DEFAULT = "3.0-IV1"


def parse_metrics_listener(key: str, value: str) -> tuple[str, int]:
    """``http://host:port`` (``metrics.listener``; ``[::1]`` for IPv6) as (host, port).
    Raises ConfigError when it is not of that form or the port is out of range."""
    m = re.fullmatch(r"http://(\[[^\]]+\]|[^:/\[\]]+):(\d{1,5})/?", value.strip())
    if not m:
        raise ConfigError(key, f"invalid value {value!r}; expected http://host:port, e.g. "
                          "http://127.0.0.1:9404 (port 0: any free port), or leave it unset to "
                          "serve no metrics")
    port = int(m.group(2))
    if port > 65535:
        raise ConfigError(key, f"port {port} out of range in {value!r}; use 0 to 65535")
    return m.group(1).strip("[]"), port


def metrics_listener(key: str, value: Any) -> None:
    parse_metrics_listener(key, value)


def metadata_version(key: str, value: Any) -> None:
    """Kafka's ``MetadataVersionValidator``: ``0.10.0.0`` means ``0.10.0``, ``2.8.1`` means
    ``2.8`` (three parts count before 1.0, two after)."""
    parts = value.split(".")
    n = 3 if value.startswith("0.") else 2
    probe = value if n >= len(parts) else ".".join(parts[:n])
    if probe not in _METADATA_VERSIONS:
        raise ConfigError(key, f"{value!r} is not a valid version (examples: 0.10.0, 2.8, 3.0-IV1)")


# --- definitions -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str
    default: Any
    doc: str = ""
    validator: Callable[[str, Any], None] | None = None
    # Multiply the stored value by this to get the topic-level unit (hours -> ms).
    unit_ms: int = 1
    read_only: bool = True
    sensitive: bool = False

    def parse(self, raw: Any) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _broker_defs() -> list[ConfigDef]:
    return [
        ConfigDef("node.id", "int", 0, "The node id of this broker.", at_least(0)),
        ConfigDef("broker.id", "int", -1, "Legacy name of node.id; node.id wins when both are set.", at_least(-1)),
        ConfigDef("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "Listeners, as PLAINTEXT://host:port."),
        ConfigDef("advertised.listeners", "list", None, "Listeners given to clients in Metadata."),
        ConfigDef("metrics.listener", "string", None,
                  "Where /metrics (Prometheus text), /healthz and /readyz are served, as "
                  "http://host:port (port 0: chosen by the OS and logged); unset: not served "
                  "(docs/metrics.md).", metrics_listener),
        ConfigDef("listener.security.protocol.map", "string",
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  "Listener name to security protocol."),
        ConfigDef("log.dirs", "list", ["./pylog-data"], "The directory holding the log data."),
        ConfigDef("log.dir", "string", None, "Used when log.dirs is not set."),
        ConfigDef("num.partitions", "int", 1, "Default partition count of new topics.", at_least(1)),
        ConfigDef("default.replication.factor", "short", 1, "Default replication factor.", at_least(1)),
        # Cluster mode (ZooKeeper mode, docs/replication.md): unset zookeeper.connect = one node.
        ConfigDef("zookeeper.connect", "string", None,
                  "ZooKeeper connection string host:port[,host:port][/chroot]; set it to run the "
                  "broker as one of a cluster (unset: a single-node broker)."),
        ConfigDef("zookeeper.session.timeout.ms", "int", 18000,
                  "ZooKeeper session timeout: a broker silent for this long is declared dead.",
                  at_least(1)),
        ConfigDef("zookeeper.connection.timeout.ms", "int", None,
                  "How long to wait for the ZooKeeper connection at start (unset: the session "
                  "timeout).", at_least(1)),
        ConfigDef("broker.rack", "string", None,
                  "Rack of this broker (rack-aware replica assignment; set on all brokers or none)."),
        ConfigDef("auto.leader.rebalance.enable", "boolean", True,
                  "The controller moves leadership back to preferred replicas when brokers are "
                  "imbalanced."),
        ConfigDef("leader.imbalance.check.interval.seconds", "long", 300,
                  "How often the controller checks the leader imbalance.", at_least(1)),
        ConfigDef("leader.imbalance.per.broker.percentage", "int", 10,
                  "Share of a broker's preferred partitions led elsewhere that triggers a "
                  "preferred election.", at_least(0)),
        ConfigDef("controlled.shutdown.enable", "boolean", True,
                  "On SIGTERM, ask the controller to move this broker's leaderships first."),
        ConfigDef("controlled.shutdown.max.retries", "int", 3,
                  "Controlled shutdown attempts before shutting down uncleanly.", at_least(0)),
        ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000,
                  "Wait between controlled shutdown attempts.", at_least(0)),
        ConfigDef("auto.create.topics.enable", "boolean", True, "Create topics on Metadata and Produce."),
        ConfigDef("delete.topic.enable", "boolean", True, "Allow deleting topics."),
        ConfigDef("message.max.bytes", "int", 1048588, "Largest record batch size.", at_least(0)),
        ConfigDef("log.segment.bytes", "int", 1073741824, "Segment size.", at_least(14)),
        ConfigDef("log.roll.ms", "long", None, "Roll a segment after this long.", at_least(1)),
        ConfigDef("log.roll.hours", "int", 168, "Roll a segment after this many hours.", at_least(1), unit_ms=3_600_000),
        ConfigDef("log.roll.jitter.ms", "long", None, "Jitter subtracted from the roll time.", at_least(0)),
        ConfigDef("log.roll.jitter.hours", "int", 0, "Jitter in hours.", at_least(0), unit_ms=3_600_000),
        ConfigDef("log.index.size.max.bytes", "int", 10485760, "Index file size.", at_least(24)),
        ConfigDef("log.index.interval.bytes", "int", 4096, "Bytes between index entries.", at_least(0)),
        ConfigDef("log.retention.ms", "long", None, "Retention time (-1: unlimited).", at_least(-1)),
        ConfigDef("log.retention.minutes", "int", None, "Retention time in minutes.", at_least(-1), unit_ms=60_000),
        ConfigDef("log.retention.hours", "int", 168, "Retention time in hours.", at_least(-1), unit_ms=3_600_000),
        ConfigDef("log.retention.bytes", "long", -1, "Retention size per partition (-1: unlimited)."),
        ConfigDef("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", at_least(1)),
        ConfigDef("log.segment.delete.delay.ms", "long", 60000, "Delay before deleting a segment file.", at_least(0)),
        ConfigDef("log.flush.interval.messages", "long", LONG_MAX, "Flush after this many messages.", at_least(1)),
        ConfigDef("log.flush.interval.ms", "long", None, "Flush after this long.", at_least(0)),
        ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX, "Flush check interval."),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000,
                  "How often recovery points are written to their checkpoint files.", at_least(0)),
        ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
                  "How often log start offsets are written to their checkpoint files.", at_least(0)),
        ConfigDef("background.threads", "int", 10,
                  "Threads for background work (segment flushes, checkpoints).", at_least(1)),
        ConfigDef("log.cleanup.policy", "list", ["delete"],
                  "Default cleanup policy of topics: delete (time and size retention), compact (the "
                  "log cleaner keeps the latest record of each key) or both (compact,delete).",
                  cleanup_policy),
        ConfigDef("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
                  one_of(*_TIMESTAMP_TYPES)),
        ConfigDef("log.message.timestamp.before.max.ms", "long", LONG_MAX,
                  "Largest allowed age of a record timestamp (KIP-937).", at_least(0)),
        ConfigDef("log.message.timestamp.after.max.ms", "long", 3600000,
                  "Largest allowed lead of a record timestamp over the broker clock (KIP-937).", at_least(0)),
        ConfigDef("log.preallocate", "boolean", False, "Preallocate segment files."),
        ConfigDef("log.message.format.version", "string", MESSAGE_FORMAT_VERSION_DEFAULT,
                  "[DEPRECATED] Ignored (records are always written in format v2, as Kafka 3.x does from "
                  "inter.broker.protocol.version 3.0 on); removed in Kafka 4.0.", metadata_version),
        ConfigDef("log.message.downconversion.enable", "boolean", True,
                  "[DEPRECATED] Ignored: pylog serves Fetch v4 and later only, which never needs "
                  "down-conversion; removed in Kafka 4.0."),
        # The log cleaner (Kafka's CleanerConfig): names, defaults and validators as Kafka's.
        ConfigDef("log.cleaner.enable", "boolean", True,
                  "Run the log cleaner, which compacts cleanup.policy=compact topics (__consumer_offsets "
                  "among them); when false they are not compacted and grow without bound."),
        ConfigDef("log.cleaner.threads", "int", 1, "Background threads cleaning logs.", at_least(0)),
        ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728,
                  "Memory of the offset maps, shared out between the cleaner threads (at least 1 MiB each).",
                  at_least(0)),
        ConfigDef("log.cleaner.io.buffer.size", "int", 524288,
                  "Bytes the cleaner reads and writes per call.", at_least(0)),
        ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9,
                  "How full an offset map may become before a clean round ends (in (0, 1]).",
                  load_factor),
        ConfigDef("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX,
                  "Limit of the cleaner threads' reads plus writes, bytes per second.", positive),
        ConfigDef("log.cleaner.backoff.ms", "long", 15000,
                  "How long a cleaner thread sleeps when no log needs cleaning.", at_least(0)),
        ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000,
                  "How long a tombstone of a compacted topic outlives the clean that first kept it.",
                  at_least(0)),
        ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0,
                  "A record younger than this is never compacted.", at_least(0)),
        ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX,
                  "A log holding a dirty record older than this is cleaned whatever its dirty ratio.",
                  at_least(1)),
        ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5,
                  "A compacted log is cleaned when its dirty bytes are more than this share of it.",
                  between(0, 1)),
        ConfigDef("min.insync.replicas", "int", 1, "Replicas that must acknowledge acks=-1.", at_least(1)),
        # Replication (the replica manager, pylog.replication; Kafka's ReplicationConfigs).
        ConfigDef("replica.lag.time.max.ms", "long", 30000,
                  "A follower that has not caught up with the leader's log end for this long is "
                  "removed from the ISR.", at_least(1)),
        ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, "Most incremental "
                  "fetch sessions (KIP-227) the broker keeps; 0 turns them off.", at_least(0)),
        ConfigDef("replica.fetch.max.bytes", "int", 1048576,
                  "Bytes a follower asks per partition in each fetch (a larger first batch is "
                  "still returned whole).", at_least(0)),
        ConfigDef("replica.fetch.wait.max.ms", "int", 500,
                  "Longest wait of a follower's fetch at the leader; keep it below "
                  "replica.lag.time.max.ms.", at_least(0)),
        ConfigDef("replica.fetch.min.bytes", "int", 1,
                  "Bytes a follower's fetch waits for (up to replica.fetch.wait.max.ms).", at_least(1)),
        ConfigDef("replica.fetch.response.max.bytes", "int", 10485760,
                  "Bytes a follower asks in each fetch over all its partitions.", at_least(0)),
        ConfigDef("replica.fetch.backoff.ms", "int", 1000,
                  "Pause of a follower's fetcher after a failed fetch.", at_least(0)),
        ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000,
                  "How often the high watermarks of replicated partitions are written to "
                  "replication-offset-checkpoint.", at_least(1)),
        ConfigDef("num.replica.fetchers", "int", 1,
                  "Fetcher tasks per source broker (partitions are spread over them).", at_least(1)),
        ConfigDef("compression.type", "string", "producer", "Compression of stored batches.",
                  one_of(*_COMPRESSION_TYPES, case_insensitive=True)),
        ConfigDef("unclean.leader.election.enable", "boolean", False, "Allow unclean leader election."),
        ConfigDef("socket.request.max.bytes", "int", 104857600, "Largest request frame.", at_least(1)),
        # Kafka's default is -1 (unlimited); ours bounds the broker's memory. 128 MiB admits
        # one frame of socket.request.max.bytes (100 MiB) with 28 MiB left for others' small
        # requests, and dozens of 1 MiB produce requests at once.
        ConfigDef("queued.max.request.bytes", "long", 134217728,
                  "Bytes of requests being read or queued, broker-wide, before connections are "
                  "muted (one request of any size is always admitted; <= 0: unlimited).", at_least(-1)),
        ConfigDef("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF (-1: OS default).", at_least(-1)),
        ConfigDef("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF (-1: OS default).", at_least(-1)),
        ConfigDef("num.network.threads", "int", 3,
                  "Only Kafka's default 3 is accepted (with a warning): pylog's network layer is one event loop.",
                  at_least(1)),
        ConfigDef("num.io.threads", "int", 8,
                  "I/O threads for disk work kept off the event loop (appends of large or "
                  "compressed batches, cold reads, topic and retention file work).", at_least(1)),
        ConfigDef("num.recovery.threads.per.data.dir", "int", 2,
                  "Threads opening (recovering) logs at start (Kafka 4.0's default, KIP-1030).", at_least(1)),
        ConfigDef("connections.max.idle.ms", "long", 600000, "Close idle connections after this long.", at_least(1)),
        ConfigDef("offsets.topic.replication.factor", "short", 1, "Replication of __consumer_offsets.", at_least(1)),
        ConfigDef("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", at_least(1)),
        ConfigDef("transaction.state.log.replication.factor", "short", 1, "Replication of __transaction_state.", at_least(1)),
        ConfigDef("transaction.state.log.min.isr", "int", 1, "min.insync.replicas of __transaction_state.", at_least(1)),
        ConfigDef("group.initial.rebalance.delay.ms", "int", 3000,
                  "How long the first rebalance of an empty group waits for more members.", at_least(0)),
        ConfigDef("group.min.session.timeout.ms", "int", 6000,
                  "Smallest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT below).",
                  at_least(0)),
        ConfigDef("group.max.session.timeout.ms", "int", 1800000,
                  "Largest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT above).",
                  at_least(0)),
        ConfigDef("group.max.size", "int", 2147483647,
                  "Most members in one group (GROUP_MAX_SIZE_REACHED beyond).", at_least(1)),
        ConfigDef("offsets.retention.minutes", "int", 10080,
                  "How long the committed offsets of an empty group are kept.", at_least(1)),
        ConfigDef("offsets.retention.check.interval.ms", "long", 600000,
                  "How often expired committed offsets are looked for.", at_least(1)),
        ConfigDef("offset.metadata.max.bytes", "int", 4096,
                  "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond).",
                  at_least(0)),
        ConfigDef("offsets.topic.segment.bytes", "int", 104857600,
                  "segment.bytes of __consumer_offsets (small segments for compaction).", at_least(14)),
        ConfigDef("offsets.load.buffer.size", "int", 5242880,
                  "Bytes read per step when loading a __consumer_offsets partition.", at_least(1)),
        ConfigDef("offsets.commit.timeout.ms", "int", 5000,
                  "How long a group coordinator's write (an offset commit, a group's metadata) "
                  "waits for every in-sync replica of its __consumer_offsets partition in cluster "
                  "mode before the request fails with COORDINATOR_NOT_AVAILABLE.", at_least(1)),
        # The transaction coordinator (pylog.txn; Kafka's TransactionLogConfig and
        # TransactionStateManagerConfig).
        ConfigDef("transaction.state.log.num.partitions", "int", 50,
                  "Partitions of __transaction_state.", at_least(1)),
        ConfigDef("transaction.state.log.segment.bytes", "int", 104857600,
                  "segment.bytes of __transaction_state (small segments for compaction).", at_least(14)),
        ConfigDef("transaction.state.log.load.buffer.size", "int", 5242880,
                  "Bytes read per step when loading a __transaction_state partition.", at_least(1)),
        ConfigDef("transaction.max.timeout.ms", "int", 900000,
                  "Largest transaction.timeout.ms a producer may ask for "
                  "(INVALID_TRANSACTION_TIMEOUT above).", at_least(1)),
        ConfigDef("transactional.id.expiration.ms", "int", 604800000,
                  "A transactional id with no transaction for this long is forgotten (tombstoned).",
                  at_least(1)),
        ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
                  "How often transactions open longer than their timeout are looked for and aborted.",
                  at_least(1)),
        ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
                  "How often expired transactional ids are looked for.", at_least(1)),
        ConfigDef("transaction.partition.verification.enable", "boolean", True,
                  "Partition leaders check with the coordinator that a transactional producer "
                  "added the partition before its first batch there (KIP-890)."),
    ]


@dataclasses.dataclass(frozen=True)
class TopicConfigDef:
    """A topic-level config and the broker configs it falls back to, in priority order."""

    name: str
    type: str
    synonyms: tuple[str, ...]
    validator: Callable[[str, Any], None] | None = None
    doc: str = ""

    def parse(self, raw: Any) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value


TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in [
        TopicConfigDef("cleanup.policy", "list", ("log.cleanup.policy",), cleanup_policy),
        TopicConfigDef("compression.type", "string", ("compression.type",),
                       one_of(*_COMPRESSION_TYPES, case_insensitive=True)),
        TopicConfigDef("delete.retention.ms", "long", ("log.cleaner.delete.retention.ms",), at_least(0)),
        TopicConfigDef("file.delete.delay.ms", "long", ("log.segment.delete.delay.ms",), at_least(0)),
        TopicConfigDef("flush.messages", "long", ("log.flush.interval.messages",), at_least(1)),
        TopicConfigDef("flush.ms", "long", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), at_least(0)),
        TopicConfigDef("index.interval.bytes", "int", ("log.index.interval.bytes",), at_least(0)),
        TopicConfigDef("max.compaction.lag.ms", "long", ("log.cleaner.max.compaction.lag.ms",), at_least(1)),
        TopicConfigDef("max.message.bytes", "int", ("message.max.bytes",), at_least(0)),
        TopicConfigDef("message.downconversion.enable", "boolean", ("log.message.downconversion.enable",)),
        TopicConfigDef("message.format.version", "string", ("log.message.format.version",), metadata_version),
        TopicConfigDef("message.timestamp.after.max.ms", "long", ("log.message.timestamp.after.max.ms",), at_least(0)),
        TopicConfigDef("message.timestamp.before.max.ms", "long", ("log.message.timestamp.before.max.ms",), at_least(0)),
        TopicConfigDef("message.timestamp.type", "string", ("log.message.timestamp.type",), one_of(*_TIMESTAMP_TYPES)),
        TopicConfigDef("min.cleanable.dirty.ratio", "double", ("log.cleaner.min.cleanable.ratio",), between(0, 1)),
        TopicConfigDef("min.compaction.lag.ms", "long", ("log.cleaner.min.compaction.lag.ms",), at_least(0)),
        TopicConfigDef("min.insync.replicas", "int", ("min.insync.replicas",), at_least(1)),
        TopicConfigDef("preallocate", "boolean", ("log.preallocate",)),
        TopicConfigDef("retention.bytes", "long", ("log.retention.bytes",)),
        TopicConfigDef("retention.ms", "long", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                       at_least(-1)),
        TopicConfigDef("segment.bytes", "int", ("log.segment.bytes",), at_least(14)),
        TopicConfigDef("segment.index.bytes", "int", ("log.index.size.max.bytes",), at_least(24)),
        TopicConfigDef("segment.jitter.ms", "long", ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0)),
        TopicConfigDef("segment.ms", "long", ("log.roll.ms", "log.roll.hours"), at_least(1)),
        TopicConfigDef("unclean.leader.election.enable", "boolean", ("unclean.leader.election.enable",)),
    ]
}

BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _broker_defs()}


# --- Kafka settings pylog knows but cannot honour -----------------------------------------------
#
# A setting that is accepted must work. Those pylog cannot honour are refused, naming the key
# and what to do instead: ConfigError here, INVALID_CONFIG (40) from CreateTopics /
# AlterConfigs / IncrementalAlterConfigs, a one-line start-up error from server.properties or
# --override. Deprecated settings that Kafka 3.x still accepts and ignores are accepted with
# a warning.

# Kafka's default, found in every server.properties Kafka ships: accepted (with a warning) so
# that such a file starts; any other count would promise network threads pylog does not have.
NETWORK_THREADS_DEFAULT = 3

# Deprecated topic configs (and their log.* broker synonyms) -> why ignoring them is right.
DEPRECATED_TOPIC_CONFIGS = {
    "message.format.version": (
        "records are always written in message format v2, as Kafka 3.x does from "
        "inter.broker.protocol.version 3.0 on (Kafka 4.0 removed it)"),
    "message.downconversion.enable": (
        "pylog serves Fetch v4 and later only, which never needs down-conversion "
        "(Kafka 4.0 removed it)"),
}


def _deprecation_warning(key: str, topic_key: str) -> str:
    return f"{key} is deprecated and ignored: {DEPRECATED_TOPIC_CONFIGS[topic_key]}"


def check_topic_configs(overrides: Mapping[str, Any]) -> list[str]:
    """Warnings for the deprecated topic configs among ``overrides`` (parsed), which pylog
    accepts and ignores."""
    return [_deprecation_warning(k, k) for k in sorted(overrides) if k in DEPRECATED_TOPIC_CONFIGS]


def _check_broker_configs(explicit: Mapping[str, Any]) -> list[str]:
    """Broker-level counterpart of ``check_topic_configs`` on the parsed explicit settings.
    Returns warnings; raises ConfigError."""
    _check_cleaner_configs(explicit)
    warnings = []
    threads = explicit.get("num.network.threads")
    if threads is not None:
        if threads != NETWORK_THREADS_DEFAULT:
            raise ConfigError(
                "num.network.threads",
                f"pylog's network layer is one event loop, it cannot use {threads} threads: remove "
                f"this setting (or set Kafka's default {NETWORK_THREADS_DEFAULT}); disk work runs "
                "on num.io.threads")
        warnings.append(f"num.network.threads={threads} is ignored: pylog's network layer is one event loop")
    for topic_key in DEPRECATED_TOPIC_CONFIGS:
        if "log." + topic_key in explicit:
            warnings.append(_deprecation_warning("log." + topic_key, topic_key))
    return warnings


def _check_cleaner_configs(explicit: Mapping[str, Any]) -> None:
    """Kafka's ``KafkaConfig.validateValues`` for the cleaner: each thread's offset map gets
    more than 1 MiB. Kafka divides by ``log.cleaner.threads`` there, so 0 threads fails its
    start too; here the message says what to do."""
    defaults = {k: BROKER_CONFIG_DEFS[k].default for k in
                ("log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size")}
    values = {k: explicit.get(k, v) for k, v in defaults.items()}
    threads = values["log.cleaner.threads"]
    if threads == 0:
        if values["log.cleaner.enable"]:
            raise ConfigError("log.cleaner.threads",
                              "0 threads clean nothing: set log.cleaner.enable=false to run no log "
                              "cleaner, or give at least 1 thread")
        return
    if values["log.cleaner.dedupe.buffer.size"] // threads <= 1024 * 1024:
        raise ConfigError("log.cleaner.dedupe.buffer.size",
                          f"must be at least 1MB per cleaner thread ({threads} threads): raise it "
                          "or lower log.cleaner.threads")


@dataclasses.dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(key: str, items: Iterable[str]) -> list[Listener]:
    listeners = []
    for item in items:
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/]*):(\d+)", item)
        if not m:
            raise ConfigError(key, f"invalid listener {item!r}; expected NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if name != "PLAINTEXT":
            raise ConfigError(key, f"listener {item!r}: only PLAINTEXT is supported")
        if port > 65535:
            raise ConfigError(key, f"listener {item!r}: port out of range")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ConfigError(key, "at least one listener is required")
    return listeners


# --- the broker's configuration ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConfigEntry:
    """One line of DescribeConfigs."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    type: str
    doc: str
    synonyms: tuple[tuple[str, str | None, int], ...]


def _did_you_mean(key: str) -> str:
    """"; did you mean 'log.retention.hours'?" for a misspelt broker key, else ""."""
    close = difflib.get_close_matches(key.lower(), list(BROKER_CONFIG_DEFS), n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""


class BrokerConfig:
    """Parsed, validated broker configuration (static: read once at start)."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        explicit: dict[str, Any] = {}
        values = values or {}
        for key, raw in values.items():
            d = BROKER_CONFIG_DEFS.get(key)
            if d is None:
                raise ConfigError(key, "unknown configuration" + _did_you_mean(key))
            explicit[key] = d.parse(raw)
        self._explicit = explicit
        # Settings accepted but ignored, for the broker to log at start.
        self.warnings: list[str] = _check_broker_configs(explicit)
        self.listeners = parse_listeners("listeners", self["listeners"])
        adv = self["advertised.listeners"]
        self.advertised_listeners = (
            parse_listeners("advertised.listeners", adv) if adv else list(self.listeners)
        )
        dirs = self._explicit.get("log.dirs")
        if dirs is None and self["log.dir"] is not None:
            dirs = [self["log.dir"]]
        if dirs is None:
            dirs = self["log.dirs"]
        if len(dirs) != 1 or not dirs[0]:
            raise ConfigError("log.dirs", f"exactly one directory is supported, got {dirs!r}")
        self.log_dir: str = dirs[0]
        node_id = self["node.id"]
        if "node.id" not in explicit and self["broker.id"] >= 0:
            node_id = self["broker.id"]
        self.node_id: int = node_id
        self.cluster_mode: bool = bool(self["zookeeper.connect"])
        if not self.cluster_mode and self["default.replication.factor"] != 1:
            raise ConfigError("default.replication.factor", "a single-node broker needs 1 (set "
                              "zookeeper.connect to run a cluster)")
        # The topic-level defaults, computed once (validates the broker synonyms too).
        self._topic_defaults = {name: self._topic_default(d) for name, d in TOPIC_CONFIG_DEFS.items()}
        for name, (value, _s, key) in self._topic_defaults.items():
            tdef = TOPIC_CONFIG_DEFS[name]
            if tdef.validator is not None and value is not None:
                tdef.validator(key, value)

    @classmethod
    def from_sources(cls, path: str | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read ``server.properties`` (if given) and apply ``key=value`` overrides on top."""
        values: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    values.update(parse_properties(f.read()))
            except OSError as exc:
                raise ConfigError("--config", f"cannot read {path}: {exc.strerror}") from None
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(item, "an override must look like key=value")
            values[key.strip()] = value.strip()
        return cls(values)

    def __getitem__(self, key: str) -> Any:
        if key in self._explicit:
            return self._explicit[key]
        return BROKER_CONFIG_DEFS[key].default

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    def _topic_default(self, d: TopicConfigDef) -> tuple[Any, int, str]:
        """(value in topic units, source, broker key) for a topic config with no override."""
        for key in d.synonyms:
            if key in self._explicit and self._explicit[key] is not None:
                return self._to_topic_unit(key, self._explicit[key]), SOURCE_STATIC_BROKER_CONFIG, key
        for key in d.synonyms:
            default = BROKER_CONFIG_DEFS[key].default
            if default is not None:
                return self._to_topic_unit(key, default), SOURCE_DEFAULT_CONFIG, key
        raise AssertionError(f"{d.name} has no default")  # pragma: no cover - table bug

    @staticmethod
    def _to_topic_unit(key: str, value: Any) -> Any:
        unit = BROKER_CONFIG_DEFS[key].unit_ms
        if unit != 1 and value is not None and value >= 0:
            return value * unit
        return value

    def topic_default(self, name: str) -> Any:
        return self._topic_defaults[name][0]

    def topic_defaults(self) -> dict[str, Any]:
        return {name: v for name, (v, _s, _k) in self._topic_defaults.items()}

    # --- DescribeConfigs ---

    def describe_broker(self) -> list[ConfigEntry]:
        entries = []
        for name, d in sorted(BROKER_CONFIG_DEFS.items()):
            value = self[name]
            source = SOURCE_STATIC_BROKER_CONFIG if name in self._explicit else SOURCE_DEFAULT_CONFIG
            synonyms: list[tuple[str, str | None, int]] = []
            if name in self._explicit:
                synonyms.append((name, format_value(d.type, value), SOURCE_STATIC_BROKER_CONFIG))
            if d.default is not None:
                synonyms.append((name, format_value(d.type, d.default), SOURCE_DEFAULT_CONFIG))
            entries.append(
                ConfigEntry(name, format_value(d.type, value), source, True, d.sensitive, d.type, d.doc,
                            tuple(synonyms))
            )
        return entries

    def describe_topic(self, overrides: Mapping[str, Any]) -> list[ConfigEntry]:
        entries = []
        for name, d in sorted(TOPIC_CONFIG_DEFS.items()):
            synonyms: list[tuple[str, str | None, int]] = []
            if name in overrides:
                synonyms.append((name, format_value(d.type, overrides[name]), SOURCE_DYNAMIC_TOPIC_CONFIG))
            for key in d.synonyms:
                bd = BROKER_CONFIG_DEFS[key]
                if key in self._explicit and self._explicit[key] is not None:
                    synonyms.append((key, format_value(bd.type, self._explicit[key]), SOURCE_STATIC_BROKER_CONFIG))
            for key in d.synonyms:
                bd = BROKER_CONFIG_DEFS[key]
                if bd.default is not None:
                    synonyms.append((key, format_value(bd.type, bd.default), SOURCE_DEFAULT_CONFIG))
            if name in overrides:
                value, source = overrides[name], SOURCE_DYNAMIC_TOPIC_CONFIG
            else:
                value, source, _k = self._topic_defaults[name]
            # The first synonym is the primary one (segment.ms -> log.roll.ms, not
            # log.roll.hours): its text describes the topic key's unit.
            doc = d.doc or BROKER_CONFIG_DEFS[d.synonyms[0]].doc
            entries.append(
                ConfigEntry(name, format_value(d.type, value), source, False, False, d.type, doc,
                            tuple(synonyms))
            )
        return entries


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java ``.properties`` text: ``key=value`` / ``key: value`` / ``key value`` lines,
    ``#`` and ``!`` comments, backslash line continuations and escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        assert m is not None
        key, value = _unescape(m.group(1)), _unescape(m.group(2))
        out[key] = value.rstrip()
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", repl, s)


def parse_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Validate topic-level overrides (CreateTopics, AlterConfigs). Raises ConfigError."""
    out = {}
    for key, raw in configs.items():
        d = TOPIC_CONFIG_DEFS.get(key)
        if d is None:
            raise ConfigError(key, "unknown topic configuration")
        out[key] = d.parse(raw)
    return out
