"""InitProducerId (key 22), versions 0-5: producer ids for idempotent producers.

A request without a ``transactional_id`` gets a new producer id (unique across restarts,
see :mod:`pylog.broker.producer_ids`) and epoch 0, as Kafka's coordinator answers an
idempotent producer. The partition logs then check each batch's epoch and sequence
(``logcore.producer_state``). Re-initialising with an existing (producer_id, epoch)
(v3+, KIP-360) also gets a fresh id: the old one's sequence state stays with the old id.

Transactions are not implemented: a ``transactional_id`` is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the code Produce uses for transactional requests
(the response has no message field; the broker log says why).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.broker.producer_ids import ProducerIdAllocator, ProducerIdExhaustedError
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import InitProducerIdResponse

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

log = logging.getLogger("pylog.broker.init_producer_id")

_ALLOCATORS: weakref.WeakKeyDictionary[Any, ProducerIdAllocator] = weakref.WeakKeyDictionary()


_ALLOCATION = "producer-id-allocation"  # the io_threads ordering key of next_id calls


def allocator(broker: Any) -> ProducerIdAllocator:
    """The broker's producer id allocator (one per broker, in its log directory)."""
    alloc = _ALLOCATORS.get(broker)
    if alloc is None:
        alloc = _ALLOCATORS[broker] = ProducerIdAllocator(broker.log_manager.log_dir)
    return alloc


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        log.info("InitProducerId for transactional id %r from %s refused: transactions are not "
                 "supported", request.transactional_id, ctx.peer)
        return error_response(ctx, request, errors.TransactionalIdAuthorizationFailedError.code,
                              "transactions are not supported")
    try:
        # Taking a new block of ids fsyncs a file: on an I/O thread, one call at a time.
        pid = await ctx.broker.io.run_ordered(_ALLOCATION, allocator(ctx.broker).next_id)
    except ProducerIdExhaustedError as exc:
        return error_response(ctx, request, errors.UnknownServerError.code, str(exc))
    except (OSError, ValueError) as exc:
        log.error("cannot allocate a producer id: %s", exc)
        return error_response(ctx, request, errors.KafkaStorageError.code, str(exc))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                  producer_epoch=0)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)
