"""ConsumerGroupDescribe (key 69), versions 0-1: KIP-848 consumer groups with their epochs,
assignor, and each member's subscription, current and target assignment; version 1 adds
each member's ``MemberType`` (KIP-1099): 0 for a member that speaks the classic protocol in
a consumer group (it joined with JoinGroup: a classic group upgraded online, or a classic
consumer that joined a consumer group), 1 for a consumer-protocol member (-1, unknown, is
not sent: pylog always knows). A group that is not a consumer group (unknown, or classic)
gets GROUP_ID_NOT_FOUND, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import AclOperation, allowed, authorized_ops
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ConsumerGroupDescribeResponse
from pylog.security.acl import ResourceType, authorized_operations

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ConsumerGroupDescribeResponse

# MemberType of version 1 (Kafka's ConsumerGroupDescribeResponseData; -1 is unknown).
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


def _assignment(tp: dict[Any, set[int]], names: dict[Any, str]) -> Any:
    return _R.Assignment(
        topic_partitions=[
            _R.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
            for t, ps in sorted(tp.items(), key=lambda x: names.get(x[0], str(x[0])))
            if ps
        ]
    )


async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    ops = authorized_operations(bool(request.include_authorized_operations), ResourceType.GROUP)
    names = _groups.topic_names(ctx)
    out = []
    for gid in request.group_ids:
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(_R.DescribedGroup(error_code=errors.GroupAuthorizationFailedError.code,
                                         group_id=gid))
            continue
        if ctx.broker.authorizer is not None:
            ops = authorized_ops(ctx, bool(request.include_authorized_operations),
                                 ResourceType.GROUP, gid)
        coord = _groups.coordinator(ctx, gid)
        if coord is None:
            out.append(_R.DescribedGroup(error_code=_groups.not_hosted(ctx), group_id=gid))
            continue
        if coord.loading:
            out.append(
                _R.DescribedGroup(
                    error_code=errors.CoordinatorLoadInProgressError.code, group_id=gid
                )
            )
            continue
        g = coord.consumer.groups.get(gid)
        if g is None:
            out.append(
                _R.DescribedGroup(
                    error_code=errors.GroupIdNotFoundError.code,
                    group_id=gid,
                    error_message=f"Group {gid} is not a consumer group.",
                )
            )
            continue
        out.append(
            _R.DescribedGroup(
                error_code=0,
                group_id=gid,
                group_state=g.state.value,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=coord.consumer.assignor_name(g),
                authorized_operations=ops,
                members=[
                    _R.Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=_assignment(m.assigned, names),
                        target_assignment=_assignment(g.target.get(m.member_id, {}), names),
                        member_type=MEMBER_TYPE_CLASSIC if m.uses_classic_protocol
                        else MEMBER_TYPE_CONSUMER,
                    )
                    for m in g.members.values()
                ],
            )
        )
    return _R(throttle_time_ms=0, groups=out)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(
        throttle_time_ms=0,
        groups=[
            _R.DescribedGroup(error_code=code, group_id=gid, error_message=message or None)
            for gid in request.group_ids
        ],
    )
