"""DeleteRecords (key 21), versions 0-2: move a partition's log start offset forward.

``offset`` -1 means the high watermark. An offset above the high watermark is
OFFSET_OUT_OF_RANGE; one at or below the current start changes nothing. Whole segments
below the new start are deleted by the next retention pass (Kafka's log-start-offset breach).
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DeleteRecordsResponse

API_KEY = ApiKey.DELETE_RECORDS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DeleteRecordsResponse


def _part(index: int, code: int, low: int = -1) -> Any:
    return _R.DeleteRecordsPartitionResult(partition_index=index, low_watermark=low, error_code=code)


async def handle_delete_records(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    topics = []
    unauthorized = denied(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    for t in request.topics:
        topic = manager.topics.get(t.name)
        parts = []
        for p in t.partitions:
            if t.name in unauthorized:
                parts.append(_part(p.partition_index, errors.TopicAuthorizationFailedError.code))
                continue
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                parts.append(_part(p.partition_index, errors.UnknownTopicOrPartitionError.code))
                continue
            part = topic.partitions[p.partition_index]
            plog = part.log
            hw = plog.log_end_offset
            offset = hw if p.offset == -1 else p.offset
            if offset < 0 or offset > hw:
                parts.append(_part(p.partition_index, errors.OffsetOutOfRangeError.code))
                continue
            if offset > plog.log_start_offset:
                # Moving the log start offset writes and fsyncs its checkpoint: on an I/O
                # thread, in the partition's order with its appends.
                await ctx.broker.io.run_ordered((part.topic, part.index), plog.delete_records_before,
                                                offset)
            parts.append(_part(p.partition_index, 0, plog.log_start_offset))
        topics.append(_R.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return _R(throttle_time_ms=0, topics=topics)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, topics=[
        _R.DeleteRecordsTopicResult(name=t.name, partitions=[_part(p.partition_index, code) for p in t.partitions])
        for t in request.topics
    ])
