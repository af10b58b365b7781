"""Metadata (key 3), versions 0-12: brokers, cluster id, controller, topics and partitions.

One node leads every partition (replicas and ISR are [node_id]), in leader epoch 0. Topics
missing from a request are auto-created when ``auto.create.topics.enable`` and the request's
``allow_auto_topic_creation`` (v4+; always true before) both allow it. v10+ may name topics
by ID (name null); v12 answers them with their names. Authorized operations stay at Kafka's
"not requested" value.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._common import AUTHORIZED_OPERATIONS_OMITTED, LEADER_EPOCH, lookup_topic
from pylog.broker.handlers._context import RequestContext
from pylog.log.internal_topics import is_internal
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.codec import ZERO_UUID
from pylog.protocol.messages import MetadataResponse

API_KEY = ApiKey.METADATA
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = MetadataResponse


def _brokers(ctx: RequestContext) -> list[Any]:
    host, port = ctx.broker.advertised()
    return [_R.MetadataResponseBroker(node_id=ctx.broker.node_id, host=host, port=port, rack=None)]


def _topic_entry(ctx: RequestContext, topic: Any) -> Any:
    node = ctx.broker.node_id
    return _R.MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal(topic.name),
        partitions=[
            _R.MetadataResponsePartition(
                error_code=0, partition_index=p.index, leader_id=node, leader_epoch=LEADER_EPOCH,
                replica_nodes=[node], isr_nodes=[node], offline_replicas=[],
            )
            for p in topic.partitions
        ],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _error_topic(name: str | None, code: int, topic_id: Any = ZERO_UUID) -> Any:
    return _R.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    version = ctx.api_version
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        topics = [_topic_entry(ctx, t) for t in list(manager.topics.values())]
    else:
        allow = request.allow_auto_topic_creation if version >= 4 else True
        topics = []
        for item in requested:
            if item.name is None:
                t = manager.topic_by_id(item.topic_id)
                if t is None:
                    topics.append(_error_topic(None, errors.UnknownTopicIdError.code, item.topic_id))
                else:
                    topics.append(_topic_entry(ctx, t))
                continue
            try:
                topics.append(_topic_entry(ctx, await lookup_topic(ctx, item.name, auto_create=allow)))
            except errors.ApiError as exc:
                topics.append(_error_topic(item.name, exc.code))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=_brokers(ctx),
        cluster_id=ctx.broker.cluster_id,
        controller_id=ctx.broker.node_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    names = [t.name for t in (request.topics or [])]
    return MetadataResponse(
        brokers=_brokers(ctx), cluster_id=ctx.broker.cluster_id, controller_id=ctx.broker.node_id,
        topics=[_error_topic(n, code) for n in names],
    )
