"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546): the quota entities matching a
filter, with their quotas (``pylog.broker.quotas``; Kafka's filter rules and errors in
``entities.DescribeFilter``). In cluster mode every broker answers from the entities it has
applied from ZooKeeper's change notices."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.broker.quotas.entities import DescribeFilter, entity_to_wire
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeClientQuotasResponse

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeClientQuotasResponse


async def handle_describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)  # Kafka: DESCRIBE_CONFIGS on the cluster
    match = DescribeFilter(request.components, request.strict)  # ApiError: error_response
    entries = [
        _R.EntryData(
            entity=[_R.EntityData(entity_type=t, entity_name=n) for t, n in entity_to_wire(e)],
            values=[_R.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for e, values in ctx.broker.quotas.describe(match)
    ]
    return _R(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message, entries=None)
