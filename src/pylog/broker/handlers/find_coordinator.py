"""FindCoordinator (key 10), versions 0-4 (v4: several keys in one request, KIP-699).

Key type 0 (group): this node coordinates every group (it leads every partition of
``__consumer_offsets``); the topic is created here on first use. Kafka's broker asks its
controller to create it and answers COORDINATOR_NOT_AVAILABLE meanwhile (the client
retries); a single node creates it at once and answers with itself.
Key type 1 (transaction): likewise for ``__transaction_state`` (created on the first lookup
with transaction.state.log.num.partitions partitions): this node coordinates every
transactional id. Key type 2 (share, KIP-932; an inter-broker lookup, CLUSTER_ACTION on the
cluster): the share coordinator of the share partition ``groupId:topicId:partition`` (topic
id in Kafka's base64; a malformed key is INVALID_REQUEST), the leader of its partition of
``__share_group_state`` (made here on first use). Other key types: INVALID_REQUEST.

Cluster mode: the leader of the key's partition, from the metadata cache; the topic is
created through ZooKeeper on first use (``pylog.controller.admin.find_coordinator``).
"""

from __future__ import annotations

import logging
from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import coordinator_key_error
from pylog.broker.handlers._context import RequestContext
from pylog.log.topics import topic_id_from_str
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import FindCoordinatorResponse

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

log = logging.getLogger("pylog.broker.find_coordinator")

_R = FindCoordinatorResponse
GROUP, TRANSACTION, SHARE = 0, 1, 2


def share_key_error(key: str) -> str | None:
    """Why ``key`` is not a share coordinator key ``groupId:topicId:partition``; None if it is."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return f"Share coordinator key {key!r} is not groupId:topicId:partition."
    try:
        topic_id_from_str(parts[1])
        partition = int(parts[2])
    except ValueError:
        return f"Share coordinator key {key!r} has a malformed topic id or partition."
    if partition < 0:
        return f"Share coordinator key {key!r} has a negative partition."
    return None


async def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None]:
    """(error code, message) for one key; 0 means this node."""
    denied_code = coordinator_key_error(ctx, key, key_type)
    if denied_code:
        return denied_code, None
    if key_type == SHARE:
        bad = share_key_error(key)
        if bad is not None:
            return errors.InvalidRequestError.code, bad
        store = ctx.broker.share.state
        if store is None:
            return errors.CoordinatorNotAvailableError.code, "share groups are disabled"
        try:
            await store.ensure_topic()
        except errors.ApiError as exc:
            log.error("cannot create __share_group_state: %s", exc)
            return errors.CoordinatorNotAvailableError.code, str(exc)
        return 0, None
    if key_type == TRANSACTION:
        try:
            await ctx.broker.txns.ensure_topic()
        except errors.ApiError as exc:
            log.error("cannot create __transaction_state: %s", exc)
            return errors.CoordinatorNotAvailableError.code, str(exc)
        return 0, None
    if key_type != GROUP:
        return errors.InvalidRequestError.code, f"unknown coordinator key type {key_type}"
    try:
        await ctx.broker.groups.ensure_topic()
    except errors.ApiError as exc:
        log.error("cannot create __consumer_offsets: %s", exc)
        return errors.CoordinatorNotAvailableError.code, str(exc)
    return 0, None


async def _cluster_find(ctx: RequestContext, request: Any) -> Any:
    from pylog.controller.admin import find_coordinator

    if ctx.api_version >= 4:
        keys, key_type = list(request.coordinator_keys), request.key_type
    else:
        keys, key_type = [request.key], request.key_type if ctx.api_version >= 1 else GROUP
    out = []
    for key in keys:
        message: str | None
        denied_code = coordinator_key_error(ctx, key, key_type)
        if denied_code:
            code, message, b = denied_code, None, None
        elif key_type not in (GROUP, TRANSACTION, SHARE):
            code, message, b = (errors.InvalidRequestError.code,
                                f"unknown coordinator key type {key_type}", None)
        elif key_type == SHARE and share_key_error(key) is not None:
            code, message, b = errors.InvalidRequestError.code, share_key_error(key), None
        else:
            code, message, b = await find_coordinator(ctx.broker, key, key_type)
            if b is not None:  # the coordinator at the client's listener (Kafka's rule)
                at = b.at(ctx.listener)
                if at is None:
                    code, message = (errors.CoordinatorNotAvailableError.code,
                                     f"broker {b.broker_id} has no listener {ctx.listener}")
                b = at
        out.append(_R.Coordinator(key=key, node_id=b.broker_id if b else -1,
                                  host=b.host if b else "", port=b.port if b else -1,
                                  error_code=code, error_message=message))
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=out)
    c = out[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=c.error_code,
                                   error_message=c.error_message, node_id=c.node_id, host=c.host,
                                   port=c.port)


async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.cluster is not None:
        return await _cluster_find(ctx, request)
    host, port = ctx.broker.advertised(ctx.listener if ctx.broker.listen else None)
    node = ctx.broker.node_id
    if ctx.api_version >= 4:
        out = []
        for key in request.coordinator_keys:
            code, message = await _find(ctx, key, request.key_type)
            if code:
                out.append(_R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                                          error_message=message))
            else:
                out.append(_R.Coordinator(key=key, node_id=node, host=host, port=port, error_code=0,
                                          error_message=None))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=out)
    key_type = request.key_type if ctx.api_version >= 1 else GROUP
    code, message = await _find(ctx, request.key, key_type)
    if code:
        return error_response(ctx, request, code, message or "")
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=0, error_message=None, node_id=node,
                                   host=host, port=port)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            _R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=message)
            for k in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message, node_id=-1,
                                   host="", port=-1)
