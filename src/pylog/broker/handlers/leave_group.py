"""LeaveGroup (key 13), versions 0-5: members leave (v3+: several at once, by member id
or group instance id); v0-2 name one member and carry only a top-level error."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, require_group
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import LeaveGroupResponse

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = LeaveGroupResponse


async def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    require_group(ctx, AclOperation.READ, request.group_id)
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    r = _groups.driven(ctx, coord, coord.leave_group(request.group_id, members))
    if ctx.api_version < 3:
        code = r.error_code or (r.members[0].error_code if r.members else 0)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=r.error_code, members=[
        _R.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error_code)
        for m in r.members])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])
