"""Request handlers: one module per API (``handle_<api_name>``) and the dispatcher.

Each handler module defines ``API_KEY``, ``VERSIONS`` (the range we advertise, exactly what
works: read from ``pylog.protocol.apis.ADVERTISED``), ``async def handle_<api_name>(ctx,
request) -> response | None`` (``ctx``: a ``RequestContext``; None: no response, as Produce
with acks=0) and ``error_response(ctx, request, code, message)`` (the response
that carries one error code everywhere, Kafka's ``AbstractRequest.getErrorResponse``).

Interception: when ``broker.interceptor`` is set (``pylog.broker.intercept``; pylog.testing's
fault injection fills it), the dispatcher hands it each decoded request before the handler;
it may delay the request or answer it itself (an error response built by the API's own
``error_response``). Unset, it costs one attribute read per request.

Quotas: the dispatcher counts each request's handler time against the client's
``request_percentage`` (``pylog.broker.quotas``) and writes the connection's throttle time
(``ctx.throttle_ms``) into the response's ``throttle_time_ms``; with no request quota
configured this costs two attribute reads.

The dispatcher is the one place that catches broad exceptions (handlers do not): an
exception escaping a handler becomes ``error_response`` with the code
``pylog.errors.code_for_exception`` picks; exceptions without a code are logged as bugs with
their traceback and answered with UNKNOWN_SERVER_ERROR.

Event-loop affinity: handlers run on the broker's loop.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from pylog import errors
from pylog.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_share_group_state,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_share_group_offsets,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    initialize_share_group_state,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    read_share_group_state,
    read_share_group_state_summary,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_share_group_state,
    write_txn_markers,
)
from pylog.broker.handlers._context import RequestContext
from pylog.broker.intercept import PASS
from pylog.broker.quotas import record_request_time, throttle
from pylog.protocol.apis import CLUSTER_ADVERTISED

log = logging.getLogger("pylog.broker.handlers")

_MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    list_transactions,
    metadata,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    offset_for_leader_epoch,
    describe_configs,
    alter_configs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    init_producer_id,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    list_groups,
    describe_groups,
    delete_groups,
    offset_delete,
    write_txn_markers,
    describe_producers,
    describe_log_dirs,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    describe_transactions,
    txn_offset_commit,
    leader_and_isr,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    describe_client_quotas,
    alter_client_quotas,
    consumer_group_heartbeat,
    consumer_group_describe,
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_acls,
    create_acls,
    delete_acls,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
)


def _handler(module: ModuleType) -> Any:
    name = module.__name__.rsplit(".", 1)[1]
    return getattr(module, f"handle_{name}")


HANDLERS: dict[int, tuple[Any, ModuleType]] = {int(m.API_KEY): (_handler(m), m) for m in _MODULES}
# {api_key: (min_version, max_version)} of the handlers: pylog.protocol.apis.ADVERTISED, the one
# table that ApiVersions lists and the connection layer enforces; handler modules read their
# VERSIONS from it, and tests/unit/pylog/broker/test_broker_handlers.py checks that they all do.
# The controller's APIs (pylog.protocol.apis.CLUSTER_ADVERTISED) are served in cluster mode
# only and are not in it.
# Requests between brokers, exempt from the request quota (Kafka's ``clusterAction`` APIs;
# a follower's Fetch is exempt in the Fetch handler).
QUOTA_EXEMPT = frozenset(int(m.API_KEY) for m in (
    leader_and_isr, stop_replica, update_metadata, controlled_shutdown, write_txn_markers,
    initialize_share_group_state, read_share_group_state, write_share_group_state,
    delete_share_group_state, read_share_group_state_summary))

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    int(m.API_KEY): m.VERSIONS for m in _MODULES if m.API_KEY not in CLUSTER_ADVERTISED}


async def dispatch(ctx: RequestContext, request: Any) -> Any:
    """Run the handler for ``ctx.api_key``; map any exception to an error response."""
    entry = HANDLERS.get(ctx.api_key)
    if entry is None:  # the connection layer refuses unknown keys before this
        raise errors.LocalProtocolError(f"no handler for api key {ctx.api_key}")
    handler, module = entry
    interceptor = ctx.broker.interceptor
    if interceptor is not None:
        answer = await interceptor.intercept(ctx, request, module.error_response)
        if answer is not PASS:
            return answer
    quotas = ctx.broker.quotas
    timed = quotas.request.enabled and ctx.api_key not in QUOTA_EXEMPT
    if timed:
        ctx.started_ms = quotas.now_ms()
    try:
        response = await handler(ctx, request)
    except errors.ApiError as exc:
        code, message = exc.code, str(exc)
        response = module.error_response(ctx, request, code, message)
    except Exception as exc:  # noqa: BLE001 - the one broad catch of the request path
        code = errors.code_for_exception(exc)
        message = str(exc)
        if code == errors.UnknownServerError.code:
            log.exception("bug: %s v%d from %s raised", module.__name__.rsplit(".", 1)[1],
                          ctx.api_version, ctx.peer)
            message = f"{type(exc).__name__}: {exc}"
        response = module.error_response(ctx, request, code, message)
    if timed:
        throttle(ctx, quotas.request, record_request_time(ctx))  # once: Produce/Fetch may have
    if ctx.throttle_ms and response is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = ctx.throttle_ms
    return response
