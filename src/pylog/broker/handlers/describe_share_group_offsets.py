"""DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; v1, Kafka 4.2, adds Lag): each
share partition's start offset (SPSO), leader epoch and lag, from the share coordinator
(``pylog.group.share.offsets``: ReadShareGroupStateSummary, wherever it is).

Checks, as Kafka's: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for that group); a
group this broker does not coordinate, a loading coordinator, a group that is not a share
group (GROUP_ID_NOT_FOUND) are answered per group. Topics: null asks for every partition the
group has state for among the topics it subscribes to and the share partitions this broker
holds (topics the client may not DESCRIBE are left out); a named topic the
client may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED per partition, an unknown topic or
partition UNKNOWN_TOPIC_OR_PARTITION; a share coordinator that cannot be reached
COORDINATOR_NOT_AVAILABLE per partition. A partition the group has no state for answers start
offset -1 (and lag -1) without error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import _groups, _share_offsets
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed, denied
from pylog.group.share import offsets as share_offsets
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeShareGroupOffsetsResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeShareGroupOffsetsResponse


async def _partition(ctx: RequestContext, group_id: str, topic: tuple[Any, int] | None, partition: int) -> Any:
    if topic is None or not 0 <= partition < topic[1]:
        return _R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=partition, start_offset=-1, leader_epoch=-1,
            error_code=errors.UnknownTopicOrPartitionError.code,
            error_message="This server does not host this topic-partition.")
    try:
        found = await share_offsets.describe(ctx.broker.share, group_id, topic[0], partition)
    except errors.ApiError as exc:
        return _R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=partition, start_offset=-1, leader_epoch=-1,
            error_code=exc.code, error_message=str(exc))
    if found is None:
        return _R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=partition, start_offset=-1, leader_epoch=-1, lag=-1, error_code=0)
    return _R.DescribeShareGroupOffsetsResponsePartition(
        partition_index=partition, start_offset=found.start_offset,
        leader_epoch=found.leader_epoch, lag=found.lag, error_code=0)


def _denied_topic(ctx: RequestContext, name: str, partitions: list[int]) -> Any:
    code = errors.TopicAuthorizationFailedError.code
    return _R.DescribeShareGroupOffsetsResponseTopic(
        topic_name=name, topic_id=_share_offsets.topic_id(ctx, name), partitions=[
            _R.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, start_offset=-1, leader_epoch=-1, error_code=code,
                error_message="Not authorized to describe this topic.") for p in partitions])


async def _group(ctx: RequestContext, g: Any) -> Any:
    gid = g.group_id
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        return _R.DescribeShareGroupOffsetsResponseGroup(
            group_id=gid, topics=[], error_code=errors.GroupAuthorizationFailedError.code,
            error_message=f"Not authorized to describe group {gid}.")
    try:
        group = _share_offsets.share_group(ctx, gid)
    except errors.ApiError as exc:
        return _R.DescribeShareGroupOffsetsResponseGroup(
            group_id=gid, topics=[], error_code=exc.code, error_message=str(exc))
    share = ctx.broker.share
    if g.topics is None:  # every partition the group has state for
        names: dict[str, list[int]] = {}
        view = _groups.topics_view(ctx)
        by_id = {tid: name for name, (tid, _n) in view.items()}
        subscribed = {view[n][0]: view[n][1] for n in group.subscribed_topic_names() if n in view}
        try:
            found = await share_offsets.initialized_partitions(share, gid, subscribed)
        except errors.ApiError as exc:
            return _R.DescribeShareGroupOffsetsResponseGroup(
                group_id=gid, topics=[], error_code=exc.code, error_message=str(exc))
        for tid, held in found.items():
            if tid in by_id:
                names[by_id[tid]] = sorted(held)
        refused = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        wanted = [(n, ps) for n, ps in sorted(names.items()) if n not in refused]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        refused = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                         (n for n, _ in wanted))
    topics = []
    for name, parts in wanted:
        if name in refused:
            topics.append(_denied_topic(ctx, name, parts))
            continue
        topic = _share_offsets.topic_info(ctx, name)
        topics.append(_R.DescribeShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=_share_offsets.topic_id(ctx, name),
            partitions=[await _partition(ctx, gid, topic, p) for p in parts]))
    return _R.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=topics, error_code=0)


async def handle_describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    return _R(throttle_time_ms=0, groups=[await _group(ctx, g) for g in request.groups])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, groups=[
        _R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[], error_code=code,
                                                  error_message=message or None)
        for g in request.groups])
