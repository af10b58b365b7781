"""InitializeShareGroupState (key 83), version 0: a share partition's state starts (again)
at a start offset under a state epoch (KIP-932): the group coordinator's call before it
assigns the partition (start offset -1), and AlterShareGroupOffsets'. See
``_share_state``; the rules are ``ShareStateStore.initialize_state``'s: FENCED_STATE_EPOCH
when the state epoch is below the stored one, INVALID_REQUEST, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _share_state
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import InitializeShareGroupStateResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = InitializeShareGroupStateResponse


def _result(p: Any, r: Any) -> Any:
    return _R.PartitionResult(partition=p.partition, error_code=r.error_code, error_message=r.error_message)


def _topic(t: Any, parts: list[Any]) -> Any:
    return _R.InitializeStateResult(topic_id=t.topic_id, partitions=parts)


async def handle_initialize_share_group_state(ctx: RequestContext, request: Any) -> Any:
    store = _share_state.store(ctx)
    gid = request.group_id
    return _R(results=await _share_state.per_partition(
        request, lambda t, p: store.initialize_state((gid, t.topic_id, p.partition), p.state_epoch, p.start_offset),
        _result, _topic))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(results=_share_state.error_results(request, code, message, _result, _topic))
