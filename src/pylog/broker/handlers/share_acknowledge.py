"""ShareAcknowledge (key 79), versions 1-2 (KIP-932): acknowledge records of the member's
share session without fetching (ACCEPT, RELEASE, REJECT, GAP; v2 adds RENEW, which extends
the locks and is INVALID_REQUEST in version 1). The share session epoch must continue the session (0 is refused with
INVALID_SHARE_SESSION_EPOCH; -1 closes it after these acknowledgements and releases what the
member still holds). Each partition answers its own error (INVALID_RECORD_STATE for an
offset the member does not hold); the rules are ``pylog.group.share.share_partition``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _share
from pylog.group.share.sessions import FINAL_EPOCH
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ShareAcknowledgeResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ShareAcknowledgeResponse


async def handle_share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    _share.require_access(ctx, request.group_id, request.topics)
    since = ctx.broker.share.mark()  # this request's writes, even those flushed before it waits
    gid, mid, epoch = request.group_id, request.member_id, request.share_session_epoch
    acks = _share.collect(request.topics)
    _share.session_step(ctx, gid or "", mid or "", epoch, acks, [], fetch=False)
    results = _share.renew_in_v1(ctx, acks)
    for (topic_id, index), batches in acks.items():
        if (topic_id, index) not in results:
            results[(topic_id, index)] = await _share.acknowledge(ctx, gid, mid, topic_id, index,
                                                                  batches) if batches else (0, None)
    if epoch == FINAL_EPOCH:
        _share.close_session(ctx, gid, mid)
    failed = await ctx.broker.share.flushed(since)  # answered once the acknowledgements are durable
    by_topic: dict[Any, list[Any]] = {}
    for (topic_id, index), result in results.items():
        code, message = _share.write_failure(failed, gid, topic_id, index, result)
        by_topic.setdefault(topic_id, []).append(_R.PartitionData(
            partition_index=index, error_code=code, error_message=message,
            current_leader=_R.LeaderIdAndEpoch(leader_id=ctx.broker.node_id, leader_epoch=0)))
    return _R(throttle_time_ms=0, error_code=0, error_message=None,
              acquisition_lock_timeout_ms=ctx.broker.share.lock_duration_ms(gid),
              responses=[_R.ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts)
                         for t, parts in by_topic.items()],
              node_endpoints=[])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message or None,
              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
