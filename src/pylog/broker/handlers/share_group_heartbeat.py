"""ShareGroupHeartbeat (key 76), version 1 (KIP-932): a share-group member joins (epoch 0),
heartbeats, or leaves (epoch -1); the answer carries its epoch and, when it changed, its
assignment. The rules are in ``pylog.group.share.coordinator``; the answer waits for the
group's records and, when the heartbeat found subscribed partitions whose share-partition
state is not initialized yet, for their InitializeShareGroupState
(``pylog.group.share.lifecycle``; a failure is the answer's error, as in Kafka 4.1). Only
initialized partitions are assigned: those initialized now come with the next heartbeat.
The share partitions of the member's target assignment that this broker leads are loaded
at once, before the records are in the log (``pylog.group.share.service``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import require_subscription
from pylog.group.share import lifecycle
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ShareGroupHeartbeatResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ShareGroupHeartbeatResponse


async def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    require_subscription(ctx, request.group_id, request.subscribed_topic_names)
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return error_response(ctx, request, _groups.not_hosted(ctx), "")
    pending = coord.share_group_heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        _groups.topics_view(ctx),
        rack_id=request.rack_id,
        subscribed_topic_names=request.subscribed_topic_names,
        client_id=ctx.client_id or "",
        client_host=_groups.client_host(ctx),
    )
    # The member's target assignment is decided now (in memory; its records are being
    # written): its share partitions start here, in the same loop step, so nothing produced
    # after the group took the partitions is skipped by "latest", whoever looks first.
    group = coord.share.groups.get(request.group_id)
    target = None if group is None else group.target.get(request.member_id)
    if target:
        ctx.broker.share.initialize(request.group_id, target)
    r = await _groups.wait(ctx, coord, pending)
    if r.delete_state:
        lifecycle.delete_state_later(ctx.broker, {request.group_id: r.delete_state})
    if r.error_code == 0 and r.initialize:
        code, message = await lifecycle.initialize(ctx.broker, coord, request.group_id, r.state_epoch,
                                                   r.initialize, _groups.topic_names(ctx), r.adopt)
        if code:
            return _R(throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
                      member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if r.assignment is not None:
        assignment = _R.Assignment(topic_partitions=[
            _R.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items(), key=lambda x: str(x[0]))
        ])
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
    return _R(throttle_time_ms=0, error_code=code, error_message=message or None,
              member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
