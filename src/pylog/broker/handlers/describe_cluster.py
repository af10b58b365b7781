"""DescribeCluster (key 60), versions 0-1: cluster id, controller and brokers (this node; in
cluster mode every live broker and the controller, from the metadata cache)."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeClusterResponse
from pylog.security.acl import ResourceType, authorized_operations

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeClusterResponse
ENDPOINT_BROKERS = 1


async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 1 and request.endpoint_type != ENDPOINT_BROKERS:
        return error_response(ctx, request, errors.UnsupportedEndpointTypeError.code,
                              "this node serves broker endpoints only")
    ops = authorized_operations(bool(request.include_cluster_authorized_operations),
                                ResourceType.CLUSTER)
    cluster = ctx.broker.cluster
    if cluster is not None:  # cluster mode: every live broker and the controller, from the cache
        cache = cluster.metadata
        await cache.wait_initialized()
        return _R(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=ENDPOINT_BROKERS,
            cluster_id=ctx.broker.cluster_id, controller_id=cache.controller_id,
            brokers=[_R.DescribeClusterBroker(broker_id=b.broker_id, host=at.host, port=at.port,
                                              rack=b.rack)
                     for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
                     if (at := b.at(ctx.listener)) is not None],
            cluster_authorized_operations=ops,
        )
    host, port = ctx.broker.advertised(ctx.listener if ctx.broker.listen else None)
    return _R(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=ENDPOINT_BROKERS,
        cluster_id=ctx.broker.cluster_id, controller_id=ctx.broker.node_id,
        brokers=[_R.DescribeClusterBroker(broker_id=ctx.broker.node_id, host=host, port=port, rack=None)],
        cluster_authorized_operations=ops,
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message,
              endpoint_type=getattr(request, "endpoint_type", ENDPOINT_BROKERS),
              cluster_id=ctx.broker.cluster_id, controller_id=-1, brokers=[])
