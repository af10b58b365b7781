"""CreateTopics (key 19), versions 2-7.

``num_partitions`` / ``replication_factor`` -1 take the broker defaults (v4+, KIP-464);
manual assignments must name only this node, one replica per partition. Every name must be
legal and new, with no ``.``/``_`` collision; duplicates in one request are
INVALID_REQUEST. v5+ answers with the partition count, replication factor and every config
of the created topic; v7 with its topic ID. ``validate_only`` checks without creating.

Cluster mode (``zookeeper.connect``): any broker validates, assigns replicas over the live
brokers (or checks a manual assignment), writes ZooKeeper and waits up to ``timeout_ms`` for
the controller's result to reach its metadata (``pylog.controller.admin``).

Internal topics, as Kafka's controller answers (``ControllerApis.createTopics``,
``ReplicationControlManager``): ``__cluster_metadata`` is refused with INVALID_REQUEST
("Creation of internal topic __cluster_metadata is prohibited."); ``__consumer_offsets``
and ``__transaction_state`` are created like any topic when they do not exist yet
(TOPIC_ALREADY_EXISTS when they do), with the request's partition count and configs.

A request that would create more than ``MAX_PARTITIONS_PER_BATCH`` (10,000) partitions in
all is refused as a whole with POLICY_VIOLATION ("Excessively large number of partitions
per request."), as Kafka's controller does, before anything is created.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed, cluster_allowed
from pylog.broker.handlers._common import MAX_PARTITIONS_PER_BATCH, TOO_MANY_PARTITIONS
from pylog.broker.handlers._configs import check_implemented, log_warnings
from pylog.broker.handlers._context import RequestContext
from pylog.controller import admin as cluster_admin
from pylog.log.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.codec import ZERO_UUID
from pylog.protocol.messages import CreateTopicsResponse

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = CreateTopicsResponse


def _result(name: str, code: int, message: str | None = None) -> Any:
    return _R.CreatableTopicResult(name=name, topic_id=ZERO_UUID, error_code=code,
                                   error_message=message, num_partitions=-1, replication_factor=-1,
                                   configs=None)


def _configs_error(ctx: RequestContext, name: str) -> int:
    """TOPIC_AUTHORIZATION_FAILED in ``topic_config_error_code`` when the principal may not
    DESCRIBE_CONFIGS the new topic (its configs are then left out), as Kafka answers."""
    if allowed(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name, log_denied=False):
        return 0
    return errors.TopicAuthorizationFailedError.code


def _configs(ctx: RequestContext, name: str, overrides: dict[str, Any]) -> list[Any]:
    if _configs_error(ctx, name):
        return []
    return [
        _R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                 config_source=e.source,
                                 is_sensitive=e.is_sensitive)
        for e in ctx.broker.config.describe_topic(overrides)
    ]


def requested_partitions(ctx: RequestContext, request: Any) -> int:
    """Partitions the request would create in all, counted as Kafka's controller does
    (``validateTotalNumberOfPartitions``): the assignments when given, else
    ``num_partitions`` (-1: the broker's ``num.partitions``; other values below 1 count 0)."""
    default = ctx.broker.config["num.partitions"]
    total = 0
    for t in request.topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += default
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


async def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    if requested_partitions(ctx, request) > MAX_PARTITIONS_PER_BATCH:
        return error_response(ctx, request, errors.PolicyViolationError.code, TOO_MANY_PARTITIONS)
    counts = Counter(t.name for t in request.topics)
    # CREATE on the cluster, else on each topic (Kafka's handleCreateTopicsRequest).
    any_topic = cluster_allowed(ctx, AclOperation.CREATE, log_denied=False)
    results = []
    for t in request.topics:
        if not any_topic and not allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, t.name):
            results.append(_result(t.name, errors.TopicAuthorizationFailedError.code,
                                   "Authorization failed."))
            continue
        if counts[t.name] > 1:
            results.append(_result(t.name, errors.InvalidRequestError.code,
                                   f"Create topics request from client contains duplicate topic {t.name}"))
            continue
        if t.name == CLUSTER_METADATA_TOPIC_NAME:
            results.append(_result(t.name, errors.InvalidRequestError.code,
                                   f"Creation of internal topic {CLUSTER_METADATA_TOPIC_NAME} is prohibited."))
            continue
        try:
            num_partitions, rf = t.num_partitions, t.replication_factor
            if t.assignments:
                if num_partitions != -1 or rf != -1:
                    raise errors.InvalidRequestError(
                        "Both numPartitions or replicationFactor and replicasAssignments were set.")
                indexes = sorted(a.partition_index for a in t.assignments)
                if indexes != list(range(len(indexes))):
                    raise errors.InvalidReplicaAssignmentError("partitions must be numbered 0..n-1")
                for a in t.assignments:
                    if ctx.broker.cluster is None and list(a.broker_ids) != [ctx.broker.node_id]:
                        raise errors.InvalidReplicaAssignmentError(
                            f"partition {a.partition_index}: replicas {list(a.broker_ids)} are not "
                            f"[{ctx.broker.node_id}] (single node)")
                num_partitions, rf = len(indexes), len(t.assignments[0].broker_ids)
            if num_partitions == -1:
                num_partitions = ctx.broker.config["num.partitions"]
            if rf == -1:
                rf = ctx.broker.config["default.replication.factor"]
            configs = {}
            for c in t.configs:
                if c.value is None:
                    raise errors.InvalidConfigError(f"Null value not supported for topic configs: {c.name}")
                configs[c.name] = c.value
            if ctx.broker.cluster is not None:
                # Cluster mode: written to ZooKeeper, the controller creates it (pylog.controller.admin).
                manual = ({a.partition_index: list(a.broker_ids) for a in t.assignments}
                          if t.assignments else None)
                tid, num_partitions, rf, overrides = await cluster_admin.create_topic(
                    ctx.broker, t.name, num_partitions, rf, manual, configs,
                    bool(request.validate_only), max(request.timeout_ms, 0) / 1000.0)
                topic_id = tid if tid is not None else ZERO_UUID
                log_warnings(ctx, t.name, check_implemented(overrides))
                results.append(_R.CreatableTopicResult(
                    name=t.name, topic_id=topic_id, error_code=0, error_message=None,
                    num_partitions=num_partitions, replication_factor=rf,
                    configs=_configs(ctx, t.name, overrides),
                    topic_config_error_code=_configs_error(ctx, t.name)))
                continue
            overrides = manager.check_new_topic(t.name, num_partitions, rf, configs)
            warnings = check_implemented(overrides)
            if request.validate_only:
                topic_id = ZERO_UUID
            else:
                topic = await manager.create_topic_async(ctx.broker.executor, t.name, num_partitions, rf, configs)
                topic_id = topic.topic_id
                log_warnings(ctx, t.name, warnings)
        except errors.ApiError as exc:
            results.append(_result(t.name, exc.code, str(exc)))
            continue
        res = _R.CreatableTopicResult(name=t.name, topic_id=topic_id, error_code=0, error_message=None,
                                      num_partitions=num_partitions, replication_factor=rf,
                                      configs=_configs(ctx, t.name, overrides),
                                      topic_config_error_code=_configs_error(ctx, t.name))
        results.append(res)
    return _R(throttle_time_ms=0, topics=results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, topics=[_result(t.name, code, message) for t in request.topics])
