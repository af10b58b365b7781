"""Request handlers: one module per API (``handle_<api_name>``) and the dispatcher.

Each handler module defines ``API_KEY``, ``VERSIONS`` (the range we advertise, exactly what
works), ``async def handle_<api_name>(ctx, request) -> response | None`` (None: no response,
as Produce with acks=0) and ``error_response(ctx, request, code, message)`` (the response
that carries one error code everywhere, Kafka's ``AbstractRequest.getErrorResponse``).

The dispatcher is the one place that catches broad exceptions (STYLE.md section 5): an
exception escaping a handler becomes ``error_response`` with the code
``pylog.errors.code_for_exception`` picks; exceptions without a code are logged as bugs with
their traceback and answered with UNKNOWN_SERVER_ERROR.

Event-loop affinity: handlers run on the broker's loop.
"""

from __future__ import annotations

import dataclasses
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)

if TYPE_CHECKING:
    from pylog.broker.server import Broker

log = logging.getLogger("pylog.broker.handlers")

_MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
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
)


def _handler(module: ModuleType) -> Any:
    name = module.__name__.rsplit(".", 1)[1]
    return getattr(module, f"handle_{name}")


HANDLERS: dict[int, tuple[Any, ModuleType]] = {m.API_KEY: (_handler(m), m) for m in _MODULES}
# What ApiVersions advertises: {api_key: (min_version, max_version)}.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {m.API_KEY: m.VERSIONS for m in _MODULES}


@dataclasses.dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    # Set by a handler to have the connection closed once this request is done, instead
    # of answering (Kafka's ``closeConnection``: Produce with acks=0 that failed).
    close_connection: bool = False


def is_supported(api_key: int, api_version: int) -> bool:
    rng = SUPPORTED_VERSIONS.get(api_key)
    return rng is not None and rng[0] <= api_version <= rng[1]


async def dispatch(ctx: RequestContext, request: Any) -> Any:
    """Run the handler for ``ctx.api_key``; map any exception to an error response."""
    entry = HANDLERS.get(ctx.api_key)
    if entry is None:  # the connection layer refuses unknown keys before this
        raise errors.LocalProtocolError(f"no handler for api key {ctx.api_key}")
    handler, module = entry
    try:
        return await handler(ctx, request)
    except errors.ApiError as exc:
        code, message = exc.code, str(exc)
    except Exception as exc:  # noqa: BLE001 - the one broad catch (STYLE.md section 5)
        code = errors.code_for_exception(exc)
        message = str(exc)
        if code == errors.UnknownServerError.code:
            log.exception("bug: %s v%d from %s raised", module.__name__.rsplit(".", 1)[1],
                          ctx.api_version, ctx.peer)
            message = f"{type(exc).__name__}: {exc}"
    return module.error_response(ctx, request, code, message)
