"""UpdateMetadata (key 6), versions 0-8, cluster mode only: the controller's view of live
brokers and partitions, applied to ``broker.cluster.metadata`` (``MetadataCache``).

A request from an older controller epoch than the cache's is answered
STALE_CONTROLLER_EPOCH and changes nothing (Kafka's ``KafkaApis.handleUpdateMetadataRequest``).
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import CLUSTER_ADVERTISED, ApiKey
from pylog.protocol.messages import UpdateMetadataResponse

API_KEY = ApiKey.UPDATE_METADATA
VERSIONS = CLUSTER_ADVERTISED[API_KEY]  # served in cluster mode only (pylog.protocol.apis)


async def handle_update_metadata(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)  # Kafka: CLUSTER_ACTION on the cluster
    cluster = ctx.broker.cluster
    if cluster is None:  # the connection layer refuses key 6 on a single node; defensive
        return UpdateMetadataResponse(error_code=35)
    return UpdateMetadataResponse(error_code=cluster.metadata.apply(request, ctx.api_version))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return UpdateMetadataResponse(error_code=code)
