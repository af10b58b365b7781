"""AlterClientQuotas (key 49), versions 0-1 (KIP-546): set or remove the quotas of user and
client-id entities, each entry validated and stored on its own (``validate_only``: checked,
not stored). A single node stores them in its data directory, a cluster in ZooKeeper with a
change notice every broker applies (``pylog.broker.quotas.store``)."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._authz import AclOperation, require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import AlterClientQuotasResponse

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = AlterClientQuotasResponse


def _entity(components: Any) -> list[Any]:
    return [_R.EntityData(entity_type=c.entity_type, entity_name=c.entity_name) for c in components]


async def handle_alter_client_quotas(ctx: RequestContext, request: Any) -> Any:
    require_cluster(ctx, AclOperation.ALTER_CONFIGS)  # Kafka: ALTER_CONFIGS on the cluster
    results = await ctx.broker.quotas.alter(request.entries, request.validate_only)
    return _R(
        throttle_time_ms=0,
        entries=[
            _R.EntryData(error_code=code, error_message=message, entity=_entity(entity))
            for entity, code, message in results
        ],
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(
        throttle_time_ms=0,
        entries=[
            _R.EntryData(error_code=code, error_message=message, entity=_entity(e.entity))
            for e in request.entries
        ],
    )
