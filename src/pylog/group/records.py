"""Framing of the records the group coordinator writes to ``__consumer_offsets``.

The field layouts are generated from Kafka's record schemas (``pylog.protocol._records``,
see ``tools/generate_protocol.py``); this module adds what the schemas do not say: how a
key and a value become the key and value bytes of one record in the log, as Kafka's
``CoordinatorRecordSerde`` and ``GroupCoordinatorRecordHelpers`` write them.

Layout of one record (both parts big-endian)::

    key   = int16 key version (= record type) | key fields at that version
    value = int16 value version | value fields at that version      (None = tombstone)

Record types (the key version selects the key schema, hence the kind of record):

    0, 1   OffsetCommitKey  (group string, topic string, partition int32); Kafka writes 1
    2      GroupMetadataKey (group string)
    3..8   KIP-848 consumer-group records: 3 group epoch, 4 subscribed topics' metadata,
           5 member metadata, 6 target assignment epoch, 7 a member's target assignment,
           8 a member's current assignment (values v0, flexible)
    9..15  KIP-932 share-group records (``pylog.group.share.records``); >15 unknown:
           skipped on load, as Kafka's loader does

Value versions Kafka writes (``MetadataVersion.offsetCommitValueVersion`` and
``groupMetadataValueVersion`` for every metadata version since 2.3):

    OffsetCommitValue   v3: offset int64, leaderEpoch int32, metadata string,
                        commitTimestamp int64; v1 (offset, metadata, commitTimestamp,
                        expireTimestamp) when the commit carried a retention time (v2-v4
                        OffsetCommit requests)
    GroupMetadataValue  v3: protocolType, generation, protocol?, leader?,
                        currentStateTimestamp, members [memberId, groupInstanceId?, clientId,
                        clientHost, rebalanceTimeout, sessionTimeout, subscription,
                        assignment]

Every version the schemas define (0-4) is read. A deletion is a tombstone: the key with a
null value (offset deleted or expired; group deleted).

Decoding never trusts the bytes: truncated keys or values, versions outside the schema and
trailing garbage raise ``CoordinatorRecordError`` (a ``ValueError``) naming what was wrong;
nothing else escapes. Stateless and thread-safe (the one cache, of offset-commit key bytes,
is an ``lru_cache`` of a pure function).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

from pylog.errors import KafkaError, RemoteProtocolError
from pylog.protocol._records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)

from .share.records import SHARE_GROUP_TYPES

__all__ = [
    "CoordinatorRecordError",
    "OffsetCommitRecord",
    "GroupMetadataRecord",
    "ConsumerGroupRecord",
    "ShareGroupRecord",
    "UnknownRecord",
    "encode_offset_commit",
    "stored_offset_commit",
    "encode_group_metadata",
    "encode_consumer_group_epoch",
    "encode_consumer_group_partition_metadata",
    "encode_consumer_group_member",
    "encode_consumer_group_target_epoch",
    "encode_consumer_group_target_member",
    "encode_consumer_group_current_assignment",
    "decode_record",
    "OFFSET_COMMIT_KEY_VERSION",
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY",
    "GROUP_METADATA_VALUE_VERSION",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")

# KIP-848 record types 3..8: key class, value class (value v0, flexible).
_CONSUMER_GROUP_TYPES: dict[int, tuple[Any, Any]] = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
}


class CoordinatorRecordError(KafkaError, ValueError):
    """A ``__consumer_offsets`` record whose key or value cannot be decoded.

    Raised on load for a corrupt or foreign record; the message names the part (key or
    value), the record type and what was wrong.
    """


@dataclass(frozen=True)
class OffsetCommitRecord:
    """An offset commit (``value`` set) or its deletion (``value`` None, a tombstone)."""

    group: str
    topic: str
    partition: int
    value: OffsetCommitValue | None


@dataclass(frozen=True)
class GroupMetadataRecord:
    """A classic group's metadata (``value`` set) or the group's deletion (tombstone)."""

    group: str
    value: GroupMetadataValue | None


@dataclass(frozen=True)
class ConsumerGroupRecord:
    """A KIP-848 consumer-group record (types 3-8): decoded so tools can show it."""

    record_type: int
    key: Any
    value: Any | None


@dataclass(frozen=True)
class ShareGroupRecord:
    """A KIP-932 share-group record (types 9-15, ``pylog.group.share.records``)."""

    record_type: int
    key: Any
    value: Any | None


@dataclass(frozen=True)
class UnknownRecord:
    """A record type this coordinator does not know (newer Kafka): skipped."""

    record_type: int


CoordinatorRecord = (OffsetCommitRecord | GroupMetadataRecord | ConsumerGroupRecord
                     | ShareGroupRecord | UnknownRecord)


# --------------------------------------------------------------------------- encode


def _framed(version: int, message: Any) -> bytes:
    # The int16 prefix is the version the fields below it were written at.
    return _I16.pack(version) + message.encode(version)


@functools.lru_cache(maxsize=4096)
def _offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    # The same bytes for every commit of a partition by a group: encoded once for the
    # partitions a coordinator's groups commit most (immutable bytes, a pure function).
    return _framed(OFFSET_COMMIT_KEY_VERSION, OffsetCommitKey(group, topic, partition))


def encode_offset_commit(
    group: str,
    topic: str,
    partition: int,
    *,
    offset: int | None,
    leader_epoch: int = -1,
    metadata: str = "",
    commit_timestamp: int = -1,
    expire_timestamp: int = -1,
) -> tuple[bytes, bytes | None]:
    """Key and value bytes of an offset commit, as Kafka writes them.

    Args:
        group, topic, partition: the key.
        offset: the committed offset, or None for a tombstone (deletion or expiry).
        leader_epoch: the leader epoch the client saw (-1 unknown); not in v1 values.
        metadata: the client's commit metadata string.
        commit_timestamp: wall-clock ms of the commit.
        expire_timestamp: -1, or the absolute expiry time of a commit that carried a
            retention time (OffsetCommit v2-v4); then the value is written at v1, as Kafka
            does, and the leader epoch is not stored.

    Returns:
        ``(key, value)``; ``value`` is None for a tombstone.
    """
    key = _offset_commit_key(group, topic, partition)
    if offset is None:
        return key, None
    value = OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp,
    )
    version = OFFSET_COMMIT_VALUE_VERSION if expire_timestamp == -1 else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return key, _framed(version, value)


def stored_offset_commit(group: str, topic: str, partition: int, *, offset: int, leader_epoch: int = -1,
                         metadata: str = "", commit_timestamp: int = -1,
                         expire_timestamp: int = -1) -> OffsetCommitRecord:
    """The record ``decode_record`` reads back from ``encode_offset_commit``'s bytes for
    the same arguments (not a tombstone): a value written at v1 (with an expiry) has no
    leader epoch, so it reads back as -1. The commit path applies this once the write is
    durable instead of decoding the bytes it has just encoded."""
    return OffsetCommitRecord(group, topic, partition, OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch if expire_timestamp == -1 else -1,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp,
    ))


def encode_group_metadata(group: str, value: GroupMetadataValue | None) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a group's metadata record (value None: tombstone)."""
    key = _framed(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group))
    if value is None:
        return key, None
    return key, _framed(GROUP_METADATA_VALUE_VERSION, value)


def _tps(cls: Any, tp: dict[Any, set[int]]) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(tp.items(), key=lambda x: str(x[0])) if ps]


def encode_consumer_group_epoch(group: str, epoch: int | None) -> tuple[bytes, bytes | None]:
    """Record 3, the group epoch; None: the group's tombstone (written last on deletion)."""
    key = _framed(3, ConsumerGroupMetadataKey(group))
    return key, None if epoch is None else _framed(0, ConsumerGroupMetadataValue(epoch=epoch))


def encode_consumer_group_partition_metadata(
        group: str, topics: dict[str, tuple[Any, int]] | None) -> tuple[bytes, bytes | None]:
    """Record 4, the subscribed topics' metadata: name -> (topic id, partitions)."""
    key = _framed(4, ConsumerGroupPartitionMetadataKey(group))
    if topics is None:
        return key, None
    tm = ConsumerGroupPartitionMetadataValue.TopicMetadata
    value = ConsumerGroupPartitionMetadataValue(topics=[
        tm(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
        for name, (tid, n) in sorted(topics.items())
    ])
    return key, _framed(0, value)


def encode_consumer_group_member(group: str, member_id: str, member: Any | None) -> tuple[bytes, bytes | None]:
    """Record 5, a member's metadata (a ``ConsumerGroupMember``; None: tombstone)."""
    key = _framed(5, ConsumerGroupMemberMetadataKey(group, member_id))
    if member is None:
        return key, None
    value = ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=getattr(member, "subscribed_topic_regex", None), rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor, classic_member_metadata=_classic_metadata(member))
    return key, _framed(0, value)


def _classic_metadata(member: Any) -> Any:
    """A classic-protocol member's ClassicMemberMetadata (session timeout, JoinGroup
    protocols), None for a consumer-protocol member."""
    protocols = getattr(member, "classic_protocols", None)
    if protocols is None:
        return None
    cmm = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
    return cmm(session_timeout_ms=member.classic_session_timeout_ms,
               supported_protocols=[cmm.ClassicProtocol(name=n, metadata=bytes(m)) for n, m in protocols])


def encode_consumer_group_target_epoch(group: str, epoch: int | None) -> tuple[bytes, bytes | None]:
    """Record 6, the assignment epoch of the target assignment (None: tombstone)."""
    key = _framed(6, ConsumerGroupTargetAssignmentMetadataKey(group))
    return key, None if epoch is None else _framed(0, ConsumerGroupTargetAssignmentMetadataValue(epoch))


def encode_consumer_group_target_member(group: str, member_id: str,
                                        partitions: dict[Any, set[int]] | None) -> tuple[bytes, bytes | None]:
    """Record 7, one member's target assignment (None: tombstone)."""
    key = _framed(7, ConsumerGroupTargetAssignmentMemberKey(group, member_id))
    if partitions is None:
        return key, None
    return key, _framed(0, ConsumerGroupTargetAssignmentMemberValue(_tps(ConsumerGroupTargetAssignmentMemberValue.TopicPartition, partitions)))


def encode_consumer_group_current_assignment(group: str, member_id: str,
                                             member: Any | None) -> tuple[bytes, bytes | None]:
    """Record 8, a member's current assignment: epochs, state, assigned and pending
    revocation partitions (a ``ConsumerGroupMember``; None: tombstone)."""
    key = _framed(8, ConsumerGroupCurrentMemberAssignmentKey(group, member_id))
    if member is None:
        return key, None
    tps = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
        state=int(member.state), assigned_partitions=_tps(tps, member.assigned),
        partitions_pending_revocation=_tps(tps, member.pending_revocation))
    return key, _framed(0, value)


# --------------------------------------------------------------------------- decode


def _version(data: Any, part: str) -> int:
    if data is None or len(data) < 2:
        n = 0 if data is None else len(data)
        raise CoordinatorRecordError(f"record {part} of {n} bytes has no int16 version")
    return int(_I16.unpack_from(data, 0)[0])


def _decode(cls: Any, data: Any, version: int, part: str, record_type: int) -> Any:
    if part == "key" and getattr(cls, "MESSAGE_TYPE", None) == "coordinator-key":
        # Kafka's later schema dialect ("type": "coordinator-key", "apiKey": the record
        # type): the int16 in front is the record type and the key's fields are version 0.
        version = 0
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        raise CoordinatorRecordError(
            f"record type {record_type}: {part} version {version} is not a known {cls.NAME} "
            f"version ({lo}-{hi})"
        )
    try:
        return cls.decode(memoryview(data)[2:], version)
    except RemoteProtocolError as exc:
        raise CoordinatorRecordError(f"record type {record_type}: bad {part}: {exc}") from None


def decode_record(key: Any, value: Any | None) -> CoordinatorRecord:
    """Decode one ``__consumer_offsets`` record from its key and value bytes.

    Args:
        key: the record key (bytes-like). A record without a key is corrupt here.
        value: the record value, or None for a tombstone.

    Returns:
        An ``OffsetCommitRecord``, ``GroupMetadataRecord``, ``ConsumerGroupRecord``,
        ``ShareGroupRecord`` or, for
        record types this coordinator does not know, an ``UnknownRecord`` (skip it).

    Raises:
        CoordinatorRecordError: the key or value is truncated, malformed, has trailing
            bytes, or a version its schema does not define.
    """
    record_type = _version(key, "key")
    if record_type in (0, 1):
        k = _decode(OffsetCommitKey, key, record_type, "key", record_type)
        v = None if value is None else _decode(OffsetCommitValue, value, _version(value, "value"), "value", record_type)
        return OffsetCommitRecord(k.group, k.topic, k.partition, v)
    if record_type == GROUP_METADATA_KEY_VERSION:
        k = _decode(GroupMetadataKey, key, record_type, "key", record_type)
        v = None if value is None else _decode(GroupMetadataValue, value, _version(value, "value"), "value", record_type)
        return GroupMetadataRecord(k.group, v)
    classes = _CONSUMER_GROUP_TYPES.get(record_type)
    if classes is not None:
        k = _decode(classes[0], key, record_type, "key", record_type)
        v = None if value is None else _decode(classes[1], value, _version(value, "value"), "value", record_type)
        return ConsumerGroupRecord(record_type, k, v)
    classes = SHARE_GROUP_TYPES.get(record_type)
    if classes is not None:
        k = _decode(classes[0], key, record_type, "key", record_type)
        v = None if value is None else _decode(classes[1], value, _version(value, "value"), "value", record_type)
        return ShareGroupRecord(record_type, k, v)
    if record_type < 0:
        raise CoordinatorRecordError(f"record key has negative type {record_type}")
    return UnknownRecord(record_type)
