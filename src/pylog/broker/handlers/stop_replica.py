"""StopReplica (key 5), versions 0-4: the controller tells this broker to stop replicating
partitions, and to delete them when ``delete_partition`` (v3+; ``delete_partitions``
before) is set (``broker.replicas.stop_replicas``, pylog.replication)."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import StopReplicaResponse

API_KEY = ApiKey.STOP_REPLICA
VERSIONS = ADVERTISED[API_KEY]

_R = StopReplicaResponse


def _partitions(request: Any, version: int) -> list[tuple[str, int, bool]]:
    if version == 0:
        return [(p.topic_name, p.partition_index, request.delete_partitions)
                for p in request.ungrouped_partitions]
    if version <= 2:
        return [(t.name, i, request.delete_partitions)
                for t in request.topics for i in t.partition_indexes]
    return [(t.topic_name, p.partition_index, p.delete_partition)
            for t in request.topic_states for p in t.partition_states]


async def handle_stop_replica(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)  # Kafka: CLUSTER_ACTION on the cluster
    parts = _partitions(request, ctx.api_version)
    results = await ctx.broker.replicas.stop_replicas(request.controller_id,
                                                      request.controller_epoch, parts)
    return _R(error_code=0, partition_errors=[
        _R.StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=results.get((t, p), 0))
        for t, p, _d in parts])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(error_code=code, partition_errors=[
        _R.StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=code)
        for t, p, _d in _partitions(request, ctx.api_version)])
