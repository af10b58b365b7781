"""DeleteShareGroupOffsets (key 92), version 0 (KIP-932): delete a share group's state for
whole topics (``pylog.group.share.offsets.delete_topic``); the group's next fetch from such
a topic starts its share partitions again from ``share.auto.offset.reset``.

Checks, as Kafka's (mirroring OffsetDelete): DELETE on the group (GROUP_AUTHORIZATION_FAILED
for the request); the group must be a share group this broker coordinates (GROUP_ID_NOT_FOUND,
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) and be empty
(NON_EMPTY_GROUP), in the top-level error. Per topic: READ on it
(TOPIC_AUTHORIZATION_FAILED); a topic that does not exist, or that the group has no state
for, UNKNOWN_TOPIC_OR_PARTITION.

Each partition's state is deleted at its share coordinator (DeleteShareGroupState), wherever
it is; the answer comes once the coordinators wrote the tombstones. A topic whose coordinator
refused or could not be reached gets that error (COORDINATOR_NOT_AVAILABLE after the retries);
its partitions deleted before the failing one stay deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import _groups, _share_offsets
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied, require_group
from pylog.group.admin import map_append_error
from pylog.group.share import offsets as share_offsets
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DeleteShareGroupOffsetsResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DeleteShareGroupOffsetsResponse


async def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    gid = request.group_id
    require_group(ctx, AclOperation.DELETE, gid)
    group = _share_offsets.share_group(ctx, gid)
    if group.members:
        raise errors.NonEmptyGroupError(
            f"The share group {gid} has {len(group.members)} active members: its offsets can "
            f"only be deleted while it is empty.")
    names = list(dict.fromkeys(t.topic_name for t in request.topics))
    refused = denied(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    share = ctx.broker.share
    results: dict[str, tuple[int, str | None]] = {}
    for name in names:
        topic = _share_offsets.topic_info(ctx, name)
        if name in refused:
            results[name] = (errors.TopicAuthorizationFailedError.code,
                             "Not authorized to read this topic.")
        elif topic is None:
            results[name] = (errors.UnknownTopicOrPartitionError.code,
                             "This server does not host this topic.")
        else:
            # The topic is deleting in the group's record until every partition's state is
            # deleted (a failure leaves it there: the next delete, or the group's next
            # heartbeat, which initializes it again, finishes it).
            coord = _share_offsets.coordinator(ctx, gid)
            pending, _parts = coord.share.begin_delete(gid, _groups.topics_view(ctx), {topic[0]: name})
            code = await _groups.wait(ctx, coord, pending)
            if code:
                results[name] = (map_append_error(code), "the group's records were not written")
                continue
            try:
                had = await share_offsets.delete_topic(share, gid, topic[0], topic[1])
            except errors.ApiError as exc:
                results[name] = (exc.code, str(exc))
                continue
            await _groups.wait(ctx, coord, coord.share.end_delete(gid, [topic[0]]))
            results[name] = (0, None) if had else (
                errors.UnknownTopicOrPartitionError.code,
                f"The share group {gid} has no state for this topic.")
    return _R(throttle_time_ms=0, error_code=0, responses=[
        _R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=_share_offsets.topic_id(ctx, name),
            error_code=results[name][0], error_message=results[name][1])
        for name in names])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message or None, responses=[])
