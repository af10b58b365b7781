"""DeleteTopics (key 20), versions 1-6 (v6 by name or by topic ID).

Each topic's partition directories are renamed ``-delete`` at once and removed in the
background (LogManager); fetches waiting on them are woken so they answer now.

Internal topics are deleted like any other, as Kafka's controller does
(``ControllerApis.deleteTopics`` and ``ReplicationControlManager.deleteTopic`` make no
exception for them; only ``kafka-topics.sh`` leaves them out of ``--topic`` patterns).
Deleting ``__consumer_offsets`` resigns the group coordinators (their groups and committed
offsets are gone); the next FindCoordinator creates the topic anew.

Cluster mode: the deletion is requested in ZooKeeper (``/admin/delete_topics``); the
controller stops the replicas and removes the topic; the answer waits (``timeout_ms``) until
this broker's metadata no longer lists it (``pylog.controller.admin``).
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed
from pylog.broker.handlers._context import RequestContext
from pylog.controller import admin as cluster_admin
from pylog.group.share import lifecycle as share_lifecycle
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.codec import ZERO_UUID
from pylog.protocol.messages import DeleteTopicsResponse

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DeleteTopicsResponse


def _targets(ctx: RequestContext, request: Any) -> list[tuple[str | None, Any]]:
    if ctx.api_version >= 6:
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, ZERO_UUID) for name in request.topic_names]


def _check_delete(ctx: RequestContext, name: str) -> None:
    """DELETE on the topic (Kafka: TOPIC_AUTHORIZATION_FAILED in its entry)."""
    if not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
        raise errors.TopicAuthorizationFailedError(f"Not authorized to access topics: [{name}]")


async def handle_delete_topics(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    results = []
    for name, topic_id in _targets(ctx, request):
        res = _R.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0, error_message=None)
        results.append(res)
        try:
            if ctx.broker.cluster is not None:
                if name is None:
                    name = res.name = ctx.broker.cluster.metadata.topic_by_id(topic_id)
                    if name is None:
                        raise errors.UnknownTopicIdError("This server does not host this topic ID.")
                _check_delete(ctx, name)
                tid = await cluster_admin.delete_topic(ctx.broker, name,
                                                       max(request.timeout_ms, 0) / 1000.0)
                res.topic_id = tid if tid is not None else ZERO_UUID
                if tid is not None:
                    share_lifecycle.forget_topics(ctx.broker, {tid})  # share groups coordinated here
                continue
            if name is None:
                topic = manager.topic_by_id(topic_id)
                if topic is None:
                    raise errors.UnknownTopicIdError("This server does not host this topic ID.")
                name = res.name = topic.name
            elif topic_id != ZERO_UUID:
                raise errors.InvalidRequestError("give a topic name or a topic ID, not both")
            _check_delete(ctx, name)
            topic = await manager.delete_topic_async(ctx.broker.executor, name)
            if name == GROUP_METADATA_TOPIC_NAME:
                ctx.broker.groups.on_offsets_topic_deleted()
            elif name == TRANSACTION_STATE_TOPIC_NAME:
                ctx.broker.txns.on_topic_deleted()
            ctx.broker.share.on_topic_deleted(topic)  # its share partitions (KIP-932) go
            share_lifecycle.forget_topics(ctx.broker, {topic.topic_id})  # and share groups' records
            res.topic_id = topic.topic_id
            for p in topic.partitions:
                ctx.broker.waiters.notify((p.topic, p.index))
        except errors.ApiError as exc:
            res.error_code, res.error_message = exc.code, str(exc)
    return _R(throttle_time_ms=0, responses=results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, responses=[
        _R.DeletableTopicResult(name=name, topic_id=tid, error_code=code, error_message=message)
        for name, tid in _targets(ctx, request)
    ])
