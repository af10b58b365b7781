"""JoinGroup (key 11), versions 0-9: a member joins (or rejoins) a group's rebalance.

The answer may wait for the rebalance to complete (the coordinator's ``Pending``). Rules
(MEMBER_ID_REQUIRED on v4+, generations, protocol choice, static members, timeouts) are
in ``pylog.group.coordinator``.
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, require_group
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import JoinGroupResponse

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = JoinGroupResponse


async def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    require_group(ctx, AclOperation.READ, request.group_id)
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    v = ctx.api_version
    pending = coord.join_group(
        request.group_id, request.member_id, request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols], request.session_timeout_ms,
        request.rebalance_timeout_ms if v >= 1 else -1,
        request.group_instance_id if v >= 5 else None,
        ctx.client_id or "", _groups.client_host(ctx), v,
        request.reason if v >= 8 else None,
        # Only a classic member of a consumer group needs the topics (read lazily).
        topics=lambda: _groups.topics_view(ctx),
    )
    r = await _groups.wait(ctx, coord, pending)
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=r.error_code, generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        # Before v7 the protocol name is not nullable.
        protocol_name=r.protocol_name if (r.protocol_name is not None or v >= 7) else "",
        leader=r.leader, skip_assignment=r.skip_assignment, member_id=r.member_id,
        members=[_R.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                            metadata=m.metadata) for m in r.members],
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name=None if ctx.api_version >= 7 else "", leader="",
                             member_id=request.member_id, members=[])
