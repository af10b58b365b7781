"""ListGroups (key 16), versions 0-5: every group this node coordinates (v4: filtered by
state, v5: by type). While a partition loads, the groups found so far come with
COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed, cluster_allowed
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ListGroupsResponse

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ListGroupsResponse


async def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    states = list(request.states_filter) if v >= 4 else None
    types = list(request.types_filter) if v >= 5 else None
    code = 0
    groups = []
    for coord in ctx.broker.groups.coordinators():
        if coord.loading:
            code = errors.CoordinatorLoadInProgressError.code
            continue
        for g in coord.list_groups(states or None, types or None):
            groups.append(_R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                                         group_state=g.group_state, group_type=g.group_type))
    groups.sort(key=lambda g: g.group_id)
    if ctx.broker.authorizer is not None and not cluster_allowed(ctx, AclOperation.DESCRIBE,
                                                                 log_denied=False):
        # Without DESCRIBE on the cluster: the groups the principal may DESCRIBE.
        groups = [g for g in groups if allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                               g.group_id, log_denied=False)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=groups)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])
