"""DeleteGroups (key 42), versions 0-2: delete empty groups with their offsets
(GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP otherwise); answered once the tombstones are in the log.
A share group's share-partition state is deleted first (Kafka 4.1's order): its topics move
to the deleting set of its ShareGroupStatePartitionMetadata record, DeleteShareGroupState
goes to each share partition's coordinator, and only then are the group's tombstones
written (a failure answers that error and keeps the group, with its topics still deleting,
so that the next DeleteGroups does it again). Any group's configs (resource type GROUP,
``pylog.group.group_configs``) go too."""

from __future__ import annotations

import asyncio
from typing import Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied
from pylog.broker.handlers._configs import delete_group_configs
from pylog.broker.handlers._context import RequestContext
from pylog.group.admin import map_append_error
from pylog.group.share import lifecycle
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DeleteGroupsResponse

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DeleteGroupsResponse


async def _delete(ctx: RequestContext, gid: str) -> int:
    coord = _groups.coordinator(ctx, gid)
    if coord is None:
        return _groups.not_hosted(ctx)
    group = coord.share.groups.get(gid)
    if group is not None and not group.members and not coord.loading:
        code = await _delete_share_state(ctx, coord, gid, group)
        if code:
            return code
    ((_, code),) = await _groups.wait(ctx, coord, coord.delete_groups([gid]))
    if code == 0:
        await delete_group_configs(ctx, gid)
    if group is not None and code == 0:
        ctx.broker.share.on_group_deleted(gid)  # its share partitions and sessions here
    return int(code)


async def _delete_share_state(ctx: RequestContext, coord: Any, gid: str, group: Any) -> int:
    """DeleteShareGroupState of every share partition the group may have state for: those
    of its record (initialized, initializing, deleting) and, for state written before the
    record existed, every partition of the topics it subscribes to."""
    pending, parts = coord.share.begin_delete(gid, _groups.topics_view(ctx))
    for tid, n in group.subscription_metadata.values():
        parts.setdefault(tid, set()).update(range(n))
    code = await _groups.wait(ctx, coord, pending)
    if code:
        return map_append_error(code)
    return await lifecycle.delete_state(ctx.broker, gid, parts)


async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    names = list(request.groups_names)
    unauthorized = denied(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    codes = await asyncio.gather(*(_delete(ctx, gid) for gid in names if gid not in unauthorized))
    if unauthorized:
        it = iter(codes)
        codes = [errors.GroupAuthorizationFailedError.code if gid in unauthorized else next(it)
                 for gid in names]
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _R.DeletableGroupResult(group_id=gid, error_code=code) for gid, code in zip(names, codes, strict=True)])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _R.DeletableGroupResult(group_id=gid, error_code=code) for gid in request.groups_names])
