"""OffsetDelete (key 47), version 0: delete a group's committed offsets of topics it does
not consume (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Partitions of topics that do not
exist get UNKNOWN_TOPIC_OR_PARTITION here, as in Kafka's handler."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied, require_group
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import OffsetDeleteResponse

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = OffsetDeleteResponse


async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    require_group(ctx, AclOperation.DELETE, request.group_id)
    unauthorized = denied(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    codes: dict[tuple[str, int], int] = {}
    wanted: list[tuple[str, int]] = []
    for t in request.topics:
        for p in t.partitions:
            if t.name in unauthorized:
                codes[(t.name, p.partition_index)] = errors.TopicAuthorizationFailedError.code
            elif _groups.partition_exists(ctx, t.name, p.partition_index):
                wanted.append((t.name, p.partition_index))
            else:
                codes[(t.name, p.partition_index)] = errors.UnknownTopicOrPartitionError.code
    r = await _groups.wait(ctx, coord, coord.offset_delete(request.group_id, wanted))
    if r.error_code:
        return error_response(ctx, request, r.error_code, "")
    for pr in r.partitions:
        codes[(pr.topic, pr.partition)] = pr.error_code
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        _R.OffsetDeleteResponseTopic(name=t.name, partitions=[
            _R.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                             error_code=codes.get((t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in request.topics])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
