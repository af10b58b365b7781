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
import threading
import weakref
from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import (
    AclOperation,
    ResourceType,
    allowed_by_type,
    cluster_allowed,
    require_transactional_id,
)
from pylog.broker.handlers._context import RequestContext
from pylog.broker.producer_ids import ProducerIdAllocator, ProducerIdExhaustedError
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import InitProducerIdResponse

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

log = logging.getLogger("pylog.broker.init_producer_id")

# One allocator per broker. Two allocators on one directory would hand out the same ids,
# so the get-or-create is locked: a process may run several brokers (embedded clients,
# tests), each on its own event-loop thread, and nothing must depend on that.
_ALLOCATORS: weakref.WeakKeyDictionary[Any, ProducerIdAllocator] = weakref.WeakKeyDictionary()
_CLUSTER_IDS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_PER_BROKER_GUARD = threading.Lock()

_ALLOCATION = "producer-id-allocation"  # the io_threads ordering key of next_id calls


def allocator(broker: Any) -> ProducerIdAllocator:
    """The broker's producer id allocator (one per broker, in its log directory)."""
    with _PER_BROKER_GUARD:
        alloc = _ALLOCATORS.get(broker)
        if alloc is None:
            alloc = _ALLOCATORS[broker] = ProducerIdAllocator(broker.log_manager.log_dir)
        return alloc


async def new_producer_id(broker: Any) -> int:
    """A producer id never handed out before by this broker.

    In cluster mode the ids come from ZooKeeper's ``/latest_producer_id_block``
    (``pylog.controller.producer_ids``), so no two brokers hand out the same id.

    Raises:
        pylog.errors.CoordinatorNotAvailableError: (cluster mode) ZooKeeper cannot be written.
        pylog.errors.UnknownServerError: every producer id has been used.
        pylog.errors.KafkaStorageError: the id block file cannot be read or written.
    """
    if getattr(broker, "cluster", None) is not None:  # cluster mode: blocks from ZooKeeper, unique cluster-wide
        from pylog.controller.producer_ids import ClusterProducerIds

        with _PER_BROKER_GUARD:
            ids = _CLUSTER_IDS.get(broker)
            if ids is None:
                ids = _CLUSTER_IDS[broker] = ClusterProducerIds(broker.cluster, broker.node_id)
        return await ids.next_id()
    try:
        # Taking a new block of ids fsyncs a file: on an I/O thread, one call at a time.
        pid: int = await broker.io.run_ordered(_ALLOCATION, allocator(broker).next_id)
    except ProducerIdExhaustedError as exc:
        raise errors.UnknownServerError(str(exc)) from None
    except (OSError, ValueError) as exc:
        log.error("cannot allocate a producer id: %s", exc)
        raise errors.KafkaStorageError(str(exc)) from None
    return pid


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        require_transactional_id(ctx, request.transactional_id)  # WRITE on the id
        return await _transactional(ctx, request)
    # Idempotence: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 4).
    if not (cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE)
            or allowed_by_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        return error_response(ctx, request, errors.ClusterAuthorizationFailedError.code,
                              "Cluster authorization failed.")
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
