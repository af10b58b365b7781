"""Heartbeat (key 12), versions 0-4: a member says it is alive; the answer tells it to
rejoin when a rebalance is in progress (``pylog.group``)."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, require_group
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import HeartbeatResponse

API_KEY = ApiKey.HEARTBEAT
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    require_group(ctx, AclOperation.READ, request.group_id)
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    code = coord.heartbeat(request.group_id, request.generation_id, request.member_id,
                           request.group_instance_id if ctx.api_version >= 3 else None)
    return _groups.driven(ctx, coord, HeartbeatResponse(throttle_time_ms=0, error_code=code))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
