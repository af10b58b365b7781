"""DeleteShareGroupState (key 86), version 0: a share partition's state goes (its
tombstone is written; KIP-932). See ``_share_state``; INVALID_REQUEST, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS as ``ShareStateStore.delete_state`` answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers import _share_state
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DeleteShareGroupStateResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DeleteShareGroupStateResponse


def _result(p: Any, r: Any) -> Any:
    return _R.PartitionResult(partition=p.partition, error_code=r.error_code, error_message=r.error_message)


def _topic(t: Any, parts: list[Any]) -> Any:
    return _R.DeleteStateResult(topic_id=t.topic_id, partitions=parts)


async def handle_delete_share_group_state(ctx: RequestContext, request: Any) -> Any:
    store = _share_state.store(ctx)
    gid = request.group_id
    return _R(results=await _share_state.per_partition(
        request, lambda t, p: store.delete_state((gid, t.topic_id, p.partition)), _result, _topic))


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(results=_share_state.error_results(request, code, message, _result, _topic))
