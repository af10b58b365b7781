"""ConsumerGroupHeartbeat (key 68), versions 0-1: a KIP-848 consumer-group member joins,
heartbeats with its subscription and owned partitions, or leaves; the answer carries its
epoch and, when it changed, its assignment. The rules are in
``pylog.group.consumer_coordinator``; the answer waits for the group's records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import require_subscription
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ConsumerGroupHeartbeatResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ConsumerGroupHeartbeatResponse


async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    require_subscription(ctx, request.group_id, request.subscribed_topic_names)
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    pending = coord.consumer_group_heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        _groups.topics_view(ctx),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor,
        topic_partitions=request.topic_partitions,
        client_id=ctx.client_id or "",
        client_host=_groups.client_host(ctx),
    )
    r = await _groups.wait(ctx, coord, pending)
    assignment = None
    if r.assignment is not None:
        assignment = _R.Assignment(
            topic_partitions=[
                _R.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(r.assignment.items(), key=lambda x: str(x[0]))
            ]
        )
    return _R(
        throttle_time_ms=0,
        error_code=r.error_code,
        error_message=r.error_message,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(
        throttle_time_ms=0,
        error_code=code,
        error_message=message or None,
        member_id=None,
        member_epoch=-1,
        heartbeat_interval_ms=0,
        assignment=None,
    )
