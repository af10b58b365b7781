"""CreatePartitions (key 37), versions 0-3: grow a topic's partition count.

Cluster mode: the new partitions' replicas are assigned over the live brokers (or the
request's assignments checked), ``/brokers/topics/<t>`` is rewritten conditionally, and the
answer waits (``timeout_ms``) until this broker's metadata shows them led.

A request that would add more than ``MAX_PARTITIONS_PER_BATCH`` (10,000) partitions in all
(counted against the partitions this broker knows of each topic) is refused as a whole with
POLICY_VIOLATION, as CreateTopics is, before anything is created.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied
from pylog.broker.handlers._common import MAX_PARTITIONS_PER_BATCH, TOO_MANY_PARTITIONS
from pylog.broker.handlers._context import RequestContext
from pylog.controller import admin as cluster_admin
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import CreatePartitionsResponse

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = CreatePartitionsResponse


async def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.log_manager
    added = 0
    for t in request.topics:
        known = manager.topics.get(t.name)
        added += max(0, t.count - (len(known.partitions) if known is not None else 0))
    if added > MAX_PARTITIONS_PER_BATCH:
        return error_response(ctx, request, errors.PolicyViolationError.code, TOO_MANY_PARTITIONS)
    counts = Counter(t.name for t in request.topics)
    unauthorized = denied(ctx, AclOperation.ALTER, ResourceType.TOPIC, counts)
    results = []
    for t in request.topics:
        res = _R.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        results.append(res)
        try:
            if t.name in unauthorized:
                raise errors.TopicAuthorizationFailedError("The topic authorization is failed.")
            if counts[t.name] > 1:
                raise errors.InvalidRequestError("Duplicate topic in request.")
            if ctx.broker.cluster is not None:  # through ZooKeeper (pylog.controller.admin)
                await cluster_admin.create_partitions(
                    ctx.broker, t.name, t.count,
                    [list(a.broker_ids) for a in t.assignments] if t.assignments is not None
                    else None, bool(request.validate_only), max(request.timeout_ms, 0) / 1000.0)
                continue
            if t.assignments is not None:
                for a in t.assignments:
                    if list(a.broker_ids) != [ctx.broker.node_id]:
                        raise errors.InvalidReplicaAssignmentError(
                            f"replicas {list(a.broker_ids)} are not [{ctx.broker.node_id}] (single node)")
            await manager.create_partitions_async(ctx.broker.executor, t.name, t.count,
                                                  validate_only=request.validate_only)
        except errors.ApiError as exc:
            res.error_code, res.error_message = exc.code, str(exc)
    return _R(throttle_time_ms=0, results=results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, results=[
        _R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
        for t in request.topics
    ])
