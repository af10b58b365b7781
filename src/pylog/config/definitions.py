"""The broker's and the topics' config definitions: Kafka's names, types, defaults and docs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pylog.config.group_defs import group_protocol_defs
from pylog.config.quota_defs import quota_config_defs
from pylog.config.security_defs import sasl_defs, security_defs
from pylog.config.values import (
    DOUBLE_MAX,
    LONG_MAX,
    MESSAGE_FORMAT_VERSION_DEFAULT,
    at_least,
    between,
    cleanup_policy,
    load_factor,
    metadata_version,
    metrics_listener,
    one_of,
    parse_value,
    positive,
)

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
# group.consumer.assignors also takes Kafka's class names of the two built-in assignors.
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
_ASSIGNOR_CLASSES = tuple(ASSIGNOR_CLASSES)


def _broker_defs() -> list[ConfigDef]:
    return [
        ConfigDef("node.id", "int", 0, "The node id of this broker.", at_least(0)),
        ConfigDef(
            "broker.id",
            "int",
            -1,
            "Legacy name of node.id; node.id wins when both are set.",
            at_least(-1),
        ),
        ConfigDef(
            "listeners",
            "list",
            ["PLAINTEXT://127.0.0.1:9092"],
            "Listeners, as PLAINTEXT://host:port.",
        ),
        ConfigDef("advertised.listeners", "list", None, "Listeners given to clients in Metadata."),
        ConfigDef(
            "metrics.listener",
            "string",
            None,
            "Where /metrics (Prometheus text), /healthz and /readyz are served, as "
            "http://host:port (port 0: chosen by the OS and logged); unset: not served "
            "(docs/metrics.md).",
            metrics_listener,
        ),
        ConfigDef(
            "listener.security.protocol.map",
            "string",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "Listener name to security protocol.",
        ),
        ConfigDef("log.dirs", "list", ["./pylog-data"], "The directory holding the log data."),
        ConfigDef("log.dir", "string", None, "Used when log.dirs is not set."),
        ConfigDef(
            "num.partitions", "int", 1, "Default partition count of new topics.", at_least(1)
        ),
        ConfigDef(
            "default.replication.factor", "short", 1, "Default replication factor.", at_least(1)
        ),
        # Cluster mode (ZooKeeper mode, docs/replication.md): unset zookeeper.connect = one node.
        ConfigDef(
            "zookeeper.connect",
            "string",
            None,
            "ZooKeeper connection string host:port[,host:port][/chroot]; set it to run the "
            "broker as one of a cluster (unset: a single-node broker).",
        ),
        ConfigDef(
            "zookeeper.session.timeout.ms",
            "int",
            18000,
            "ZooKeeper session timeout: a broker silent for this long is declared dead.",
            at_least(1),
        ),
        ConfigDef(
            "zookeeper.connection.timeout.ms",
            "int",
            None,
            "How long to wait for the ZooKeeper connection at start (unset: the session timeout).",
            at_least(1),
        ),
        ConfigDef(
            "broker.rack",
            "string",
            None,
            "Rack of this broker (rack-aware replica assignment; set on all brokers or none).",
        ),
        ConfigDef(
            "auto.leader.rebalance.enable",
            "boolean",
            True,
            "The controller moves leadership back to preferred replicas when brokers are "
            "imbalanced.",
        ),
        ConfigDef(
            "leader.imbalance.check.interval.seconds",
            "long",
            300,
            "How often the controller checks the leader imbalance.",
            at_least(1),
        ),
        ConfigDef(
            "leader.imbalance.per.broker.percentage",
            "int",
            10,
            "Share of a broker's preferred partitions led elsewhere that triggers a "
            "preferred election.",
            at_least(0),
        ),
        ConfigDef(
            "controlled.shutdown.enable",
            "boolean",
            True,
            "On SIGTERM, ask the controller to move this broker's leaderships first.",
        ),
        ConfigDef(
            "controlled.shutdown.max.retries",
            "int",
            3,
            "Controlled shutdown attempts before shutting down uncleanly.",
            at_least(0),
        ),
        ConfigDef(
            "controlled.shutdown.retry.backoff.ms",
            "long",
            5000,
            "Wait between controlled shutdown attempts.",
            at_least(0),
        ),
        ConfigDef(
            "auto.create.topics.enable", "boolean", True, "Create topics on Metadata and Produce."
        ),
        ConfigDef("delete.topic.enable", "boolean", True, "Allow deleting topics."),
        ConfigDef("message.max.bytes", "int", 1048588, "Largest record batch size.", at_least(0)),
        ConfigDef("log.segment.bytes", "int", 1073741824, "Segment size.", at_least(14)),
        ConfigDef("log.roll.ms", "long", None, "Roll a segment after this long.", at_least(1)),
        ConfigDef(
            "log.roll.hours",
            "int",
            168,
            "Roll a segment after this many hours.",
            at_least(1),
            unit_ms=3_600_000,
        ),
        ConfigDef(
            "log.roll.jitter.ms", "long", None, "Jitter subtracted from the roll time.", at_least(0)
        ),
        ConfigDef(
            "log.roll.jitter.hours", "int", 0, "Jitter in hours.", at_least(0), unit_ms=3_600_000
        ),
        ConfigDef("log.index.size.max.bytes", "int", 10485760, "Index file size.", at_least(24)),
        ConfigDef(
            "log.index.interval.bytes", "int", 4096, "Bytes between index entries.", at_least(0)
        ),
        ConfigDef(
            "log.retention.ms", "long", None, "Retention time (-1: unlimited).", at_least(-1)
        ),
        ConfigDef(
            "log.retention.minutes",
            "int",
            None,
            "Retention time in minutes.",
            at_least(-1),
            unit_ms=60_000,
        ),
        ConfigDef(
            "log.retention.hours",
            "int",
            168,
            "Retention time in hours.",
            at_least(-1),
            unit_ms=3_600_000,
        ),
        ConfigDef(
            "log.retention.bytes", "long", -1, "Retention size per partition (-1: unlimited)."
        ),
        ConfigDef(
            "log.retention.check.interval.ms",
            "long",
            300000,
            "How often retention runs.",
            at_least(1),
        ),
        ConfigDef(
            "log.segment.delete.delay.ms",
            "long",
            60000,
            "Delay before deleting a segment file.",
            at_least(0),
        ),
        ConfigDef(
            "log.flush.interval.messages",
            "long",
            LONG_MAX,
            "Flush after this many messages.",
            at_least(1),
        ),
        ConfigDef("log.flush.interval.ms", "long", None, "Flush after this long.", at_least(0)),
        ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX, "Flush check interval."),
        ConfigDef(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            60000,
            "How often recovery points are written to their checkpoint files.",
            at_least(0),
        ),
        ConfigDef(
            "log.flush.start.offset.checkpoint.interval.ms",
            "int",
            60000,
            "How often log start offsets are written to their checkpoint files.",
            at_least(0),
        ),
        ConfigDef(
            "background.threads",
            "int",
            10,
            "Threads for background work (segment flushes, checkpoints).",
            at_least(1),
        ),
        ConfigDef(
            "log.cleanup.policy",
            "list",
            ["delete"],
            "Default cleanup policy of topics: delete (time and size retention), compact (the "
            "log cleaner keeps the latest record of each key) or both (compact,delete).",
            cleanup_policy,
        ),
        ConfigDef(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            "CreateTime or LogAppendTime.",
            one_of(*_TIMESTAMP_TYPES),
        ),
        ConfigDef(
            "log.message.timestamp.before.max.ms",
            "long",
            LONG_MAX,
            "Largest allowed age of a record timestamp (KIP-937).",
            at_least(0),
        ),
        ConfigDef(
            "log.message.timestamp.after.max.ms",
            "long",
            3600000,
            "Largest allowed lead of a record timestamp over the broker clock (KIP-937).",
            at_least(0),
        ),
        ConfigDef("log.preallocate", "boolean", False, "Preallocate segment files."),
        ConfigDef(
            "log.message.format.version",
            "string",
            MESSAGE_FORMAT_VERSION_DEFAULT,
            "[DEPRECATED] Ignored (records are always written in format v2, as Kafka 3.x does from "
            "inter.broker.protocol.version 3.0 on); removed in Kafka 4.0.",
            metadata_version,
        ),
        ConfigDef(
            "log.message.downconversion.enable",
            "boolean",
            True,
            "[DEPRECATED] Ignored: pylog serves Fetch v4 and later only, which never needs "
            "down-conversion; removed in Kafka 4.0.",
        ),
        # The log cleaner (Kafka's CleanerConfig): names, defaults and validators as Kafka's.
        ConfigDef(
            "log.cleaner.enable",
            "boolean",
            True,
            "Run the log cleaner, which compacts cleanup.policy=compact topics (__consumer_offsets "
            "among them); when false they are not compacted and grow without bound.",
        ),
        ConfigDef(
            "log.cleaner.threads", "int", 1, "Background threads cleaning logs.", at_least(0)
        ),
        ConfigDef(
            "log.cleaner.dedupe.buffer.size",
            "long",
            134217728,
            "Memory of the offset maps, shared out between the cleaner threads (at least 1 MiB each).",
            at_least(0),
        ),
        ConfigDef(
            "log.cleaner.io.buffer.size",
            "int",
            524288,
            "Bytes the cleaner reads and writes per call.",
            at_least(0),
        ),
        ConfigDef(
            "log.cleaner.io.buffer.load.factor",
            "double",
            0.9,
            "How full an offset map may become before a clean round ends (in (0, 1]).",
            load_factor,
        ),
        ConfigDef(
            "log.cleaner.io.max.bytes.per.second",
            "double",
            DOUBLE_MAX,
            "Limit of the cleaner threads' reads plus writes, bytes per second.",
            positive,
        ),
        ConfigDef(
            "log.cleaner.backoff.ms",
            "long",
            15000,
            "How long a cleaner thread sleeps when no log needs cleaning.",
            at_least(0),
        ),
        ConfigDef(
            "log.cleaner.delete.retention.ms",
            "long",
            86400000,
            "How long a tombstone of a compacted topic outlives the clean that first kept it.",
            at_least(0),
        ),
        ConfigDef(
            "log.cleaner.min.compaction.lag.ms",
            "long",
            0,
            "A record younger than this is never compacted.",
            at_least(0),
        ),
        ConfigDef(
            "log.cleaner.max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "A log holding a dirty record older than this is cleaned whatever its dirty ratio.",
            at_least(1),
        ),
        ConfigDef(
            "log.cleaner.min.cleanable.ratio",
            "double",
            0.5,
            "A compacted log is cleaned when its dirty bytes are more than this share of it.",
            between(0, 1),
        ),
        ConfigDef(
            "min.insync.replicas", "int", 1, "Replicas that must acknowledge acks=-1.", at_least(1)
        ),
        # Replication (the replica manager, pylog.replication; Kafka's ReplicationConfigs).
        ConfigDef(
            "replica.lag.time.max.ms",
            "long",
            30000,
            "A follower that has not caught up with the leader's log end for this long is "
            "removed from the ISR.",
            at_least(1),
        ),
        ConfigDef(
            "max.incremental.fetch.session.cache.slots",
            "int",
            1000,
            "Most incremental fetch sessions (KIP-227) the broker keeps; 0 turns them off.",
            at_least(0),
        ),
        ConfigDef(
            "replica.fetch.max.bytes",
            "int",
            1048576,
            "Bytes a follower asks per partition in each fetch (a larger first batch is "
            "still returned whole).",
            at_least(0),
        ),
        ConfigDef(
            "replica.fetch.wait.max.ms",
            "int",
            500,
            "Longest wait of a follower's fetch at the leader; keep it below "
            "replica.lag.time.max.ms.",
            at_least(0),
        ),
        ConfigDef(
            "replica.fetch.min.bytes",
            "int",
            1,
            "Bytes a follower's fetch waits for (up to replica.fetch.wait.max.ms).",
            at_least(1),
        ),
        ConfigDef(
            "replica.fetch.response.max.bytes",
            "int",
            10485760,
            "Bytes a follower asks in each fetch over all its partitions.",
            at_least(0),
        ),
        ConfigDef(
            "replica.fetch.backoff.ms",
            "int",
            1000,
            "Pause of a follower's fetcher after a failed fetch.",
            at_least(0),
        ),
        ConfigDef(
            "replica.high.watermark.checkpoint.interval.ms",
            "long",
            5000,
            "How often the high watermarks of replicated partitions are written to "
            "replication-offset-checkpoint.",
            at_least(1),
        ),
        ConfigDef(
            "num.replica.fetchers",
            "int",
            1,
            "Fetcher tasks per source broker (partitions are spread over them).",
            at_least(1),
        ),
        ConfigDef(
            "compression.type",
            "string",
            "producer",
            "Compression of stored batches.",
            one_of(*_COMPRESSION_TYPES, case_insensitive=True),
        ),
        ConfigDef(
            "unclean.leader.election.enable", "boolean", False, "Allow unclean leader election."
        ),
        ConfigDef(
            "socket.request.max.bytes", "int", 104857600, "Largest request frame.", at_least(1)
        ),
        # Kafka's default is -1 (unlimited); ours bounds the broker's memory. 128 MiB admits
        # one frame of socket.request.max.bytes (100 MiB) with 28 MiB left for others' small
        # requests, and dozens of 1 MiB produce requests at once.
        ConfigDef(
            "queued.max.request.bytes",
            "long",
            134217728,
            "Bytes of requests being read or queued, broker-wide, before connections are "
            "muted (one request of any size is always admitted; <= 0: unlimited).",
            at_least(-1),
        ),
        ConfigDef(
            "socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF (-1: OS default).", at_least(-1)
        ),
        ConfigDef(
            "socket.receive.buffer.bytes",
            "int",
            102400,
            "SO_RCVBUF (-1: OS default).",
            at_least(-1),
        ),
        ConfigDef(
            "num.network.threads",
            "int",
            3,
            "Only Kafka's default 3 is accepted (with a warning): pylog's network layer is one event loop.",
            at_least(1),
        ),
        ConfigDef(
            "num.io.threads",
            "int",
            8,
            "I/O threads for disk work kept off the event loop (appends of large or "
            "compressed batches, cold reads, topic and retention file work).",
            at_least(1),
        ),
        ConfigDef(
            "num.recovery.threads.per.data.dir",
            "int",
            2,
            "Threads opening (recovering) logs at start (Kafka 4.0's default, KIP-1030).",
            at_least(1),
        ),
        ConfigDef(
            "connections.max.idle.ms",
            "long",
            600000,
            "Close idle connections after this long.",
            at_least(1),
        ),
        ConfigDef(
            "offsets.topic.replication.factor",
            "short",
            1,
            "Replication of __consumer_offsets.",
            at_least(1),
        ),
        ConfigDef(
            "offsets.topic.num.partitions",
            "int",
            50,
            "Partitions of __consumer_offsets.",
            at_least(1),
        ),
        ConfigDef(
            "transaction.state.log.replication.factor",
            "short",
            1,
            "Replication of __transaction_state.",
            at_least(1),
        ),
        ConfigDef(
            "transaction.state.log.min.isr",
            "int",
            1,
            "min.insync.replicas of __transaction_state.",
            at_least(1),
        ),
        ConfigDef(
            "group.initial.rebalance.delay.ms",
            "int",
            3000,
            "How long the first rebalance of an empty group waits for more members.",
            at_least(0),
        ),
        ConfigDef(
            "group.min.session.timeout.ms",
            "int",
            6000,
            "Smallest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT below).",
            at_least(0),
        ),
        ConfigDef(
            "group.max.session.timeout.ms",
            "int",
            1800000,
            "Largest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT above).",
            at_least(0),
        ),
        ConfigDef(
            "group.max.size",
            "int",
            2147483647,
            "Most members in one group (GROUP_MAX_SIZE_REACHED beyond).",
            at_least(1),
        ),
        ConfigDef(
            "offsets.retention.minutes",
            "int",
            10080,
            "How long the committed offsets of an empty group are kept.",
            at_least(1),
        ),
        ConfigDef(
            "offsets.retention.check.interval.ms",
            "long",
            600000,
            "How often expired committed offsets are looked for.",
            at_least(1),
        ),
        ConfigDef(
            "offset.metadata.max.bytes",
            "int",
            4096,
            "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond).",
            at_least(0),
        ),
        ConfigDef(
            "offsets.topic.segment.bytes",
            "int",
            104857600,
            "segment.bytes of __consumer_offsets (small segments for compaction).",
            at_least(14),
        ),
        ConfigDef(
            "offsets.load.buffer.size",
            "int",
            5242880,
            "Bytes read per step when loading a __consumer_offsets partition.",
            at_least(1),
        ),
        ConfigDef(
            "offsets.commit.timeout.ms",
            "int",
            5000,
            "How long a group coordinator's write (an offset commit, a group's metadata) "
            "waits for every in-sync replica of its __consumer_offsets partition in cluster "
            "mode before the request fails with COORDINATOR_NOT_AVAILABLE.",
            at_least(1),
        ),
        # The transaction coordinator (pylog.txn; Kafka's TransactionLogConfig and
        # TransactionStateManagerConfig).
        ConfigDef(
            "transaction.state.log.num.partitions",
            "int",
            50,
            "Partitions of __transaction_state.",
            at_least(1),
        ),
        ConfigDef(
            "transaction.state.log.segment.bytes",
            "int",
            104857600,
            "segment.bytes of __transaction_state (small segments for compaction).",
            at_least(14),
        ),
        ConfigDef(
            "transaction.state.log.load.buffer.size",
            "int",
            5242880,
            "Bytes read per step when loading a __transaction_state partition.",
            at_least(1),
        ),
        ConfigDef(
            "transaction.max.timeout.ms",
            "int",
            900000,
            "Largest transaction.timeout.ms a producer may ask for "
            "(INVALID_TRANSACTION_TIMEOUT above).",
            at_least(1),
        ),
        ConfigDef(
            "transactional.id.expiration.ms",
            "int",
            604800000,
            "A transactional id with no transaction for this long is forgotten (tombstoned).",
            at_least(1),
        ),
        ConfigDef(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "int",
            10000,
            "How often transactions open longer than their timeout are looked for and aborted.",
            at_least(1),
        ),
        ConfigDef(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            3600000,
            "How often expired transactional ids are looked for.",
            at_least(1),
        ),
        ConfigDef(
            "transaction.partition.verification.enable",
            "boolean",
            True,
            "Partition leaders check with the coordinator that a transactional producer "
            "added the partition before its first batch there (KIP-890).",
        ),
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
        TopicConfigDef(
            "compression.type",
            "string",
            ("compression.type",),
            one_of(*_COMPRESSION_TYPES, case_insensitive=True),
        ),
        TopicConfigDef(
            "delete.retention.ms", "long", ("log.cleaner.delete.retention.ms",), at_least(0)
        ),
        TopicConfigDef(
            "file.delete.delay.ms", "long", ("log.segment.delete.delay.ms",), at_least(0)
        ),
        TopicConfigDef("flush.messages", "long", ("log.flush.interval.messages",), at_least(1)),
        TopicConfigDef(
            "flush.ms",
            "long",
            ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
            at_least(0),
        ),
        TopicConfigDef("index.interval.bytes", "int", ("log.index.interval.bytes",), at_least(0)),
        TopicConfigDef(
            "max.compaction.lag.ms", "long", ("log.cleaner.max.compaction.lag.ms",), at_least(1)
        ),
        TopicConfigDef("max.message.bytes", "int", ("message.max.bytes",), at_least(0)),
        TopicConfigDef(
            "message.downconversion.enable", "boolean", ("log.message.downconversion.enable",)
        ),
        TopicConfigDef(
            "message.format.version", "string", ("log.message.format.version",), metadata_version
        ),
        TopicConfigDef(
            "message.timestamp.after.max.ms",
            "long",
            ("log.message.timestamp.after.max.ms",),
            at_least(0),
        ),
        TopicConfigDef(
            "message.timestamp.before.max.ms",
            "long",
            ("log.message.timestamp.before.max.ms",),
            at_least(0),
        ),
        TopicConfigDef(
            "message.timestamp.type",
            "string",
            ("log.message.timestamp.type",),
            one_of(*_TIMESTAMP_TYPES),
        ),
        TopicConfigDef(
            "min.cleanable.dirty.ratio",
            "double",
            ("log.cleaner.min.cleanable.ratio",),
            between(0, 1),
        ),
        TopicConfigDef(
            "min.compaction.lag.ms", "long", ("log.cleaner.min.compaction.lag.ms",), at_least(0)
        ),
        TopicConfigDef("min.insync.replicas", "int", ("min.insync.replicas",), at_least(1)),
        TopicConfigDef("preallocate", "boolean", ("log.preallocate",)),
        TopicConfigDef("retention.bytes", "long", ("log.retention.bytes",)),
        TopicConfigDef(
            "retention.ms",
            "long",
            ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
            at_least(-1),
        ),
        TopicConfigDef("segment.bytes", "int", ("log.segment.bytes",), at_least(14)),
        TopicConfigDef("segment.index.bytes", "int", ("log.index.size.max.bytes",), at_least(24)),
        TopicConfigDef(
            "segment.jitter.ms",
            "long",
            ("log.roll.jitter.ms", "log.roll.jitter.hours"),
            at_least(0),
        ),
        TopicConfigDef("segment.ms", "long", ("log.roll.ms", "log.roll.hours"), at_least(1)),
        TopicConfigDef(
            "unclean.leader.election.enable", "boolean", ("unclean.leader.election.enable",)
        ),
    ]
}

BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d for d in _broker_defs() + group_protocol_defs() + quota_config_defs() + security_defs()
    + sasl_defs()
}
