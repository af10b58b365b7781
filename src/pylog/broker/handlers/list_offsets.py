"""ListOffsets (key 2), versions 1-7: offsets by time through the time index.

``timestamp`` -1 is the latest offset (the high watermark; with ``isolation_level`` 1,
read_committed, v2+, the last stable offset), -2 the earliest (the log start offset), -3
(v7, KIP-734) the record with the largest timestamp; any other value finds the first
record whose timestamp is at or after it, or -1/-1 when every record is older. As Kafka's
``Partition.fetchOffsetForTimestamp``, a record found at or beyond what the isolation
level may read (the high watermark, or the last stable offset) is answered -1/-1.

A replicated partition (cluster mode) is answered by its leader only (a follower answers
NOT_LEADER_OR_FOLLOWER), against its high watermark, with the leader epochs of its
leader-epoch cache and the same epoch fencing as Fetch.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied
from pylog.broker.handlers._common import LEADER_EPOCH
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ListOffsetsResponse
from pylog.replication.epochs import epoch_for_offset

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ListOffsetsResponse
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _part(index: int, code: int, timestamp: int = -1, offset: int = -1, epoch: int = -1) -> Any:
    return _R.ListOffsetsPartitionResponse(partition_index=index, error_code=code,
                                           timestamp=timestamp, offset=offset, leader_epoch=epoch)


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    replicas = ctx.broker.replicas
    topics = []
    seen: set[tuple[str, int]] = set()
    committed = ctx.api_version >= 2 and request.isolation_level == 1
    unauthorized = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics))
    for t in request.topics:
        topic = manager.topics.get(t.name)
        parts = []
        for p in t.partitions:
            if (t.name, p.partition_index) in seen:
                parts.append(_part(p.partition_index, errors.InvalidRequestError.code))
                continue
            seen.add((t.name, p.partition_index))
            if t.name in unauthorized:
                parts.append(_part(p.partition_index, errors.TopicAuthorizationFailedError.code))
                continue
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                parts.append(_part(p.partition_index, errors.UnknownTopicOrPartitionError.code))
                continue
            state = (replicas.partitions.get((t.name, p.partition_index)) if replicas.active
                     else None)
            plog = topic.partitions[p.partition_index].log
            if state is None:
                if ctx.broker.cluster is not None:  # a local log without a role: not served
                    parts.append(_part(p.partition_index, errors.NotLeaderOrFollowerError.code))
                    continue
                if p.current_leader_epoch > LEADER_EPOCH:
                    parts.append(_part(p.partition_index, errors.UnknownLeaderEpochError.code))
                    continue
                hw = plog.log_end_offset
            else:
                code = _replica_code(state, p.current_leader_epoch)
                if code:
                    parts.append(_part(p.partition_index, code))
                    continue
                hw = state.high_watermark
            ts = p.timestamp
            if ts == MAX_TIMESTAMP and ctx.api_version < 7:
                parts.append(_part(p.partition_index, errors.UnsupportedVersionError.code))
                continue
            if ts < MAX_TIMESTAMP:
                parts.append(_part(p.partition_index, errors.InvalidRequestError.code))
                continue
            bound = plog.last_stable_offset(hw) if committed else hw
            if ts == LATEST:
                epoch = LEADER_EPOCH if state is None else epoch_for_offset(
                    plog.leader_epoch_cache.entries, bound - 1)
                parts.append(_part(p.partition_index, 0, -1, bound, epoch))
                continue
            found = plog.offset_for_timestamp(ts)
            if found is None or (ts != EARLIEST and found.offset >= bound):
                parts.append(_part(p.partition_index, 0))
            else:
                epoch = LEADER_EPOCH if state is None else epoch_for_offset(
                    plog.leader_epoch_cache.entries, found.offset)
                parts.append(_part(p.partition_index, 0, found.timestamp, found.offset, epoch))
        topics.append(_R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return _R(throttle_time_ms=0, topics=topics)


def _replica_code(state: Any, current_leader_epoch: int) -> int:
    if state.leader is None:
        return errors.NotLeaderOrFollowerError.code
    if current_leader_epoch > state.leader_epoch:
        return errors.UnknownLeaderEpochError.code
    if 0 <= current_leader_epoch < state.leader_epoch:
        return errors.FencedLeaderEpochError.code
    return 0


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, topics=[
        _R.ListOffsetsTopicResponse(name=t.name, partitions=[_part(p.partition_index, code) for p in t.partitions])
        for t in request.topics
    ])
