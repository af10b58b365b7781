"""ReadShareGroupState (key 84), version 0: a share-partition leader reads a share
partition's state from its share coordinator (KIP-932). See ``_share_state``; the rules are
``ShareStateStore.read_state``'s: FENCED_LEADER_EPOCH for a leader epoch below the stored
one (a higher one is stored), INVALID_REQUEST for a share partition never initialized (or
deleted) and for bad input, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _share_state
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ReadShareGroupStateResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ReadShareGroupStateResponse


def _result(p: Any, r: Any) -> Any:
    st = r.state
    if r.error_code or st is None:
        return _R.PartitionResult(partition=p.partition, error_code=r.error_code, error_message=r.error_message,
                                  state_epoch=0, start_offset=-1, state_batches=[])
    return _R.PartitionResult(partition=p.partition, error_code=0, error_message=None, state_epoch=st.state_epoch,
                              start_offset=st.start_offset, state_batches=[
                                  _R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                  for b in st.batches])


def _topic(t: Any, parts: list[Any]) -> Any:
    return _R.ReadStateResult(topic_id=t.topic_id, partitions=parts)


async def handle_read_share_group_state(ctx: RequestContext, request: Any) -> Any:
    store = _share_state.store(ctx)
    gid = request.group_id
    return _R(results=await _share_state.per_partition(
        request, lambda t, p: store.read_state((gid, t.topic_id, p.partition), p.leader_epoch), _result, _topic))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(results=_share_state.error_results(request, code, message, _result, _topic))
