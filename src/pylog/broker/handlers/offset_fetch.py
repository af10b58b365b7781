"""OffsetFetch (key 9), versions 1-9: a group's committed offsets (v8+: several groups).

Topics None (v2+) asks for every committed partition. A partition with no commit answers
offset -1 and no error, as Kafka does. v1 has no top-level error: a group-level error is
put on every partition.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed, filter_allowed
from pylog.broker.handlers._context import RequestContext
from pylog.group.results import OffsetFetchGroupResult, OffsetFetchPartition
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import OffsetFetchResponse

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = OffsetFetchResponse


def _fetch(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool,
           member_id: str | None = None, member_epoch: int = -1) -> OffsetFetchGroupResult:
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return OffsetFetchGroupResult(group_id, errors.GroupAuthorizationFailedError.code)
    coord = _groups.coordinator(ctx, group_id)
    if coord is None:
        return OffsetFetchGroupResult(group_id, _groups.not_hosted(ctx))
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    result = _groups.driven(ctx, coord, coord.offset_fetch(group_id, wanted, require_stable,
                                                           member_id, member_epoch))
    if ctx.broker.authorizer is None or result.error_code:
        return result
    # Topics the principal may not DESCRIBE: left out of an all-topics fetch, their
    # partitions TOPIC_AUTHORIZATION_FAILED when named (Kafka's handleOffsetFetchRequest).
    ok = filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                        [p.topic for p in result.partitions], log_denied=topics is not None)
    if topics is None:
        result.partitions = [p for p in result.partitions if p.topic in ok]
    else:
        result.partitions = [p if p.topic in ok else OffsetFetchPartition(
            p.topic, p.partition, error_code=errors.TopicAuthorizationFailedError.code)
            for p in result.partitions]
    return result


def _by_topic(result: OffsetFetchGroupResult, topics: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for p in result.partitions:
        out.setdefault(p.topic, []).append(p)
    if result.error_code and topics is not None:
        # v1-7 with a group error: every requested partition carries it (v1 has no
        # top-level error; v2-7 send both, as Kafka does).
        for t in topics:
            out[t.name] = [OffsetFetchPartition(t.name, i, error_code=result.error_code)
                           for i in t.partition_indexes]
    return out


async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    stable = request.require_stable if v >= 7 else False
    if v >= 8:
        groups = []
        for g in request.groups:
            member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
            r = _fetch(ctx, g.group_id, g.topics, stable, *member)
            groups.append(_R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=r.error_code, topics=[
                _R.OffsetFetchResponseTopics(name=name, partitions=[
                    _R.OffsetFetchResponsePartitions(
                        partition_index=p.partition, committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                        error_code=p.error_code)
                    for p in parts])
                for name, parts in _by_topic(r, None).items()]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    r = _fetch(ctx, request.group_id, request.topics, stable)
    return OffsetFetchResponse(throttle_time_ms=0, error_code=r.error_code, topics=[
        _R.OffsetFetchResponseTopic(name=name, partitions=[
            _R.OffsetFetchResponsePartition(
                partition_index=p.partition, committed_offset=p.committed_offset,
                committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                error_code=p.error_code)
            for p in parts])
        for name, parts in _by_topic(r, request.topics).items()])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    if ctx.api_version >= 8:
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            _R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code, topics=[]) for g in request.groups])
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
        _R.OffsetFetchResponseTopic(name=t.name, partitions=[
            _R.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, metadata="",
                                            error_code=code)
            for i in t.partition_indexes])
        for t in (request.topics or [])])
