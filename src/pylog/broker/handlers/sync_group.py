"""SyncGroup (key 14), versions 0-5: the leader hands in the assignment, every member gets
its own. Followers wait until the leader's assignment is stored (``pylog.group``)."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, require_group
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import SyncGroupResponse

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    require_group(ctx, AclOperation.READ, request.group_id)
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    v = ctx.api_version
    pending = coord.sync_group(
        request.group_id, request.generation_id, request.member_id,
        [(a.member_id, a.assignment) for a in request.assignments],
        request.group_instance_id if v >= 3 else None,
        request.protocol_type if v >= 5 else None,
        request.protocol_name if v >= 5 else None,
    )
    r = await _groups.wait(ctx, coord, pending)
    return SyncGroupResponse(throttle_time_ms=0, error_code=r.error_code, protocol_type=r.protocol_type,
                             protocol_name=r.protocol_name, assignment=r.assignment)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None,
                             assignment=b"")
