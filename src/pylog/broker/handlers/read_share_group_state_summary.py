"""ReadShareGroupStateSummary (key 87), version 0: a share partition's state epoch and start
offset, nothing written (KIP-932; what DescribeShareGroupOffsets needs). See
``_share_state``; ``ShareStateStore.read_summary``: FENCED_LEADER_EPOCH for a leader epoch
(>= 0) below the stored one, start offset -1 for a share partition never written,
INVALID_REQUEST, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _share_state
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ReadShareGroupStateSummaryResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ReadShareGroupStateSummaryResponse


def _result(p: Any, r: Any) -> Any:
    st = r.state
    if r.error_code or st is None:
        return _R.PartitionResult(partition=p.partition, error_code=r.error_code, error_message=r.error_message,
                                  state_epoch=0, start_offset=-1)
    return _R.PartitionResult(partition=p.partition, error_code=0, error_message=None,
                              state_epoch=st.state_epoch, start_offset=st.start_offset)


def _topic(t: Any, parts: list[Any]) -> Any:
    return _R.ReadStateSummaryResult(topic_id=t.topic_id, partitions=parts)


async def handle_read_share_group_state_summary(ctx: RequestContext, request: Any) -> Any:
    store = _share_state.store(ctx)
    gid = request.group_id

    async def call(t: Any, p: Any) -> Any:
        return store.read_summary((gid, t.topic_id, p.partition), p.leader_epoch)

    return _R(results=await _share_state.per_partition(request, call, _result, _topic))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(results=_share_state.error_results(request, code, message, _result, _topic))
