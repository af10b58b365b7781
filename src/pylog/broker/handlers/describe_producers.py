"""DescribeProducers (key 61), version 0: the producers a partition's log tracks.

Per partition (Kafka's ``ReplicaManager.activeProducerState`` / ``UnifiedLog.activeProducers``):
producer id, epoch, last sequence (-1 for a producer known only from markers or
coordinator-written batches), last timestamp, coordinator epoch and the first offset of
its open transaction (-1 when none). UNKNOWN_TOPIC_OR_PARTITION for a partition this
broker does not host (a single node hosts every partition it has).
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeProducersResponse

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeProducersResponse


def _partition(index: int, code: int, message: str | None = None,
               producers: list[Any] | None = None) -> Any:
    return _R.PartitionResponse(partition_index=index, error_code=code, error_message=message,
                                active_producers=producers or [])


async def handle_describe_producers(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    unauthorized = denied(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for t in request.topics:
        topic = manager.topics.get(t.name)
        parts = []
        for index in t.partition_indexes:
            if t.name in unauthorized:
                parts.append(_partition(index, errors.TopicAuthorizationFailedError.code, None))
                continue
            if topic is None or not 0 <= index < len(topic.partitions):
                parts.append(_partition(index, errors.UnknownTopicOrPartitionError.code,
                                        "This server does not host this topic-partition."))
                continue
            producers = [
                _R.ProducerState(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                                 last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                                 coordinator_epoch=p.coordinator_epoch,
                                 current_txn_start_offset=p.current_txn_start_offset)
                for p in sorted(topic.partitions[index].log.active_producers())
            ]
            parts.append(_partition(index, 0, None, producers))
        topics.append(_R.TopicResponse(name=t.name, partitions=parts))
    return _R(throttle_time_ms=0, topics=topics)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, topics=[
        _R.TopicResponse(name=t.name, partitions=[_partition(i, code, message)
                                                  for i in t.partition_indexes])
        for t in request.topics
    ])
