"""What the five share-coordinator RPCs share (KIP-932; InitializeShareGroupState 83,
ReadShareGroupState 84, WriteShareGroupState 85, DeleteShareGroupState 86,
ReadShareGroupStateSummary 87, version 0 each): inter-broker requests from share-partition
leaders, so CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for the whole
request), then one call into the share coordinator (``pylog.group.share.state_store``) per
partition, all at once (the writes of one request go out in one batch per state-topic
partition) and the results in the request's shape. The rules (epochs, bad input, loading,
not the coordinator) are the store's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.group.share.state_store import ShareStateStore, StateResult

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext


def store(ctx: RequestContext) -> ShareStateStore:
    """The share coordinator, once the caller may use it.

    Raises:
        ClusterAuthorizationFailedError: no CLUSTER_ACTION on the cluster.
        CoordinatorNotAvailableError: share groups are disabled.
    """
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    s = ctx.broker.share.state
    if s is None:
        raise errors.CoordinatorNotAvailableError("Share groups are disabled on this broker.")
    return s


async def per_partition(request: Any, call: Callable[[Any, Any], Awaitable[StateResult]],
                        result: Callable[[Any, StateResult], Any], topic_result: Callable[[Any, list[Any]], Any]) -> list[Any]:
    """``call(topic, partition)`` for every partition of the request, concurrently; the
    topic results built with ``result(partition, outcome)`` and ``topic_result``."""
    calls = [(t, p) for t in request.topics for p in t.partitions]
    outcomes = await asyncio.gather(*(call(t, p) for t, p in calls))
    by_topic: dict[int, tuple[Any, list[Any]]] = {}
    for (t, p), r in zip(calls, outcomes, strict=True):
        by_topic.setdefault(id(t), (t, []))[1].append(result(p, r))
    return [topic_result(t, parts) for t, parts in by_topic.values()]


def error_results(request: Any, code: int, message: str, result: Callable[[Any, StateResult], Any],
                  topic_result: Callable[[Any, list[Any]], Any]) -> list[Any]:
    """Every partition of the request with one error."""
    r = StateResult(code, message or None)
    return [topic_result(t, [result(p, r) for p in t.partitions]) for t in request.topics]
