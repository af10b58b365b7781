"""The share-group records of ``__consumer_offsets`` (KIP-932), as Kafka's
``GroupCoordinatorRecordHelpers`` writes them.

Layout as every coordinator record (``pylog.group.records``): key = int16 key version (the
record type) + key fields; value = int16 value version (0, flexible) + value fields; a null
value is a tombstone. Share-group record types (the key versions of Kafka's schemas, vendored
from apache/kafka 1eb7644 in ``tools/kafka-protocol/records/``)::

    9   ShareGroupPartitionMetadata        {GroupId} -> Topics [TopicId, TopicName,
                                            NumPartitions, PartitionMetadata]
    10  ShareGroupMemberMetadata           {GroupId, MemberId} -> RackId, ClientId,
                                            ClientHost, SubscribedTopicNames
    11  ShareGroupMetadata                 {GroupId} -> Epoch
    12  ShareGroupTargetAssignmentMetadata {GroupId} -> AssignmentEpoch
    13  ShareGroupTargetAssignmentMember   {GroupId, MemberId} -> TopicPartitions
    14  ShareGroupCurrentMemberAssignment  {GroupId, MemberId} -> MemberEpoch,
                                            PreviousMemberEpoch, State, AssignedPartitions
    15  ShareGroupStatePartitionMetadata   {GroupId} -> InitializingTopics,
                                            InitializedTopics [TopicId, TopicName,
                                            Partitions, CreateTimestamp], DeletingTopics
                                            [TopicId, TopicName] (``state_metadata``)

Record 15's schemas are a later apache/kafka version than the others (the key in Kafka's
``coordinator-key`` dialect: apiKey 15, key fields at version 0; see
``tools/kafka-protocol/records/README.md``); its bytes are framed the same way.

Stateless and thread-safe.
"""

from __future__ import annotations

import struct
from typing import Any

from pylog.protocol._records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataKey,
    ShareGroupPartitionMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)

from .state_metadata import InitEntry, StatePartitionMetadata

__all__ = [
    "SHARE_GROUP_TYPES",
    "encode_share_group_epoch",
    "encode_share_group_partition_metadata",
    "encode_share_group_member",
    "encode_share_group_target_epoch",
    "encode_share_group_target_member",
    "encode_share_group_current_assignment",
    "encode_share_group_state_metadata",
    "decode_share_group_state_metadata",
]

Record = tuple[bytes, bytes | None]
_I16 = struct.Struct(">h")

# Record type -> (key class, value class); value version 0, flexible.
SHARE_GROUP_TYPES: dict[int, tuple[Any, Any]] = {
    9: (ShareGroupPartitionMetadataKey, ShareGroupPartitionMetadataValue),
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
}


def _framed(version: int, message: Any) -> bytes:
    return _I16.pack(version) + message.encode(version)


def _tps(cls: Any, tp: dict[Any, set[int]]) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(tp.items(), key=lambda x: str(x[0])) if ps]


def encode_share_group_epoch(group: str, epoch: int | None) -> Record:
    """Record 11, the group epoch; None: the group's tombstone (written last on deletion)."""
    key = _framed(11, ShareGroupMetadataKey(group))
    return key, None if epoch is None else _framed(0, ShareGroupMetadataValue(epoch=epoch))


def encode_share_group_partition_metadata(group: str,
                                          topics: dict[str, tuple[Any, int]] | None) -> Record:
    """Record 9, the subscribed topics' metadata: name -> (topic id, partitions)."""
    key = _framed(9, ShareGroupPartitionMetadataKey(group))
    if topics is None:
        return key, None
    tm = ShareGroupPartitionMetadataValue.TopicMetadata
    return key, _framed(0, ShareGroupPartitionMetadataValue(topics=[
        tm(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
        for name, (tid, n) in sorted(topics.items())
    ]))


def encode_share_group_member(group: str, member_id: str, member: Any | None) -> Record:
    """Record 10, a member's metadata (a ``ShareGroupMember``; None: tombstone)."""
    key = _framed(10, ShareGroupMemberMetadataKey(group, member_id))
    if member is None:
        return key, None
    return key, _framed(0, ShareGroupMemberMetadataValue(
        rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names)))


def encode_share_group_target_epoch(group: str, epoch: int | None) -> Record:
    """Record 12, the epoch of the target assignment (None: tombstone)."""
    key = _framed(12, ShareGroupTargetAssignmentMetadataKey(group))
    return key, None if epoch is None else _framed(
        0, ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def encode_share_group_target_member(group: str, member_id: str,
                                     partitions: dict[Any, set[int]] | None) -> Record:
    """Record 13, one member's target assignment (None: tombstone)."""
    key = _framed(13, ShareGroupTargetAssignmentMemberKey(group, member_id))
    if partitions is None:
        return key, None
    cls = ShareGroupTargetAssignmentMemberValue
    return key, _framed(0, cls(topic_partitions=_tps(cls.TopicPartition, partitions)))


def encode_share_group_current_assignment(group: str, member_id: str,
                                          member: Any | None) -> Record:
    """Record 14, a member's current assignment (a ``ShareGroupMember``; None: tombstone)."""
    key = _framed(14, ShareGroupCurrentMemberAssignmentKey(group, member_id))
    if member is None:
        return key, None
    cls = ShareGroupCurrentMemberAssignmentValue
    return key, _framed(0, cls(
        member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
        state=0, assigned_partitions=_tps(cls.TopicPartitions, member.assigned)))


def encode_share_group_state_metadata(group: str, meta: StatePartitionMetadata | None) -> Record:
    """Record 15, which share partitions have state (None: tombstone, on group deletion)."""
    key = _I16.pack(15) + ShareGroupStatePartitionMetadataKey(group).encode(0)
    if meta is None:
        return key, None
    cls = ShareGroupStatePartitionMetadataValue
    info = cls.TopicPartitionsInfo

    def infos(entries: Any) -> list[Any]:
        return [info(topic_id=t, topic_name=e.name, partitions=sorted(e.partitions),
                     create_timestamp=e.timestamp_ms)
                for t, e in sorted(entries.items(), key=lambda x: str(x[0]))]
    return key, _framed(0, cls(
        initializing_topics=infos(meta.initializing), initialized_topics=infos(meta.initialized),
        deleting_topics=[cls.TopicInfo(topic_id=t, topic_name=n)
                         for t, n in sorted(meta.deleting.items(), key=lambda x: str(x[0]))]))


def decode_share_group_state_metadata(value: Any) -> StatePartitionMetadata:
    """A decoded ``ShareGroupStatePartitionMetadataValue`` as a ``StatePartitionMetadata``."""
    def entries(infos: Any) -> dict[Any, InitEntry]:
        return {i.topic_id: InitEntry(i.topic_name, frozenset(i.partitions), i.create_timestamp)
                for i in infos}
    return StatePartitionMetadata(entries(value.initializing_topics), entries(value.initialized_topics),
                                  {i.topic_id: i.topic_name for i in value.deleting_topics})
