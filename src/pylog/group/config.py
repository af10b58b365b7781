"""The group coordinator's settings, with Kafka's names and defaults.

Kept here (not in ``pylog.config``) so the sans-IO coordinator can be built and tested on its
own; the broker fills one from its ``BrokerConfig`` when it wires the coordinator in. Each
field names the broker setting it stands for (``GroupCoordinatorConfig`` in Kafka).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    # group.initial.rebalance.delay.ms: how long the first rebalance of an empty group
    # waits for more members before choosing a generation (saves rebalances at start).
    initial_rebalance_delay_ms: int = 3_000
    # group.min.session.timeout.ms / group.max.session.timeout.ms: JoinGroup outside the
    # range gets INVALID_SESSION_TIMEOUT.
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    # group.max.size: members beyond it get GROUP_MAX_SIZE_REACHED.
    max_size: int = MAX_INT
    # offsets.retention.minutes (10080 = 7 days), as milliseconds.
    offsets_retention_ms: int = 10_080 * 60_000
    # offsets.retention.check.interval.ms: how often expired offsets are looked for.
    offsets_retention_check_interval_ms: int = 600_000
    # offset.metadata.max.bytes: larger commit metadata gets OFFSET_METADATA_TOO_LARGE.
    offset_metadata_max_bytes: int = 4_096
    # group.classic.new.member.join.timeout.ms (internal in Kafka, fixed 5 minutes): a new
    # member parked in a rebalance this long is dropped (it may retry).
    new_member_join_timeout_ms: int = 300_000
    # offsets.topic.num.partitions: how many __consumer_offsets partitions (see partition_for).
    offsets_topic_num_partitions: int = 50
    # group.coordinator.rebalance.protocols: "classic" and/or "consumer" (KIP-848); a
    # ConsumerGroupHeartbeat is refused (UNSUPPORTED_VERSION) without "consumer".
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    # group.consumer.assignors: the server-side assignors by name; the first is the default.
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.heartbeat.interval.ms / group.consumer.session.timeout.ms, each within
    # its group.consumer.min.* / group.consumer.max.* bounds.
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_session_timeout_ms: int = 45_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    # group.consumer.max.size: members beyond it get GROUP_MAX_SIZE_REACHED.
    consumer_max_size: int = MAX_INT
    # group.consumer.migration.policy: which online conversions between classic and
    # consumer groups happen (disabled, upgrade, downgrade, bidirectional; Kafka's default
    # bidirectional). Empty groups are converted whatever it says (pylog.group.migration).
    consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups: group.share.heartbeat.interval.ms, group.share.session.timeout.ms
    # (each within group.share.min.* / group.share.max.*) and group.share.max.size.
    share_heartbeat_interval_ms: int = 5_000
    share_session_timeout_ms: int = 45_000
    share_max_size: int = 200
    # group.share.initialize.retry.interval.ms (Kafka 4.1: 30 s; at least
    # offsets.commit.timeout.ms): a share partition initializing for longer is initialized again.
    share_initialize_retry_interval_ms: int = 30_000
    # The broker's internal topics, which a regular-expression subscription never matches.
    internal_topics: frozenset[str] = frozenset({"__consumer_offsets", "__transaction_state"})

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms is above group.max.session.timeout.ms")
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        if not set(self.rebalance_protocols) <= {"classic", "consumer"} or "classic" not in self.rebalance_protocols:
            raise ValueError("group.coordinator.rebalance.protocols must list classic, and may add consumer")
        if not self.consumer_assignors or any(a not in ("uniform", "range") for a in self.consumer_assignors):
            raise ValueError("group.consumer.assignors: known assignors are uniform and range")
        for what, v, lo, hi in (
            ("group.consumer.heartbeat.interval.ms", self.consumer_heartbeat_interval_ms,
             self.consumer_min_heartbeat_interval_ms, self.consumer_max_heartbeat_interval_ms),
            ("group.consumer.session.timeout.ms", self.consumer_session_timeout_ms,
             self.consumer_min_session_timeout_ms, self.consumer_max_session_timeout_ms),
        ):
            if not lo <= v <= hi:
                raise ValueError(f"{what} ({v}) must be within its min ({lo}) and max ({hi})")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
        if self.share_heartbeat_interval_ms >= self.share_session_timeout_ms:
            raise ValueError("group.share.heartbeat.interval.ms must be below group.share.session.timeout.ms")
        if self.consumer_migration_policy.strip().lower() not in ("disabled", "upgrade", "downgrade",
                                                                  "bidirectional"):
            raise ValueError(f"group.consumer.migration.policy: {self.consumer_migration_policy!r} is not one of "
                             "disabled, upgrade, downgrade, bidirectional")
        if self.share_max_size < 1:
            raise ValueError("group.share.max.size must be at least 1")
        if self.consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        for name in ("initial_rebalance_delay_ms", "offsets_retention_ms",
                     "offsets_retention_check_interval_ms", "offset_metadata_max_bytes",
                     "new_member_join_timeout_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: ``abs(hashCode(group_id)) % n``.

    Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` with Java's
    ``String.hashCode`` (31*h + UTF-16 code unit, int32 wrap-around) and ``Utils.abs``
    mapping Integer.MIN_VALUE to 0, so that a group lands on the partition Kafka would pick.
    """
    h = 0
    data = group_id.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    h = 0 if h == -0x80000000 else abs(h)
    return h % num_partitions
