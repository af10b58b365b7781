"""LeaderAndIsr (key 4), versions 0-7: the controller makes this broker leader or follower
of partitions (``broker.replicas.become_leader_or_follower``, pylog.replication).

Refusals for the whole request: an older controller epoch (STALE_CONTROLLER_EPOCH), a
broker epoch older than this broker's registration (STALE_BROKER_EPOCH, cluster mode).
Per partition: the replica manager's code (stale leader epochs are ignored with
STALE_CONTROLLER_EPOCH, as Kafka answers them).
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import LeaderAndIsrResponse
from pylog.replication import PartitionInfo

API_KEY = ApiKey.LEADER_AND_ISR
VERSIONS = ADVERTISED[API_KEY]

_R = LeaderAndIsrResponse


def _states(request: Any, version: int) -> list[tuple[Any, Any, str]]:
    """(partition state, topic id, topic name) for every partition, both layouts."""
    if version < 2:
        return [(ps, None, ps.topic_name) for ps in request.ungrouped_partition_states]
    return [(ps, getattr(ts, "topic_id", None) if version >= 5 else None, ts.topic_name)
            for ts in request.topic_states for ps in ts.partition_states]


def _response(ctx: RequestContext, request: Any, code: int,
              results: dict[tuple[str, int], int]) -> Any:
    states = _states(request, ctx.api_version)
    if ctx.api_version < 5:
        return _R(error_code=code, partition_errors=[
            _R.LeaderAndIsrPartitionError(topic_name=name, partition_index=ps.partition_index,
                                          error_code=results.get((name, ps.partition_index), code))
            for ps, _tid, name in states])
    topics = []
    for ts in request.topic_states:
        topics.append(_R.LeaderAndIsrTopicError(topic_id=ts.topic_id, partition_errors=[
            _R.LeaderAndIsrPartitionError(
                partition_index=ps.partition_index,
                error_code=results.get((ts.topic_name, ps.partition_index), code))
            for ps in ts.partition_states]))
    return _R(error_code=code, topics=topics)


async def handle_leader_and_isr(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)  # Kafka: CLUSTER_ACTION on the cluster
    broker = ctx.broker
    cluster = getattr(broker, "cluster", None)
    own_epoch = getattr(cluster, "broker_epoch", None) if cluster is not None else None
    if own_epoch is not None and 0 <= request.broker_epoch < own_epoch:
        return error_response(ctx, request, errors.StaleBrokerEpochError.code,
                              f"broker epoch {request.broker_epoch} < {own_epoch}")
    infos = []
    for ps, topic_id, name in _states(request, ctx.api_version):
        infos.append(PartitionInfo(
            topic=name, partition=ps.partition_index, leader=ps.leader,
            leader_epoch=ps.leader_epoch, isr=tuple(ps.isr), partition_epoch=ps.partition_epoch,
            replicas=tuple(ps.replicas), controller_epoch=ps.controller_epoch,
            topic_id=topic_id if topic_id is not None and topic_id.int else None))
    leaders = {ll.broker_id: (ll.host_name, ll.port) for ll in request.live_leaders}
    results = await broker.replicas.become_leader_or_follower(
        request.controller_id, request.controller_epoch, request.broker_epoch, infos, leaders)
    return _response(ctx, request, 0, results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _response(ctx, request, code, {})
