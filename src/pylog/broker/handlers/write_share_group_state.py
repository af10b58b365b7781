"""WriteShareGroupState (key 85), version 0: a share-partition leader writes a share
partition's state to its share coordinator (KIP-932), answered once the record is in the
log. See ``_share_state``; the rules are ``ShareStateStore.write_state``'s:
FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for epochs below the stored ones, the batches
merged over the stored state, INVALID_REQUEST for malformed batches and for a share
partition never initialized (or deleted: a leader that still holds it cannot write it
back), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _share_state
from pylog.group.share.share_partition import StateBatch
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import WriteShareGroupStateResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = WriteShareGroupStateResponse


def _result(p: Any, r: Any) -> Any:
    return _R.PartitionResult(partition=p.partition, error_code=r.error_code, error_message=r.error_message)


def _topic(t: Any, parts: list[Any]) -> Any:
    return _R.WriteStateResult(topic_id=t.topic_id, partitions=parts)


async def handle_write_share_group_state(ctx: RequestContext, request: Any) -> Any:
    store = _share_state.store(ctx)
    gid = request.group_id

    def call(t: Any, p: Any) -> Any:
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in p.state_batches]
        return store.write_state((gid, t.topic_id, p.partition), p.state_epoch, p.leader_epoch,
                                 p.start_offset, batches)

    return _R(results=await _share_state.per_partition(request, call, _result, _topic))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(results=_share_state.error_results(request, code, message, _result, _topic))
