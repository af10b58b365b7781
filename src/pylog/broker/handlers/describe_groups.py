"""DescribeGroups (key 15), versions 0-5: state, protocol and members (with their
metadata and assignments) of each named group; an unknown group is described as Dead."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, allowed, authorized_ops
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeGroupsResponse
from pylog.security.acl import AUTHORIZED_OPERATIONS_OMITTED, ResourceType, authorized_operations

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeGroupsResponse


def _error_group(gid: str, code: int, ops: int) -> Any:
    return _R.DescribedGroup(error_code=code, group_id=gid, group_state="", protocol_type="", protocol_data="",
                             members=[], authorized_operations=ops)


async def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    # Kafka fills the field only when asked (v3+): without an authorizer every group
    # operation, with one what the principal may do on each group.
    want_ops = bool(getattr(request, "include_authorized_operations", False))
    ops = authorized_operations(want_ops, ResourceType.GROUP)
    out = []
    for gid in request.groups:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(_error_group(gid, errors.GroupAuthorizationFailedError.code,
                                    AUTHORIZED_OPERATIONS_OMITTED))
            continue
        if ctx.broker.authorizer is not None:
            ops = authorized_ops(ctx, want_ops, ResourceType.GROUP, gid)
        coord = _groups.coordinator(ctx, gid)
        if coord is None:
            out.append(_error_group(gid, _groups.not_hosted(ctx), ops))
            continue
        (g,) = coord.describe_groups([gid])
        out.append(_R.DescribedGroup(
            error_code=g.error_code, group_id=g.group_id, group_state=g.group_state,
            protocol_type=g.protocol_type, protocol_data=g.protocol_data,
            authorized_operations=ops,
            members=[_R.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.member_metadata,
                member_assignment=m.member_assignment) for m in g.members]))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[_error_group(g, code, AUTHORIZED_OPERATIONS_OMITTED)
                                                         for g in request.groups])
