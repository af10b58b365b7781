"""Metadata (key 3), versions 0-12: brokers, cluster id, controller, topics and partitions.

One node leads every partition (replicas and ISR are [node_id]), in leader epoch 0. Topics
missing from a request are auto-created when ``auto.create.topics.enable`` and the request's
``allow_auto_topic_creation`` (v4+; always true before) both allow it. v10+ may name topics
by ID (name null); v12 answers them with their names. Authorized operations (v8+) are
filled when asked.

With an authorizer (Kafka's ``handleTopicMetadataRequest``): an all-topics request leaves
out the topics the principal may not DESCRIBE; a topic named in the request that it may not
DESCRIBE answers TOPIC_AUTHORIZATION_FAILED (by id: with the id and no name), and so does a
missing topic it would auto-create without CREATE on the cluster or on the topic.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import (
    AclOperation,
    allowed,
    authorized_ops,
    cluster_allowed,
    filter_allowed,
)
from pylog.broker.handlers._common import LEADER_EPOCH, lookup_topic
from pylog.broker.handlers._context import RequestContext
from pylog.log.internal_topics import is_internal
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.codec import ZERO_UUID
from pylog.protocol.messages import MetadataResponse
from pylog.security.acl import AUTHORIZED_OPERATIONS_OMITTED, ResourceType, authorized_operations
from pylog.security.authz.bindings import CLUSTER_NAME

API_KEY = ApiKey.METADATA
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = MetadataResponse


def _brokers(ctx: RequestContext) -> list[Any]:
    """This broker at the address of the listener the client came in on."""
    host, port = ctx.broker.advertised(ctx.listener if ctx.broker.listen else None)
    if port < 0:  # that listener is not advertised
        return []
    return [_R.MetadataResponseBroker(node_id=ctx.broker.node_id, host=host, port=port, rack=None)]


def _topic_entry(ctx: RequestContext, topic: Any, ops: int) -> Any:
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
        topic_authorized_operations=ops,
    )


def _requested_operations(ctx: RequestContext, request: Any) -> tuple[int, int]:
    """The (topic, cluster) ``authorized_operations`` fields: Kafka fills them only when the
    client asks (v8+), with every supported operation while no authorizer is configured
    (with one, ``_TopicAuthz.ops`` answers per topic, and the cluster's only to a principal
    that may DESCRIBE it)."""
    want_cluster = bool(getattr(request, "include_cluster_authorized_operations", False))
    cluster_ops = authorized_operations(want_cluster, ResourceType.CLUSTER)
    if ctx.broker.authorizer is not None and want_cluster:
        cluster_ops = (authorized_ops(ctx, True, ResourceType.CLUSTER, CLUSTER_NAME)
                       if cluster_allowed(ctx, AclOperation.DESCRIBE) else AUTHORIZED_OPERATIONS_OMITTED)
    return (authorized_operations(bool(getattr(request, "include_topic_authorized_operations", False)),
                                  ResourceType.TOPIC), cluster_ops)


class _TopicAuthz:
    """The topic checks of one Metadata request (inert without an authorizer)."""

    def __init__(self, ctx: RequestContext, request: Any, default_ops: int) -> None:
        self.ctx = ctx
        self.on = ctx.broker.authorizer is not None
        self.want_ops = bool(getattr(request, "include_topic_authorized_operations", False))
        self.default_ops = default_ops

    def visible(self, names: list[str]) -> set[str] | None:
        """Of an all-topics request: the names the principal may DESCRIBE (None: all)."""
        if not self.on:
            return None
        return filter_allowed(self.ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                              log_denied=False)

    def describe(self, name: str) -> bool:
        return not self.on or allowed(self.ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    def create(self, name: str) -> bool:
        """May the principal auto-create ``name`` (CREATE on the cluster or the topic)?"""
        return not self.on or cluster_allowed(self.ctx, AclOperation.CREATE, log_denied=False) \
            or allowed(self.ctx, AclOperation.CREATE, ResourceType.TOPIC, name)

    def ops(self, name: str) -> int:
        if not self.on or not self.want_ops:
            return self.default_ops
        return authorized_ops(self.ctx, True, ResourceType.TOPIC, name)


_DENIED = errors.TopicAuthorizationFailedError.code


def _error_topic(name: str | None, code: int, topic_id: Any = ZERO_UUID,
                 ops: int = AUTHORIZED_OPERATIONS_OMITTED) -> Any:
    return _R.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
        topic_authorized_operations=ops,
    )


async def _auto_create(ctx: RequestContext, name: str) -> int:
    """Cluster mode auto-creation (Kafka's ZK-mode ``KafkaApis.createTopics`` from Metadata):
    write the topic with ``num.partitions`` / ``default.replication.factor`` and answer
    LEADER_NOT_AVAILABLE (the client asks again once the controller has started it)."""
    from pylog.controller.admin import create_topic

    config = ctx.broker.config
    try:
        await create_topic(ctx.broker, name, config["num.partitions"],
                           config["default.replication.factor"], None, {}, False, 0.0)
    except (errors.RequestTimedOutError, errors.TopicAlreadyExistsError):
        pass
    except errors.ApiError as exc:
        return exc.code
    return errors.LeaderNotAvailableError.code


async def _cluster_metadata(ctx: RequestContext, request: Any) -> Any:
    """Cluster mode: everything from the metadata cache the controller feeds (all live
    brokers, real leaders, replicas, ISR, offline replicas). A missing topic is created
    through ZooKeeper when auto-creation is allowed (LEADER_NOT_AVAILABLE meanwhile), else
    UNKNOWN_TOPIC_OR_PARTITION."""
    cache = ctx.broker.cluster.metadata
    await cache.wait_initialized()
    topic_ops, cluster_ops = _requested_operations(ctx, request)
    authz = _TopicAuthz(ctx, request, topic_ops)
    # Each broker at its address on the listener the client came in on; a broker without
    # that listener is left out, and partitions it leads answer LISTENER_NOT_FOUND (Kafka).
    reachable = {b.broker_id: at for b in cache.brokers.values()
                 if (at := b.at(ctx.listener)) is not None}
    brokers = [_R.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
               for _, b in sorted(reachable.items())]

    def error(m: Any) -> int:
        if m.leader not in cache.brokers:
            return errors.LeaderNotAvailableError.code
        return 0 if m.leader in reachable else errors.ListenerNotFoundError.code

    def leader(m: Any) -> int:
        # A leader that is not a live broker (its session ended before the controller moved
        # the partition) is no leader: -1 and LEADER_NOT_AVAILABLE, as Kafka's metadata cache
        # answers. Clients look the leader up in ``brokers`` and some fail if it is missing
        # (kafka-python raises UnknownBrokerIdError from poll()).
        return m.leader if m.leader in reachable else -1

    def entry(name: str) -> Any:
        parts = cache.partitions[name]
        return _R.MetadataResponseTopic(
            error_code=0, name=name, topic_id=cache.topic_ids.get(name, ZERO_UUID),
            is_internal=is_internal(name),
            partitions=[_R.MetadataResponsePartition(
                error_code=error(m),
                partition_index=p, leader_id=leader(m), leader_epoch=m.leader_epoch,
                replica_nodes=list(m.replicas), isr_nodes=list(m.isr),
                offline_replicas=list(m.offline)) for p, m in sorted(parts.items())],
            topic_authorized_operations=authz.ops(name))
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        visible = authz.visible(list(cache.partitions))
        topics = [entry(n) for n in sorted(cache.partitions) if visible is None or n in visible]
    else:
        topics = []
        for item in requested:
            name = item.name if item.name is not None else cache.topic_by_id(item.topic_id)
            if name is None:
                topics.append(_error_topic(None, errors.UnknownTopicIdError.code, item.topic_id))
            elif not authz.describe(name):
                topics.append(_error_topic(item.name, _DENIED, item.topic_id if item.name is None
                                           else ZERO_UUID))
            elif name in cache.partitions:
                topics.append(entry(name))
            elif ctx.broker.config["auto.create.topics.enable"] and (
                    request.allow_auto_topic_creation if ctx.api_version >= 4 else True):
                if not authz.create(name):
                    topics.append(_error_topic(name, _DENIED))
                    continue
                topics.append(_error_topic(name, await _auto_create(ctx, name), ops=topic_ops))
            else:
                topics.append(_error_topic(name, errors.UnknownTopicOrPartitionError.code, ops=topic_ops))
    return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=ctx.broker.cluster_id,
                            controller_id=cache.controller_id, topics=topics,
                            cluster_authorized_operations=cluster_ops)


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.cluster is not None:
        return await _cluster_metadata(ctx, request)
    manager = ctx.broker.log_manager
    version = ctx.api_version
    topic_ops, cluster_ops = _requested_operations(ctx, request)
    authz = _TopicAuthz(ctx, request, topic_ops)
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        visible = authz.visible(list(manager.topics))
        topics = [_topic_entry(ctx, t, authz.ops(t.name)) for t in list(manager.topics.values())
                  if visible is None or t.name in visible]
    else:
        allow = request.allow_auto_topic_creation if version >= 4 else True
        topics = []
        for item in requested:
            if item.name is None:
                t = manager.topic_by_id(item.topic_id)
                if t is None:
                    topics.append(_error_topic(None, errors.UnknownTopicIdError.code, item.topic_id))
                elif not authz.describe(t.name):
                    topics.append(_error_topic(None, _DENIED, item.topic_id))
                else:
                    topics.append(_topic_entry(ctx, t, authz.ops(t.name)))
                continue
            if not authz.describe(item.name):
                topics.append(_error_topic(item.name, _DENIED))
                continue
            if (allow and ctx.broker.config["auto.create.topics.enable"]
                    and item.name not in manager.topics and not authz.create(item.name)):
                topics.append(_error_topic(item.name, _DENIED))
                continue
            try:
                topics.append(_topic_entry(ctx, await lookup_topic(ctx, item.name, auto_create=allow),
                                          authz.ops(item.name)))
            except errors.ApiError as exc:
                topics.append(_error_topic(item.name, exc.code, ops=topic_ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=_brokers(ctx),
        cluster_id=ctx.broker.cluster_id,
        controller_id=ctx.broker.node_id,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    names = [t.name for t in (request.topics or [])]
    return MetadataResponse(
        brokers=_brokers(ctx), cluster_id=ctx.broker.cluster_id, controller_id=ctx.broker.node_id,
        topics=[_error_topic(n, code) for n in names],
    )
