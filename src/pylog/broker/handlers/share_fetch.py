"""ShareFetch (key 78), versions 1-2 (KIP-932): acknowledge, then acquire and return records
of the share partitions of the member's share session.

Order of work, as Kafka's ``KafkaApis.handleShareFetchRequest``:

1. the share session step (``_share.session_step``: epoch 0 opens, -1 closes, else the
   next epoch; top-level SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH /
   INVALID_REQUEST);
2. the piggy-backed acknowledgements, per partition (its ``AcknowledgeErrorCode``:
   INVALID_RECORD_STATE for an offset the member does not hold, ...);
3. unless the session closes (-1) or ``MaxRecords`` is 0 (an acknowledge-only request, as
   librdkafka sends), records are acquired: per session partition, the log is read from the
   share partition's first acquirable offset (``SharePartition.next_fetch_offset``) up to the
   high watermark, with the Fetch handler's read path (``fetch._read``: a
   ``logcore.FileRegion`` sent with sendfile), and the AVAILABLE offsets in the region are
   acquired for the member. ``ShareAcquireMode`` (version 2, KIP-1206) says how many:
   0, batch-optimized (version 1's only mode), acquires ``MaxRecords`` and goes on to the
   end of the batch holding the last of them, and cuts the ``AcquiredRecords`` at batch
   boundaries into pieces of about ``BatchSize``; 1, record-limit, acquires at most
   ``MaxRecords`` in all, splitting a batch (its other records stay available), in
   ranges cut only by delivery counts. The answer carries whole batches
   and the ``AcquiredRecords`` ranges with their delivery counts; the client keeps only
   the records inside those ranges. Transaction markers in the region are archived, never
   acquired; with the group config ``share.isolation.level=read_committed`` the read stops
   at the last stable offset and aborted transactions' data is archived too
   (``pylog.group.share.transactions``, Kafka's ``SharePartition``): a share fetch answer
   has no aborted-transactions list for the client to filter with.

A renew fetch (version 2's ``IsRenewAck``, KIP-1222) only acknowledges: its RENEW
acknowledgements extend the locks of records the member holds, nothing is acquired and it
does not wait; its MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0
(INVALID_REQUEST otherwise, as an unknown ShareAcquireMode). RENEW in a version 1 request
is INVALID_REQUEST for its partition.

Long poll: with nothing acquired and ``MaxWaitMs`` left, the request waits for an append to
one of its partitions or for records to become available again (released, lock expired:
``pylog.group.share.service.waiter_key``), then tries again. It answers as soon as
something is acquired: ``MinBytes`` is read as 1 (holding acquired records back to wait for
more would only shorten their locks).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import logcore
from pylog import errors
from pylog.broker.handlers import _share
from pylog.broker.handlers._common import LEADER_EPOCH
from pylog.broker.handlers.fetch import _read
from pylog.group.share.service import waiter_key
from pylog.group.share.sessions import FINAL_EPOCH
from pylog.group.share.transactions import READ_COMMITTED, unreadable_ranges
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ShareFetchResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.SHARE_FETCH
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ShareFetchResponse
LOAD_WAIT_MS = 5000
# ShareAcquireMode (version 2, KIP-1206); 255 is "Renew" in the later Kafka spec.
ACQUIRE_BATCH_OPTIMIZED, ACQUIRE_RECORD_LIMIT, ACQUIRE_RENEW = 0, 1, 255


def _leader(ctx: RequestContext, topic: Any, partition: int) -> Any:
    replicas = ctx.broker.replicas
    if replicas.active:
        state = replicas.partitions.get((topic.name, partition))
        if state is not None:
            return _R.LeaderIdAndEpoch(leader_id=state.leader_id, leader_epoch=state.leader_epoch)
    return _R.LeaderIdAndEpoch(leader_id=ctx.broker.node_id, leader_epoch=LEADER_EPOCH)


def _partition(index: int, code: int = 0, *, ack: tuple[int, str | None] | None = None,
               leader: Any = None, records: Any = None, acquired: list[Any] | None = None) -> Any:
    return _R.PartitionData(
        partition_index=index, error_code=code,
        acknowledge_error_code=ack[0] if ack else 0,
        acknowledge_error_message=ack[1] if ack else None,
        current_leader=leader or _R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
        records=records if records is not None else b"",
        acquired_records=acquired or [])


# Bytes read per partition and pass (Kafka's max.partition.fetch.bytes default); the region
# is then cut after the batch of the last acquired record.
_READ_BYTES = 1 << 20
# Reads of one partition in one pass when what a read returned was all transaction
# markers or aborted data (archived, nothing acquired): bounds the pass's work.
_MAX_SKIP_READS = 8


async def _trim(ctx: RequestContext, plog: Any, region: Any, last: int, hw: int) -> Any:
    """``region`` without the batches after the one holding offset ``last`` (the last
    acquired): MaxRecords may stop the acquisition long before the region's end, and those
    records would only be sent to be dropped. The cut is found with a one-batch read at
    ``last + 1`` (the index and the batch header, no record bytes)."""
    if last >= region.last_offset:
        return region
    nxt = await _read(ctx, plog, last + 1, 1, hw, True)
    if not nxt.size or nxt.path != region.path \
            or not region.position < nxt.position < region.position + region.size:
        if nxt.size and nxt.path == region.path and nxt.position == region.position:
            return region.head(nxt.size, nxt.last_offset)  # one batch holds both
        return region
    if nxt.first_offset > last:
        return region.head(nxt.position - region.position, nxt.first_offset - 1)
    return region.head(nxt.position + nxt.size - region.position, nxt.last_offset)


async def _acquire_all(ctx: RequestContext, request: Any, session: Any, max_records: int,
                       record_limit: bool) -> tuple[dict[tuple[Any, int], Any], int, list[Any], bool]:
    """One pass over the session's partitions. Returns (answers by (topic id, partition),
    records acquired, wait keys, whether a partition has an error)."""
    share = ctx.broker.share
    batch_size = request.batch_size
    gid, mid = request.group_id, request.member_id
    lock_ms = share.lock_duration_ms(gid)
    committed = share.isolation_level(gid) == READ_COMMITTED
    now = round(ctx.broker.clock.monotonic() * 1000)
    remaining_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    remaining = max_records
    out: dict[tuple[Any, int], Any] = {}
    keys: list[Any] = []
    any_error = False
    any_data = False
    for key in list(session.partitions):
        topic_id, index = key
        topic = share.topic_of(topic_id)
        if topic is None:
            out[key] = _partition(index, errors.UnknownTopicIdError.code)
            any_error = True
            continue
        if not 0 <= index < len(topic.partitions):
            out[key] = _partition(index, errors.UnknownTopicOrPartitionError.code)
            any_error = True
            continue
        if not share.leads(topic, index):
            out[key] = _partition(index, errors.NotLeaderOrFollowerError.code,
                                  leader=_leader(ctx, topic, index))
            any_error = True
            continue
        keys.append(waiter_key(gid, topic_id, index))
        sp = share.loaded(gid, topic, index)
        if sp is None:
            failure = share.take_load_failure((gid, topic_id, index))
            if failure is not None:  # its state could not be read (e.g. never initialized)
                out[key] = _partition(index, _share.persister_error(failure[0]))
                any_error = True
            continue  # else loading (a new leader): woken when it is loaded
        keys.append((topic.name, index))
        if remaining <= 0 or remaining_bytes <= 0:
            continue
        if sp.expire_locks(now):
            share.changed((gid, topic_id, index), sp)
        bounds = share.leader_bounds(topic, index)
        if bounds is None:
            continue
        plog, hw = bounds
        # read_committed reads up to the last stable offset: an open transaction holds
        # what follows its first offset back until its marker is written.
        bound = plog.last_stable_offset(hw) if committed else hw
        acquired, region = [], None
        for _ in range(_MAX_SKIP_READS):
            offset = sp.next_fetch_offset()
            if offset is None or offset >= bound:
                break
            try:
                region = await _read(ctx, plog, offset, min(remaining_bytes, _READ_BYTES), bound,
                                     not any_data)
            except logcore.OffsetOutOfRangeError:
                sp.move_start(plog.log_start_offset)  # retention moved the start under us
                break
            if not region.size:
                break
            version = sp.version
            skip = unreadable_ranges(plog.txn_batches(region), plog.aborted_transactions(
                region.first_offset, region.last_offset + 1) if committed else (), committed)
            # Batch-optimized needs the read's batch boundaries (one more header walk) only
            # when the read may hold more than MaxRecords or BatchSize offsets.
            span = region.last_offset - offset + 1
            bounds = None if record_limit or span <= min(
                remaining, batch_size if batch_size > 0 else span) else plog.batch_bounds(region)
            acquired = sp.acquire(mid, offset, region.last_offset, remaining, now, lock_ms, skip,
                                  batches=bounds, batch_size=batch_size)
            if sp.version == version:
                break  # nothing acquirable in this read
            share.changed((gid, topic_id, index), sp)
            if acquired:
                break
            # The whole read was markers or aborted data, now archived: read on past it.
        if not acquired or region is None:
            continue
        region = await _trim(ctx, plog, region, acquired[-1].last_offset, bound)
        any_data = True
        remaining -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
        remaining_bytes -= region.size
        out[key] = _partition(index, leader=_leader(ctx, topic, index), records=region, acquired=[
            _R.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                               delivery_count=a.delivery_count) for a in acquired])
    return out, max_records - remaining, keys, any_error


def acquire_mode(ctx: RequestContext, request: Any) -> tuple[bool, bool]:
    """(record_limit, renew) of a request: its ShareAcquireMode (version 2, KIP-1206; a
    version 1 request is batch-optimized) and whether it is a renew-only fetch (KIP-1222:
    ``IsRenewAck``, or ShareAcquireMode 255, "Renew", of the later Kafka spec that has no
    ``IsRenewAck``).

    Raises:
        InvalidRequestError: an unknown ShareAcquireMode; a renew fetch whose MaxWaitMs,
            MinBytes, MaxBytes or MaxRecords is not 0 (Kafka's ``KafkaApis`` checks).
    """
    if ctx.api_version < 2:
        return False, False
    mode = request.share_acquire_mode & 0xFF  # an int8 on the wire: 255 decodes as -1
    if mode not in (ACQUIRE_BATCH_OPTIMIZED, ACQUIRE_RECORD_LIMIT, ACQUIRE_RENEW):
        raise errors.InvalidRequestError(f"Unknown ShareAcquireMode {mode}.")
    renew = request.is_renew_ack or mode == ACQUIRE_RENEW
    if renew and (request.max_wait_ms or request.min_bytes or request.max_bytes
                  or request.max_records):
        raise errors.InvalidRequestError(
            "A share fetch of renew acknowledgements must have MaxWaitMs, MinBytes, MaxBytes "
            "and MaxRecords 0.")
    return mode == ACQUIRE_RECORD_LIMIT, renew


async def handle_share_fetch(ctx: RequestContext, request: Any) -> Any:
    _share.require_access(ctx, request.group_id, request.topics)
    record_limit, renew = acquire_mode(ctx, request)
    share = ctx.broker.share
    since = share.mark()  # this request's writes, even those whose flush ends before it waits
    gid, mid, epoch = request.group_id, request.member_id, request.share_session_epoch
    acks = _share.collect(request.topics)
    forgotten = [(f.topic_id, p) for f in request.forgotten_topics_data for p in f.partitions]
    session = _share.session_step(ctx, gid or "", mid or "", epoch, acks, forgotten, fetch=True)
    lock_ms = share.lock_duration_ms(gid)
    ack_results = _share.renew_in_v1(ctx, acks)
    for (topic_id, index), batches in acks.items():
        if batches and (topic_id, index) not in ack_results:
            ack_results[(topic_id, index)] = await _share.acknowledge(ctx, gid, mid, topic_id, index,
                                                                      batches)
    answers: dict[tuple[Any, int], Any] = {}
    max_records = request.max_records if request.max_records > 0 and not renew else 0
    if epoch == FINAL_EPOCH:
        _share.close_session(ctx, gid, mid)
    elif max_records > 0:
        # Share partitions this broker starts leading are read from their share coordinator
        # first (a local call on a single node): waited for up to the fetch's wait, and at
        # least LOAD_WAIT_MS, so that a fetch does not come back empty only because of it.
        await share.wait_loaded(gid, list(session.partitions),
                                max(request.max_wait_ms, LOAD_WAIT_MS) / 1000.0)
        broker = ctx.broker
        clock = broker.clock
        deadline = clock.monotonic() + max(request.max_wait_ms, 0) / 1000.0
        waiters = broker.waiters
        loop = asyncio.get_running_loop()
        while True:
            seen = waiters.sequence
            answers, acquired, keys, any_error = await _acquire_all(ctx, request, session,
                                                                    max_records, record_limit)
            wait = deadline - clock.monotonic()
            if acquired or any_error or wait <= 0 or broker.stopping or not keys:
                break
            waited = loop.time()
            woken = await waiters.wait(keys, wait, seen)
            ctx.remote_s += loop.time() - waited
            if not woken:
                answers, acquired, keys, any_error = await _acquire_all(ctx, request, session,
                                                                        max_records, record_limit)
                break
    # The answer: partitions with records or an error, and every partition acknowledged;
    # a request that opened the session answers for all it named.
    for key, result in ack_results.items():
        if key in answers:
            pd = answers[key]
            pd.acknowledge_error_code, pd.acknowledge_error_message = result
        else:
            answers[key] = _partition(key[1], ack=result)
    if epoch == 0:
        for key in acks:
            answers.setdefault(key, _partition(key[1]))
    # Answer once the state changes (acknowledgements, acquisitions' delivery counts) are
    # durable, as Kafka answers after its persister's write.
    failed = await share.flushed(since)
    for (topic_id, index), result in ack_results.items():
        pd = answers[(topic_id, index)]
        pd.acknowledge_error_code, pd.acknowledge_error_message = _share.write_failure(
            failed, gid, topic_id, index, result)
    by_topic: dict[Any, list[Any]] = {}
    for (topic_id, _index), pd in answers.items():
        by_topic.setdefault(topic_id, []).append(pd)
    return _R(throttle_time_ms=0, error_code=0, error_message=None,
              acquisition_lock_timeout_ms=lock_ms,
              responses=[_R.ShareFetchableTopicResponse(topic_id=t, partitions=parts)
                         for t, parts in by_topic.items()],
              node_endpoints=[])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message or None,
              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
