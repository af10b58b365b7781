"""OffsetCommit (key 8), versions 2-9: store a group's consumed positions.

Partitions of topics (or partition numbers) that do not exist get
UNKNOWN_TOPIC_OR_PARTITION here, as Kafka's handler answers them; the rest go to the
coordinator, whose answer comes once their records are in ``__consumer_offsets``.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied, require_group
from pylog.broker.handlers._context import RequestContext
from pylog.group.offsets import OffsetCommitPartition
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import OffsetCommitResponse

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = OffsetCommitResponse


async def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    require_group(ctx, AclOperation.READ, request.group_id)
    unauthorized = denied(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    v = ctx.api_version
    codes: dict[tuple[str, int], int] = {}
    wanted: list[OffsetCommitPartition] = []
    for t in request.topics:
        for p in t.partitions:
            if t.name in unauthorized:
                codes[(t.name, p.partition_index)] = errors.TopicAuthorizationFailedError.code
                continue
            if not _groups.partition_exists(ctx, t.name, p.partition_index):
                codes[(t.name, p.partition_index)] = errors.UnknownTopicOrPartitionError.code
                continue
            wanted.append(OffsetCommitPartition(
                t.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata))
    if wanted:
        pending = coord.offset_commit(
            request.group_id, request.generation_id_or_member_epoch, request.member_id, wanted,
            request.group_instance_id if v >= 7 else None, v,
            request.retention_time_ms if v <= 4 else -1)
        for r in await _groups.wait(ctx, coord, pending):
            codes[(r.topic, r.partition)] = r.error_code
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        _R.OffsetCommitResponseTopic(name=t.name, partitions=[
            _R.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                             error_code=codes.get((t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in request.topics])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        _R.OffsetCommitResponseTopic(name=t.name, partitions=[
            _R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])
        for t in request.topics])
