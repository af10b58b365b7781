"""LogConfig: one partition log's settings, Kafka's topic configs under snake_case names.

Names and defaults follow Kafka's ``LogConfig`` / ``ServerLogConfigs`` (apache/kafka):
``segment.bytes`` becomes ``segment_bytes`` and so on. ``LogConfig.from_properties`` takes
Kafka's dotted names and string values as a ``server.properties`` file or a
``kafka-configs --alter --add-config`` call would give them.

A LogConfig is immutable once built (every field is checked in ``__init__``); make a
changed copy with ``config.replace(retention_ms=...)``. Instances are safe to share
between threads.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidConfigError

# Kafka's "never": Long.MAX_VALUE.
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# Smallest segment Kafka accepts (LogConfig: segment.bytes >= LegacyRecord.RECORD_OVERHEAD_V0
# = 14). Kafka 4.x raised it to 1 MiB; tests need small segments, so we keep the old floor.
MIN_SEGMENT_BYTES = 14
# segment.index.bytes must hold at least one offset (8 B) and one time (12 B) entry pair.
MIN_SEGMENT_INDEX_BYTES = 24

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

# field -> (dotted Kafka name, default, minimum, maximum)
_INT_FIELDS: dict[str, tuple[str, int, int, int]] = {
    "segment_bytes": ("segment.bytes", 1024 * 1024 * 1024, MIN_SEGMENT_BYTES, INT_MAX),
    "segment_ms": ("segment.ms", 604_800_000, 1, LONG_MAX),
    "segment_jitter_ms": ("segment.jitter.ms", 0, 0, LONG_MAX),
    "segment_index_bytes": ("segment.index.bytes", 10 * 1024 * 1024, MIN_SEGMENT_INDEX_BYTES, INT_MAX),
    "index_interval_bytes": ("index.interval.bytes", 4096, 0, INT_MAX),
    "flush_messages": ("flush.messages", LONG_MAX, 1, LONG_MAX),
    "flush_ms": ("flush.ms", LONG_MAX, 0, LONG_MAX),
    "retention_ms": ("retention.ms", 604_800_000, -1, LONG_MAX),
    "retention_bytes": ("retention.bytes", -1, -1, LONG_MAX),
    "file_delete_delay_ms": ("file.delete.delay.ms", 60_000, 0, LONG_MAX),
    "max_message_bytes": ("max.message.bytes", 1_048_588, 0, INT_MAX),
    # KIP-937 (Kafka 3.6): how far a CreateTime record may lag / lead the broker clock.
    # Kafka 4.0 (KIP-1030) bounds the future to one hour; the past stays unbounded.
    "message_timestamp_before_max_ms": ("message.timestamp.before.max.ms", LONG_MAX, 0, LONG_MAX),
    "message_timestamp_after_max_ms": ("message.timestamp.after.max.ms", 3_600_000, 0, LONG_MAX),
    # Kafka's broker setting (TransactionLogConfig): idle idempotent producers are forgotten.
    "producer_id_expiration_ms": ("producer.id.expiration.ms", 86_400_000, 1, INT_MAX),
    # Compaction (Kafka's LogConfig): tombstones outlive their first clean by this much,
    # records younger than the min lag are never cleaned, older than the max lag always.
    "delete_retention_ms": ("delete.retention.ms", 86_400_000, 0, LONG_MAX),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", 0, 0, LONG_MAX),
    "max_compaction_lag_ms": ("max.compaction.lag.ms", LONG_MAX, 1, LONG_MAX),
}
_FLOAT_FIELDS: dict[str, tuple[str, float, float, float]] = {
    "min_cleanable_dirty_ratio": ("min.cleanable.dirty.ratio", 0.5, 0.0, 1.0),
}
_CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
_STR_FIELDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "message_timestamp_type": ("message.timestamp.type", "CreateTime", _TIMESTAMP_TYPES),
    # A list in Kafka; normalised here to one of three spellings (see _normalise_policy).
    "cleanup_policy": ("cleanup.policy", "delete", _CLEANUP_POLICIES),
}
_BOOL_FIELDS: dict[str, tuple[str, bool]] = {
    "preallocate": ("preallocate", False),
}
_DOTTED = (
    {v[0]: k for k, v in _INT_FIELDS.items()}
    | {v[0]: k for k, v in _STR_FIELDS.items()}
    | {v[0]: k for k, v in _BOOL_FIELDS.items()}
    | {v[0]: k for k, v in _FLOAT_FIELDS.items()}
)


def _normalise_policy(value: Any) -> Any:
    """Kafka's cleanup.policy is a list: "compact, delete", ["delete", "compact"] and
    "compact,delete" are the same policy."""
    if isinstance(value, (list, tuple)):
        parts = [str(p).strip() for p in value]
    elif isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
    else:
        return value
    if not parts or any(p not in ("delete", "compact") for p in parts):
        return value
    return ",".join(sorted(set(parts)))


class LogConfig:
    """Settings of one partition log (Kafka topic-level configs).

    Args (all keyword, all optional; defaults are Kafka's):
        segment_bytes: roll the active segment before it would exceed this size (1 GiB).
        segment_ms: roll a non-empty active segment older than this (7 days).
        segment_jitter_ms: a random amount up to this is subtracted from ``segment_ms``
            per segment so that many partitions do not roll at once (0).
        segment_index_bytes: preallocated size of each ``.index`` / ``.timeindex`` (10 MiB).
        index_interval_bytes: add an index entry after about this many log bytes (4096).
        flush_messages / flush_ms: fsync after this many messages / this long (never:
            durability comes from the page cache and, later, replication).
        retention_ms: delete segments whose newest record is older than this (7 days;
            -1 = keep forever).
        retention_bytes: delete oldest segments while the log is larger (-1 = no limit).
        file_delete_delay_ms: keep ``.deleted`` files this long before unlinking (60 s).
        max_message_bytes: largest batch accepted by ``append`` (1 MiB + 12).
        message_timestamp_before_max_ms: on a CreateTime log, ``append`` refuses a record
            whose timestamp is more than this older than the clock (Long.MAX_VALUE: never).
        message_timestamp_after_max_ms: ... or more than this newer than the clock
            (3600000 = 1 hour, Kafka 4.0's default).
        producer_id_expiration_ms: an idempotent producer whose last batch is older than
            this is forgotten (its duplicate detection state goes; 86400000 = 1 day).
        message_timestamp_type: "CreateTime" or "LogAppendTime".
        cleanup_policy: "delete" (retention only), "compact" (the log cleaner keeps the
            latest record per key) or "compact,delete" (both); also given as a list or
            in the other order. A compacted log refuses records without a key.
        delete_retention_ms: a tombstone (null value) of a compacted log is kept this
            long after the clean that first saw it (1 day).
        min_compaction_lag_ms / max_compaction_lag_ms: a record younger than the min lag
            is never compacted (0); a log with a dirty record older than the max lag is
            cleaned whatever its dirty ratio (Long.MAX_VALUE: never forced).
        min_cleanable_dirty_ratio: a compacted log is cleaned when its dirty (not yet
            cleaned) bytes are more than this share of its size (0.5).
        preallocate: reserve ``segment_bytes`` on disk (fallocate) when a segment is
            created, trimmed when it rolls or closes (False). Saves the filesystem's
            block allocation on every append.

    Raises:
        InvalidConfigError: an unknown name, a value of the wrong type or out of range.
    """

    __slots__ = (tuple(_INT_FIELDS) + tuple(_STR_FIELDS) + tuple(_BOOL_FIELDS)
                 + tuple(_FLOAT_FIELDS))

    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    flush_messages: int
    flush_ms: int
    retention_ms: int
    retention_bytes: int
    file_delete_delay_ms: int
    max_message_bytes: int
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    producer_id_expiration_ms: int
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    message_timestamp_type: str
    cleanup_policy: str
    preallocate: bool
    min_cleanable_dirty_ratio: float

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(self.__slots__))
        if unknown:
            raise InvalidConfigError(f"unknown log config {', '.join(unknown)}")
        for name, (dotted, default, lo, hi) in _INT_FIELDS.items():
            value = kwargs.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidConfigError(
                    f"{name} ({dotted}) must be an integer, got {type(value).__name__} {value!r}"
                )
            if not lo <= value <= hi:
                raise InvalidConfigError(f"{name} ({dotted}) must be in [{lo}, {hi}], got {value}")
            object.__setattr__(self, name, value)
        for name, (dotted, sdefault, allowed) in _STR_FIELDS.items():
            svalue = kwargs.get(name, sdefault)
            if name == "cleanup_policy":
                svalue = _normalise_policy(svalue)
            if svalue not in allowed:
                raise InvalidConfigError(
                    f"{name} ({dotted}) must be one of {allowed}, got {svalue!r}")
            object.__setattr__(self, name, svalue)
        for name, (dotted, bdefault) in _BOOL_FIELDS.items():
            bvalue = kwargs.get(name, bdefault)
            if not isinstance(bvalue, bool):
                raise InvalidConfigError(f"{name} ({dotted}) must be a boolean, got {bvalue!r}")
            object.__setattr__(self, name, bvalue)
        for name, (dotted, fdefault, flo, fhi) in _FLOAT_FIELDS.items():
            fvalue = kwargs.get(name, fdefault)
            if isinstance(fvalue, bool) or not isinstance(fvalue, (int, float)):
                raise InvalidConfigError(
                    f"{name} ({dotted}) must be a number, got {type(fvalue).__name__} {fvalue!r}"
                )
            if not flo <= fvalue <= fhi:
                raise InvalidConfigError(
                    f"{name} ({dotted}) must be in [{flo}, {fhi}], got {fvalue}")
            object.__setattr__(self, name, float(fvalue))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"min_compaction_lag_ms ({self.min_compaction_lag_ms}) must not exceed "
                f"max_compaction_lag_ms ({self.max_compaction_lag_ms})")

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact (the log cleaner works on this log)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete (retention.ms / retention.bytes apply)."""
        return "delete" in self.cleanup_policy

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LogConfig is immutable; use replace(**changes)")

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LogConfig:
        """Build a config from Kafka's dotted names and string values.

        Args:
            props: e.g. ``{"segment.bytes": "1048576", "retention.ms": "-1"}``. Values may
                also be ints.

        Raises:
            InvalidConfigError: an unknown name or a value that is not a valid integer /
                allowed string.
        """
        kwargs: dict[str, Any] = {}
        for key, raw in props.items():
            field = _DOTTED.get(key)
            if field is None:
                raise InvalidConfigError(f"unknown log config {key!r}")
            if field in _BOOL_FIELDS:
                if isinstance(raw, bool):
                    kwargs[field] = raw
                    continue
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise InvalidConfigError(f"{key} must be true or false, got {raw!r}")
                kwargs[field] = text == "true"
            elif field in _FLOAT_FIELDS:
                if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                    kwargs[field] = raw
                    continue
                try:
                    kwargs[field] = float(str(raw).strip())
                except ValueError:
                    raise InvalidConfigError(f"{key} must be a number, got {raw!r}") from None
            elif field in _INT_FIELDS:
                if isinstance(raw, int) and not isinstance(raw, bool):
                    kwargs[field] = raw
                    continue
                text = str(raw).strip()
                try:
                    kwargs[field] = int(text, 10)
                except ValueError:
                    raise InvalidConfigError(
                        f"{key} must be an integer, got {raw!r}"
                    ) from None
            else:
                kwargs[field] = str(raw).strip()
        return cls(**kwargs)

    def to_properties(self) -> dict[str, str]:
        """The config as Kafka's dotted names and string values (round-trips from_properties)."""
        out = {dotted: str(getattr(self, f)) for f, (dotted, *_r) in _INT_FIELDS.items()}
        out.update({dotted: getattr(self, f) for f, (dotted, *_r) in _STR_FIELDS.items()})
        out.update({dotted: str(getattr(self, f)).lower() for f, (dotted, _d) in _BOOL_FIELDS.items()})
        out.update({dotted: repr(getattr(self, f)) for f, (dotted, *_r) in _FLOAT_FIELDS.items()})
        return out

    def replace(self, **changes: Any) -> LogConfig:
        """A copy with some fields changed (validated like the constructor)."""
        kwargs = {name: getattr(self, name) for name in self.__slots__}
        kwargs.update(changes)
        return LogConfig(**kwargs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogConfig):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        changed = [
            f"{n}={getattr(self, n)!r}"
            for n in self.__slots__
            if getattr(self, n) != (_INT_FIELDS.get(n) or _STR_FIELDS.get(n) or _BOOL_FIELDS.get(n)
                                    or _FLOAT_FIELDS[n])[1]
        ]
        return f"LogConfig({', '.join(changed)})"
