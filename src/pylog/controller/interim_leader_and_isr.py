"""INTERIM LeaderAndIsr (key 4) handler, used ONLY while ``pylog.replication`` (helper R's
replica manager, with the real handler) is absent: it records the partition states the
controller sent into ``broker.cluster.metadata.local_states`` and answers NONE for each, so the
controller's requests are delivered and observable. It creates no log and starts no fetcher.
The lead replaces it when merging the replica manager (``handlers/__init__`` prefers a real
``leader_and_isr`` handler module when there is one).
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import LeaderAndIsrResponse

API_KEY = ApiKey.LEADER_AND_ISR
VERSIONS = CLUSTER_ADVERTISED[API_KEY]

_R = LeaderAndIsrResponse


def _states(request: Any, version: int) -> list[tuple[str, Any, Any]]:
    if version < 2:
        return [(s.topic_name, None, s) for s in request.ungrouped_partition_states]
    return [(t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states]


async def handle_leader_and_isr(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.broker.cluster
    version = ctx.api_version
    states = _states(request, version)
    if cluster is not None:
        cache = cluster.metadata
        for name, _tid, s in states:
            cache.local_states[(name, s.partition_index)] = (s.leader, s.leader_epoch, tuple(s.isr))
    if version < 5:
        return _R(error_code=0, partition_errors=[
            _R.LeaderAndIsrPartitionError(topic_name=n, partition_index=s.partition_index)
            for n, _t, s in states])
    by_id: dict[Any, list[Any]] = {}
    for _n, tid, s in states:
        by_id.setdefault(tid, []).append(_R.LeaderAndIsrPartitionError(
            partition_index=s.partition_index))
    return _R(error_code=0, topics=[_R.LeaderAndIsrTopicError(topic_id=t, partition_errors=ps)
                                    for t, ps in by_id.items()])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(error_code=code)
