"""InitProducerId (key 22), versions 0-5: producer ids for idempotent and transactional producers.

Without a ``transactional_id`` the request gets a new producer id (unique across restarts,
see :mod:`pylog.broker.producer_ids`) and epoch 0, as Kafka's coordinator answers an
idempotent producer; the partition logs then check each batch's epoch and sequence
(``logcore.producer_state``). Re-initialising with an existing (producer_id, epoch) (v3+,
KIP-360) also gets a fresh id: the old one's sequence state stays with the old id.

With a ``transactional_id`` the transaction coordinator (``broker.txns``, pylog.txn) answers:
a new id gets a producer id and epoch 0; a known one gets its epoch bumped (fencing older
producers; an open transaction is aborted first and the answer is CONCURRENT_TRANSACTIONS, the
client retries). v3+ clients may send their current producer id and epoch (KIP-360).
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for v0-3 clients, which do not know it.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.broker.producer_ids import (
    BlockProducerIdAllocator,
    ProducerIdAllocator,
    ProducerIdBlockUnavailableError,
    ProducerIdExhaustedError,
)
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import InitProducerIdResponse

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

log = logging.getLogger("pylog.broker.init_producer_id")

_ALLOCATORS: weakref.WeakKeyDictionary[
    Any, ProducerIdAllocator | BlockProducerIdAllocator] = weakref.WeakKeyDictionary()


_ALLOCATION = "producer-id-allocation"  # the io_threads ordering key of next_id calls


def allocator(broker: Any) -> ProducerIdAllocator | BlockProducerIdAllocator:
    """The broker's producer id allocator: blocks claimed in ZooKeeper in cluster mode (ids
    unique across the cluster), else a block file in the log directory."""
    alloc = _ALLOCATORS.get(broker)
    if alloc is None:
        cluster = getattr(broker, "cluster", None)
        if cluster is not None:
            def claim() -> tuple[int, int]:
                block = cluster.store.claim_producer_id_block(cluster.broker_id)
                log.info("claimed producer ids %d..%d", block.block_start, block.block_end)
                return block.block_start, block.block_end
            alloc = BlockProducerIdAllocator(claim)
        else:
            alloc = ProducerIdAllocator(broker.log_manager.log_dir)
        _ALLOCATORS[broker] = alloc
    return alloc


async def new_producer_id(broker: Any) -> int:
    """A producer id never handed out before by this broker.

    Raises:
        pylog.errors.UnknownServerError: every producer id has been used.
        pylog.errors.KafkaStorageError: the id block file cannot be read or written.
    """
    try:
        # Taking a new block of ids fsyncs a file: on an I/O thread, one call at a time.
        pid: int = await broker.io.run_ordered(_ALLOCATION, allocator(broker).next_id)
    except ProducerIdExhaustedError as exc:
        raise errors.UnknownServerError(str(exc)) from None
    except ProducerIdBlockUnavailableError as exc:
        # Kafka's answer while its producer id manager has no block: the client retries.
        log.warning("%s", exc)
        raise errors.CoordinatorLoadInProgressError(str(exc)) from None
    except (OSError, ValueError) as exc:
        log.error("cannot allocate a producer id: %s", exc)
        raise errors.KafkaStorageError(str(exc)) from None
    return pid


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return await _transactional(ctx, request)
    try:
        pid = await new_producer_id(ctx.broker)
    except errors.ApiError as exc:
        return error_response(ctx, request, exc.code, str(exc))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                  producer_epoch=0)


async def _transactional(ctx: RequestContext, request: Any) -> Any:
    expected = None
    pid, epoch = request.producer_id, request.producer_epoch  # -1, -1 below v3
    if (pid == -1) != (epoch == -1):
        return error_response(ctx, request, errors.InvalidRequestError.code,
                              "give both the producer id and epoch, or neither")
    if pid != -1:
        expected = (pid, epoch)
    result = await ctx.broker.txns.init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                                    expected)
    code = result.error_code
    if code == errors.ProducerFencedError.code and ctx.api_version < 4:
        code = errors.InvalidProducerEpochError.code
    if code:
        log.info("InitProducerId for transactional id %r from %s: error %d", request.transactional_id,
                 ctx.peer, code)
        return error_response(ctx, request, code, "")
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)
