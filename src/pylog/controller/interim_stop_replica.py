"""INTERIM StopReplica (key 5) handler, used ONLY while ``pylog.replication`` (helper R's
replica manager, with the real handler) is absent: it forgets the partition states that
``interim_leader_and_isr`` recorded and answers NONE for each partition. It deletes no log.
The lead replaces it when merging the replica manager (``handlers/__init__`` prefers a real
``stop_replica`` handler module when there is one).
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import StopReplicaResponse

API_KEY = ApiKey.STOP_REPLICA
VERSIONS = CLUSTER_ADVERTISED[API_KEY]

_R = StopReplicaResponse


def _partitions(request: Any, version: int) -> list[tuple[str, int]]:
    if version == 0:
        return [(p.topic_name, p.partition_index) for p in request.ungrouped_partitions]
    if version < 3:
        return [(t.name, p) for t in request.topics for p in t.partition_indexes]
    return [(t.topic_name, s.partition_index) for t in request.topic_states
            for s in t.partition_states]


async def handle_stop_replica(ctx: RequestContext, request: Any) -> Any:
    parts = _partitions(request, ctx.api_version)
    cluster = ctx.broker.cluster
    if cluster is not None:
        for tp in parts:
            cluster.metadata.local_states.pop(tp, None)
    return _R(error_code=0, partition_errors=[
        _R.StopReplicaPartitionError(topic_name=t, partition_index=p) for t, p in parts])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(error_code=code)
