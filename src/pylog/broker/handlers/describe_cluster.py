"""DescribeCluster (key 60), versions 0-1: cluster id, controller and brokers (this node; in
cluster mode every live broker and the controller, from the metadata cache)."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, authorized_ops, cluster_allowed
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeClusterResponse
from pylog.security.acl import AUTHORIZED_OPERATIONS_OMITTED, ResourceType, authorized_operations
from pylog.security.authz.bindings import CLUSTER_NAME

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeClusterResponse
ENDPOINT_BROKERS = 1


async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 1 and request.endpoint_type != ENDPOINT_BROKERS:
        return error_response(ctx, request, errors.UnsupportedEndpointTypeError.code,
                              "this node serves broker endpoints only")
    want_ops = bool(request.include_cluster_authorized_operations)
    ops = authorized_operations(want_ops, ResourceType.CLUSTER)
    if ctx.broker.authorizer is not None and want_ops:  # only to who may DESCRIBE the cluster
        ops = (authorized_ops(ctx, True, ResourceType.CLUSTER, CLUSTER_NAME)
               if cluster_allowed(ctx, AclOperation.DESCRIBE, log_denied=False)
               else AUTHORIZED_OPERATIONS_OMITTED)
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
