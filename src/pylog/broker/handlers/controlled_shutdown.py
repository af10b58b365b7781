"""ControlledShutdown (key 7), versions 0-3, cluster mode only: a broker about to stop asks
the controller to move its leaderships; the answer lists the partitions it still leads
(no other live ISR member). Answered NOT_CONTROLLER by a broker that is not the controller,
STALE_BROKER_EPOCH (77) when the broker epoch (v2+) is not the registered one.
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import ControlledShutdownResponse

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
VERSIONS = CLUSTER_ADVERTISED[API_KEY]  # served in cluster mode only (pylog.protocol.apis)

NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77

_R = ControlledShutdownResponse


async def handle_controlled_shutdown(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)  # Kafka: CLUSTER_ACTION on the cluster
    cluster = ctx.broker.cluster
    controller = cluster.controller if cluster is not None else None
    if controller is None:
        return _R(error_code=NOT_CONTROLLER)
    live = controller.core.live.get(request.broker_id)
    if ctx.api_version >= 2 and live is not None and request.broker_epoch != -1 \
            and live[1] != request.broker_epoch:
        return _R(error_code=STALE_BROKER_EPOCH)
    remaining = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    return _R(error_code=0, remaining_partitions=[
        _R.RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(error_code=code)
