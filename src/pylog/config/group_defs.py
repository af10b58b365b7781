"""Broker configs of Kafka 4's group protocols: the KIP-848 consumer group protocol
(``group.coordinator.rebalance.protocols``, ``group.consumer.*``) and KIP-932 share groups
(``group.share.*``, ``share.coordinator.*``), as Kafka's ``GroupCoordinatorConfig``,
``ShareGroupConfig`` and ``ShareCoordinatorConfig`` name them. ``group_protocol_defs()`` is
concatenated into ``BROKER_CONFIG_DEFS`` by ``definitions.py`` (and so listed in
docs/configuration.md).

Immutable values; safe to share between threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pylog.config.values import at_least, between, one_of

if TYPE_CHECKING:
    from pylog.config.definitions import ConfigDef


def group_protocol_defs() -> list[ConfigDef]:
    """The consumer-group (KIP-848) and share-group (KIP-932) broker configs."""
    from pylog.config.definitions import _ASSIGNOR_CLASSES, ConfigDef  # definitions imports us

    return [
        ConfigDef("group.coordinator.rebalance.protocols", "list", ["classic", "consumer"],
                  "Group protocols the coordinator serves: classic, and consumer (KIP-848).",
                  one_of("classic", "consumer", case_insensitive=True)),
        ConfigDef("group.consumer.assignors", "list", ["uniform", "range"],
                  "Server-side assignors of consumer groups (KIP-848); the first is the default.",
                  one_of("uniform", "range", *_ASSIGNOR_CLASSES)),
        ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000,
                  "Heartbeat interval given to consumer-group members.", at_least(1)),
        ConfigDef("group.consumer.min.heartbeat.interval.ms", "int", 5000,
                  "Lower bound of group.consumer.heartbeat.interval.ms.", at_least(1)),
        ConfigDef("group.consumer.max.heartbeat.interval.ms", "int", 15000,
                  "Upper bound of group.consumer.heartbeat.interval.ms.", at_least(1)),
        ConfigDef("group.consumer.session.timeout.ms", "int", 45000,
                  "A consumer-group member is fenced after this long without a heartbeat.", at_least(1)),
        ConfigDef("group.consumer.min.session.timeout.ms", "int", 45000,
                  "Lower bound of group.consumer.session.timeout.ms.", at_least(1)),
        ConfigDef("group.consumer.max.session.timeout.ms", "int", 60000,
                  "Upper bound of group.consumer.session.timeout.ms.", at_least(1)),
        ConfigDef("group.consumer.max.size", "int", 2147483647,
                  "Most members in one consumer group (GROUP_MAX_SIZE_REACHED beyond).", at_least(1)),
        ConfigDef("group.consumer.migration.policy", "string", "bidirectional",
                  "Online conversion of non-empty groups between the classic and consumer protocols: "
                  "disabled, upgrade, downgrade or bidirectional (empty groups are always converted).",
                  one_of("disabled", "upgrade", "downgrade", "bidirectional", case_insensitive=True)),
        # KIP-932 share groups (Kafka's GroupCoordinatorConfig and ShareGroupConfig).
        ConfigDef("group.share.enable", "bool", True,
                  "Serve share groups (ShareGroupHeartbeat/Describe, ShareFetch, ShareAcknowledge)."),
        ConfigDef("group.share.heartbeat.interval.ms", "int", 5000,
                  "Heartbeat interval given to share-group members.", at_least(1)),
        ConfigDef("group.share.session.timeout.ms", "int", 45000,
                  "A share-group member that does not heartbeat this long is removed.", at_least(1)),
        ConfigDef("group.share.min.heartbeat.interval.ms", "int", 5000,
                  "Lower bound of the group config share.heartbeat.interval.ms.", at_least(1)),
        ConfigDef("group.share.max.heartbeat.interval.ms", "int", 15000,
                  "Upper bound of the group config share.heartbeat.interval.ms.", at_least(1)),
        ConfigDef("group.share.min.session.timeout.ms", "int", 45000,
                  "Lower bound of the group config share.session.timeout.ms.", at_least(1)),
        ConfigDef("group.share.max.session.timeout.ms", "int", 60000,
                  "Upper bound of the group config share.session.timeout.ms.", at_least(1)),
        ConfigDef("group.share.initialize.retry.interval.ms", "int", 30000,
                  "A share partition whose state initialization (InitializeShareGroupState) has not "
                  "been answered for this long is initialized again; at least "
                  "offsets.commit.timeout.ms.", at_least(1)),
        ConfigDef("group.share.max.size", "int", 200,
                  "Most members in one share group (GROUP_MAX_SIZE_REACHED beyond).", between(1, 1000)),
        # The ranges are Kafka's (ShareGroupConfig): 1-60 s, 1-30 s, 30 s-1 h.
        ConfigDef("group.share.record.lock.duration.ms", "int", 30000,
                  "How long a share consumer holds a record it acquired before it becomes available again.",
                  between(1000, 60000)),
        ConfigDef("group.share.min.record.lock.duration.ms", "int", 15000,
                  "Lower bound of group.share.record.lock.duration.ms and its group override.",
                  between(1000, 30000)),
        ConfigDef("group.share.max.record.lock.duration.ms", "int", 60000,
                  "Upper bound of group.share.record.lock.duration.ms and its group override.",
                  between(30000, 3600000)),
        ConfigDef("group.share.delivery.count.limit", "int", 5,
                  "Deliveries of a record to share consumers before it is archived.", between(2, 10)),
        # Kafka 4.2's ShareGroupConfig: the bounds of the group config share.delivery.count.limit.
        ConfigDef("group.share.min.delivery.count.limit", "int", 2,
                  "Lower bound of the group config share.delivery.count.limit.", between(2, 5)),
        ConfigDef("group.share.max.delivery.count.limit", "int", 10,
                  "Upper bound of the group config share.delivery.count.limit.", between(5, 25)),
        ConfigDef("share.coordinator.state.topic.num.partitions", "int", 50,
                  "Partitions of __share_group_state (the share-partition state; set before it "
                  "is created).", at_least(1)),
        ConfigDef("share.coordinator.state.topic.replication.factor", "short", 1,
                  "Replication of __share_group_state in cluster mode (Kafka's default is 3; "
                  "pylog cluster start gives it 3, as the other internal topics).", at_least(1)),
        ConfigDef("share.coordinator.state.topic.min.isr", "int", 1,
                  "min.insync.replicas of __share_group_state (Kafka's default is 2; pylog "
                  "cluster start gives it 2).", at_least(1)),
        ConfigDef("share.coordinator.state.topic.segment.bytes", "int", 104857600,
                  "Segment size of __share_group_state.", at_least(14)),
        ConfigDef("share.coordinator.load.buffer.size", "int", 5242880,
                  "Bytes read at a time when __share_group_state is loaded.", at_least(1)),
        ConfigDef("share.coordinator.write.timeout.ms", "int", 5000,
                  "How long a write of share-partition state waits for its append.", at_least(1)),
        ConfigDef("group.share.partition.max.record.locks", "int", 2000,
                  "Most in-flight records (between the share-partition start and end offsets) "
                  "of one share partition.", between(100, 10000)),
    ]
