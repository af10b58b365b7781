"""AlterShareGroupOffsets (key 91), version 0 (KIP-932): set the share-partition start offset
(SPSO) of a share group's partitions; the in-flight records above it are forgotten, so
everything from the new start on is delivered as new (``pylog.group.share.offsets.reset``).

Checks, as Kafka's: READ on the group (GROUP_AUTHORIZATION_FAILED for the request); the
group must be a share group this broker coordinates (GROUP_ID_NOT_FOUND,
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) and have no
members (NON_EMPTY_GROUP: running consumers would move the offsets on), all answered in the
top-level error. Per partition: READ on the topic (TOPIC_AUTHORIZATION_FAILED), an existing
partition (UNKNOWN_TOPIC_OR_PARTITION), a start offset >= 0 (INVALID_REQUEST).

Each partition's new state goes to its share coordinator (InitializeShareGroupState with a
bumped state epoch, ``pylog.group.share.offsets.reset``), wherever it is; the answer comes once
the coordinators wrote it. A partition whose coordinator refused or could not be reached gets
that error (COORDINATOR_NOT_AVAILABLE after the retries), and its state is unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import _groups, _share_offsets
from pylog.broker.handlers._authz import AclOperation, ResourceType, denied, require_group
from pylog.group.share import lifecycle
from pylog.group.share import offsets as share_offsets
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import AlterShareGroupOffsetsResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = AlterShareGroupOffsetsResponse


async def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    gid = request.group_id
    require_group(ctx, AclOperation.READ, gid)
    group = _share_offsets.share_group(ctx, gid)
    if group.members:
        raise errors.NonEmptyGroupError(
            f"The share group {gid} has {len(group.members)} active members: its offsets can "
            f"only be altered while it is empty.")
    refused = denied(ctx, AclOperation.READ, ResourceType.TOPIC, (t.topic_name for t in request.topics))
    share = ctx.broker.share
    results: dict[tuple[str, int], tuple[int, str | None]] = {}
    done: dict[Any, set[int]] = {}
    for t in request.topics:
        topic = _share_offsets.topic_info(ctx, t.topic_name)
        for p in t.partitions:
            where = (t.topic_name, p.partition_index)
            if t.topic_name in refused:
                results[where] = (errors.TopicAuthorizationFailedError.code,
                                  "Not authorized to read this topic.")
            elif topic is None or not 0 <= p.partition_index < topic[1]:
                results[where] = (errors.UnknownTopicOrPartitionError.code,
                                  "This server does not host this topic-partition.")
            elif p.start_offset < 0:
                results[where] = (errors.InvalidRequestError.code,
                                  f"Start offset {p.start_offset} is negative.")
            else:
                try:
                    await share_offsets.reset(share, gid, topic[0], p.partition_index, p.start_offset)
                    results[where] = (0, None)
                    done.setdefault(topic[0], set()).add(p.partition_index)
                except errors.ApiError as exc:
                    results[where] = (exc.code, str(exc))
    if done:
        # The altered partitions have state now: initialized in the group's record, as
        # Kafka's alterShareGroupOffsets records them (assigned without a new initialize).
        names = {tid: name for name, (tid, _n) in _groups.topics_view(ctx).items()}
        await lifecycle.mark_initialized(ctx.broker, _share_offsets.coordinator(ctx, gid), gid, done, names)
    return _R(throttle_time_ms=0, error_code=0, responses=[
        _R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=_share_offsets.topic_id(ctx, t.topic_name),
            partitions=[_R.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index,
                error_code=results[(t.topic_name, p.partition_index)][0],
                error_message=results[(t.topic_name, p.partition_index)][1])
                for p in t.partitions])
        for t in request.topics])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message or None, responses=[
        _R.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name, partitions=[
            _R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                       error_code=code, error_message=message or None)
            for p in t.partitions])
        for t in request.topics])
