"""Fetch (key 1), versions 4-12 (topic names; v13+ needs topic IDs in fetches).

Per partition: the log is read from ``fetch_offset`` up to ``partition_max_bytes`` and the
bytes left of the response's ``max_bytes``, never past the high watermark, as a
``logcore.FileRegion`` the network layer sends with ``sendfile`` (no record byte enters
Python), except a region of at most ``io_threads.COPY_MAX`` bytes whose pages are in the page
cache: its bytes are copied (``io_threads.read_cached``) so that the answer leaves in one
send instead of a send, a sendfile and a send. Reads that may wait for a disk run on an I/O thread (``_read``). KIP-74: the first partition that returns data gets at least one whole batch even
when it is larger than both limits; later partitions only what fits.

Long poll: while fewer than ``min_bytes`` are available and ``max_wait_ms`` has not passed,
the handler waits on the per-partition append notifications of every partition it reads
(``PartitionWaiters``), then reads again. ``max_wait_ms=0`` answers at once, and so does
a fetch in which any partition has an error (the others' data goes with it).

Single node: the high watermark is the log end offset (an append is committed when it is
written). A replicated partition (cluster mode, ``broker.replicas``): consumers read below
the leader's high watermark, a follower (``replica_id`` >= 0) reads to the log end and its
fetch offset moves the ISR and high watermark; leader-epoch fencing and the diverging epoch
(v12+) are ``_replica_check``'s (docs/replication.md, "The replica manager"). ``isolation_level`` 1 (read_committed) reads only up to the last stable offset
(the first offset of the oldest open transaction, else the high watermark) and lists the
aborted transactions overlapping the returned batches (``Log.aborted_transactions``
from the ``.txnindex`` files; the consumer drops those producers' batches from each
FirstOffset up to their ABORT marker); read_uncommitted gets ``aborted_transactions``
null. Every response carries ``last_stable_offset``. A marker wakes the fetches waiting
on its partition (it moves the last stable offset).

The aborted transactions' upper bound is the end of the returned bytes (the last offset
of the region + 1): Kafka's (the next offset-index entry after them, else the next
segment's base) is a superset of it that only adds transactions whose batches were not
returned.

Quotas (KIP-219, ``pylog.broker.quotas``): a consumer's ``max_bytes`` is capped to what its
``consumer_byte_rate`` allows in a quota window; its answer's bytes count against the quota
and its time against ``request_percentage``; over either, the answer goes out empty with
``throttle_time_ms`` and the connection is muted for that long. Followers are exempt.

Fetch sessions (KIP-227, v7+, ``broker/fetch_sessions.py``): a full fetch with
``session_epoch`` 0 opens a session over its partitions; incremental fetches then name only
what changed, the partitions are read from the session, and the answer holds only the
partitions with records, an error or a new high watermark, last stable offset or log start
offset. An idle partition of an incremental fetch costs a few lookups: it is not read and
no response entry is built for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import logcore
from pylog import errors
from pylog.broker import io_threads
from pylog.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
    next_epoch,
)
from pylog.broker.handlers._authz import AclOperation, ResourceType, cluster_allowed, denied
from pylog.broker.handlers._common import LEADER_EPOCH
from pylog.broker.quotas import fetch_max_bytes, fetch_throttle
from pylog.protocol.codec import records_size
from pylog.protocol.messages import FetchResponse
from pylog.replication.epochs import diverging_epoch

if TYPE_CHECKING:
    from pylog.broker.handlers import RequestContext

API_KEY = 1
VERSIONS = (4, 12)

_R = FetchResponse

log = logging.getLogger("pylog.broker.fetch")


def _partition_error(index: int, code: int) -> Any:
    return _R.PartitionData(partition_index=index, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                            records=b"")


def _read_now(plog: Any, offset: int, max_bytes: int, hw: int, min_one_batch: bool) -> Any:
    """Log.read, then the region's pages into the page cache when they are not (on an I/O
    thread: this may wait for the disk)."""
    region = plog.read(offset, max_bytes, max_offset=hw, min_one_batch=min_one_batch)
    if region.size and not io_threads.is_cached(region):
        io_threads.load(region)
    return region


async def _read(ctx: RequestContext, plog: Any, offset: int, max_bytes: int, hw: int,
                min_one_batch: bool) -> Any:
    """A region of ``plog`` that the loop can ``sendfile`` without waiting for the disk.

    Reads in the active segment (consumers at the tail: index and data in the page cache)
    run on the loop, and only a region found cold is loaded on a thread; reads of older
    segments, whose index and batch headers may be cold too, run wholly on a thread.
    """
    if offset < plog.active_segment.base_offset:
        return await ctx.broker.io.run(_read_now, plog, offset, max_bytes, hw, min_one_batch)
    region = plog.read(offset, max_bytes, max_offset=hw, min_one_batch=min_one_batch)
    if region.size and not io_threads.is_cached(region):
        await ctx.broker.io.run(io_threads.load, region)
    return region


async def _read_all(ctx: RequestContext, request: Any, fetch_topics: list[tuple[str, list[Any]]],
                    session: FetchSession | None = None,
                    unauthorized: frozenset[str] = frozenset()) -> tuple[list[Any], int, list[Any], bool]:
    """One pass over the partitions of ``fetch_topics`` ((topic, [FetchPartition]) runs).
    With the ``session`` of an incremental fetch, a partition with nothing to read whose
    high watermark, last stable offset and log start offset are those last sent is left
    out of the answer (and costs no read). Partitions of ``unauthorized`` topics answer
    TOPIC_AUTHORIZATION_FAILED.

    Returns (topic responses, bytes, wait keys, whether any partition has an error).
    """
    manager = ctx.broker.log_manager
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    keys: list[Any] = []
    topics = []
    any_data = False
    any_error = False
    committed = request.isolation_level == 1
    replicas = ctx.broker.replicas
    replicated = replicas.active  # False on a single node: no replica work below
    cluster_mode = ctx.broker.cluster is not None
    cached_parts = session.partitions if session is not None else None
    follower = request.replica_id >= 0
    for topic_name, fetch_partitions in fetch_topics:
        topic = manager.topics.get(topic_name)
        parts = []
        if unauthorized and topic_name in unauthorized:
            parts = [_partition_error(fp.partition, errors.TopicAuthorizationFailedError.code)
                     for fp in fetch_partitions]
            topics.append(_R.FetchableTopicResponse(topic=topic_name, partitions=parts))
            any_error = True
            continue
        for fp in fetch_partitions:
            if topic is None or not 0 <= fp.partition < len(topic.partitions):
                parts.append(_partition_error(fp.partition, errors.UnknownTopicOrPartitionError.code))
                continue
            p = topic.partitions[fp.partition]
            plog = p.log
            state = replicas.partitions.get((p.topic, p.index)) if replicated else None
            if state is None:
                if cluster_mode:
                    # A local log without a role from the controller (before the first
                    # LeaderAndIsr, or after StopReplica): not served.
                    parts.append(_partition_error(fp.partition, errors.NotLeaderOrFollowerError.code))
                    any_error = True
                    continue
                if fp.current_leader_epoch > LEADER_EPOCH:
                    # The client knows a newer leader than we are (KIP-320): it must refresh.
                    parts.append(_partition_error(fp.partition, errors.UnknownLeaderEpochError.code))
                    continue
                hw = end = plog.log_end_offset
            else:
                refused = _replica_check(ctx, request, state, fp, plog)
                if refused is not None:
                    parts.append(refused)
                    any_error = True  # an error or a diverging epoch: answer at once
                    continue
                hw = state.high_watermark
                end = plog.log_end_offset
            start = plog.log_start_offset
            if cached_parts is not None:
                # Incremental: nothing to read and no offset moved since the last answer
                # (kept inline: this runs for every idle partition of every fetch).
                cp = cached_parts[(topic_name, fp.partition)]
                offset = fp.fetch_offset
                if hw == cp.high_watermark and end == cp.log_end_offset \
                        and start == cp.log_start_offset and start <= offset <= end \
                        and offset >= (end if follower else cp.last_stable_offset if committed
                                       else hw):
                    keys.append((p.topic, p.index))
                    continue
                cp.log_end_offset = end
            lso = plog.last_stable_offset(hw)
            keys.append((p.topic, p.index))
            if fp.fetch_offset < start or fp.fetch_offset > end:
                pd = _partition_error(fp.partition, errors.OffsetOutOfRangeError.code)
                pd.high_watermark, pd.last_stable_offset, pd.log_start_offset = hw, lso, start
                parts.append(pd)
                continue
            if state is not None and follower:
                bound = end  # a follower reads up to the log end
            else:
                bound = lso if committed else hw
            records: Any = b""
            aborted: list[Any] | None = [] if committed else None
            limit = min(fp.partition_max_bytes, remaining)
            if fp.fetch_offset < bound and (limit > 0 or not any_data):
                try:
                    region = await _read(ctx, plog, fp.fetch_offset, max(limit, 0), bound,
                                         not any_data)
                except logcore.OffsetOutOfRangeError:
                    # Retention moved the start between our check and the read.
                    pd = _partition_error(fp.partition, errors.OffsetOutOfRangeError.code)
                    pd.high_watermark, pd.last_stable_offset = hw, lso
                    pd.log_start_offset = plog.log_start_offset
                    parts.append(pd)
                    continue
                if region.size:
                    # A small region in the page cache goes out as bytes, in the same
                    # send as the response around it (io_threads.read_cached).
                    copied = io_threads.read_cached(region)
                    records = region if copied is None else copied
                    any_data = True
                    total += region.size
                    remaining -= region.size
                    if committed:
                        aborted = [
                            _R.AbortedTransaction(producer_id=t.producer_id,
                                                  first_offset=t.first_offset)
                            for t in plog.aborted_transactions(fp.fetch_offset,
                                                               region.last_offset + 1)
                        ]
            parts.append(_R.PartitionData(
                partition_index=fp.partition, error_code=0, high_watermark=hw,
                last_stable_offset=lso, log_start_offset=start, aborted_transactions=aborted,
                preferred_read_replica=-1, records=records,
            ))
        topics.append(_R.FetchableTopicResponse(topic=topic_name, partitions=parts))
        if not any_error:
            any_error = any(pd.error_code for pd in parts)
    return topics, total, keys, any_error


def _replica_check(ctx: RequestContext, request: Any, state: Any, fp: Any, plog: Any) -> Any:
    """A replicated partition (cluster mode): the leader-epoch checks (KIP-320), the
    follower's position (ISR and high watermark) and its diverging epoch (Fetch v12+).
    Returns a response entry that replaces the read (an error, or a diverging epoch), or
    None to read."""
    leader = state.leader
    code = 0
    if leader is None:
        code = errors.NotLeaderOrFollowerError.code
    elif fp.current_leader_epoch > state.leader_epoch:
        code = errors.UnknownLeaderEpochError.code
    elif 0 <= fp.current_leader_epoch < state.leader_epoch:
        code = errors.FencedLeaderEpochError.code
    if code:
        pd = _partition_error(fp.partition, code)
        pd.current_leader = _R.LeaderIdAndEpoch(leader_id=state.leader_id,
                                                leader_epoch=state.leader_epoch)
        return pd
    replica_id = request.replica_id
    if replica_id < 0:
        return None
    if ctx.api_version >= 12:
        diverging = diverging_epoch(plog.leader_epoch_cache.entries, fp.last_fetched_epoch,
                                    fp.fetch_offset, plog.log_end_offset)
        if diverging is not None:
            hw = leader.high_watermark
            return _R.PartitionData(
                partition_index=fp.partition, error_code=0, high_watermark=hw,
                last_stable_offset=plog.last_stable_offset(hw),
                log_start_offset=plog.log_start_offset, aborted_transactions=None,
                diverging_epoch=_R.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1]),
                preferred_read_replica=-1, records=b"")
    try:
        ctx.broker.replicas.on_follower_fetch(state, replica_id, fp.fetch_offset,
                                              fp.log_start_offset, plog.log_end_offset)
    except errors.ApiError as exc:
        pd = _partition_error(fp.partition, exc.code)
        pd.high_watermark = leader.high_watermark
        pd.log_start_offset = plog.log_start_offset
        return pd
    return None


def _has_news(pd: Any) -> bool:
    """Whether a partition's answer carries something besides its offsets."""
    records = pd.records
    return (pd.error_code != 0 or pd.diverging_epoch.epoch >= 0
            or not isinstance(records, (bytes, bytearray)) or len(records) > 0)


def _incremental_answer(session: FetchSession, topics: list[Any], full: bool) -> list[Any]:
    """Keep the partitions with news or new offsets and remember what they said; when the
    answer is ``full`` (it reached max_bytes), move them to the end of the session's order."""
    cached = session.partitions
    out = []
    answered = []
    for tr in topics:
        kept = []
        for pd in tr.partitions:
            cp = cached[(tr.topic, pd.partition_index)]
            if _has_news(pd) or cp.changed(pd.high_watermark, pd.last_stable_offset,
                                           pd.log_start_offset):
                cp.remember(pd.high_watermark, pd.last_stable_offset, pd.log_start_offset)
                kept.append(pd)
                answered.append((tr.topic, pd.partition_index))
        if kept:
            tr.partitions = kept
            out.append(tr)
    if full:
        session.move_to_end(answered)
    return out


def _new_session(ctx: RequestContext, request: Any, topics: list[Any]) -> int:
    """A full fetch with epoch 0: a session over its partitions, remembering what this
    answer says of each; its id, or 0 when none was made."""
    by_key = {(ft.topic, fp.partition): fp for ft in request.topics for fp in ft.partitions}
    parts: dict[tuple[str, int], CachedPartition] = {}
    for tr in topics:
        for pd in tr.partitions:
            key = (tr.topic, pd.partition_index)
            cp = parts[key] = CachedPartition(by_key[key])
            cp.remember(pd.high_watermark, pd.last_stable_offset, pd.log_start_offset)
    session = ctx.broker.fetch_sessions.create(request.replica_id >= 0, parts)
    return 0 if session is None else session.id


async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    sessions = broker.fetch_sessions
    session: FetchSession | None = None
    epoch = request.session_epoch
    if request.session_id != 0 and epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        session = sessions.get(request.session_id)
        code = 0
        if session is None:
            code = errors.FetchSessionIdNotFoundError.code
        elif session.epoch != epoch:
            code = errors.InvalidFetchSessionEpochError.code
        if code:
            return _R(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
        assert session is not None
        session.update(request.topics, request.forgotten_topics_data)
        session.epoch = next_epoch(epoch)
        fetch_topics = session.fetch_topics()
    else:
        if request.session_id != 0:
            sessions.remove(request.session_id)  # closed (epoch -1) or started over (0)
        fetch_topics = [(ft.topic, ft.partitions) for ft in request.topics]
    follower = request.replica_id >= 0
    unauthorized: frozenset[str] = frozenset()
    if broker.authorizer is not None:  # a follower: CLUSTER_ACTION; a consumer: READ per topic
        names = [name for name, _parts in fetch_topics]
        if follower:
            if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
                unauthorized = frozenset(names)
        else:
            unauthorized = frozenset(denied(ctx, AclOperation.READ, ResourceType.TOPIC, names))
    if follower:
        ctx.request_time_recorded = True  # replication: exempt from client quotas
    elif broker.quotas.fetch.enabled:
        # No more than the client's consumer_byte_rate allows in a quota window (a bigger
        # answer would be throttled for sure).
        request.max_bytes = fetch_max_bytes(ctx, request.max_bytes if request.max_bytes > 0
                                            else 0x7FFFFFFF)
    clock = broker.clock
    deadline = clock.monotonic() + max(request.max_wait_ms, 0) / 1000.0
    min_bytes = max(request.min_bytes, 0)
    if not follower and 0 < request.max_bytes < min_bytes:
        min_bytes = request.max_bytes
    started = clock.monotonic()
    passes = 0
    outcome = "answered at once"
    waiters = broker.waiters
    loop = asyncio.get_running_loop()
    while True:
        since = waiters.sequence
        topics, total, keys, any_error = await _read_all(ctx, request, fetch_topics, session, unauthorized)
        passes += 1
        wait = deadline - clock.monotonic()
        # Answer now when there is enough, when the time is up, or when a partition has an
        # error (unknown topic or partition, offset out of range, ...): the client must act
        # on it, so it gets it at once with whatever the other partitions have (Kafka's
        # ReplicaManager.fetchMessages answers at once on ``errorReadingData``).
        if (total >= min_bytes or total > 0 and min_bytes <= 1 or wait <= 0 or any_error
                or broker.stopping):
            break
        waited = loop.time()
        woken = await waiters.wait(keys, wait, since)
        ctx.remote_s += loop.time() - waited
        if not woken:
            # Timed out: answer with what is there now.
            topics, total, keys, any_error = await _read_all(ctx, request, fetch_topics, session, unauthorized)
            passes += 1
            outcome = "waited out max_wait_ms"
            break
        outcome = "woken by an append"
    if not follower and (broker.quotas.fetch.enabled or broker.quotas.request.enabled):
        throttle_ms = fetch_throttle(ctx, _response_bytes(topics))
        if throttle_ms:
            # Over a quota: an empty answer (what was read is not sent, and the session
            # does not note it), throttle_time_ms set by the dispatcher, connection muted.
            _count(ctx, request, fetch_topics, [])  # requests counted, no bytes out
            return _R(throttle_time_ms=throttle_ms, error_code=0,
                      session_id=session.id if session is not None else 0, responses=[])
    if session is not None:
        topics = _incremental_answer(session, topics, total >= request.max_bytes > 0)
        session_id = session.id
    elif epoch == INITIAL_EPOCH and ctx.api_version >= 7:
        session_id = _new_session(ctx, request, topics)
    else:
        session_id = 0
    if log.isEnabledFor(logging.DEBUG):
        # Per-fetch timing (with net.py's per-request line): whether a fetch waited, why,
        # and for how long; a fetch that had data must say "answered at once".
        named = sum(len(ft.partitions) for ft in request.topics)
        log.debug("fetch from %s (correlation id %d): %d bytes of %d partitions (%d named in "
                  "the request), min_bytes %d, %s after %.1f ms, %d read passes%s%s", ctx.peer,
                  ctx.correlation_id, total, sum(len(parts) for _topic, parts in fetch_topics),
                  named, min_bytes, outcome, (clock.monotonic() - started) * 1000, passes,
                  ", with a partition error" if any_error else "",
                  f", session {session_id} epoch {epoch}" if session_id else "")
    _count(ctx, request, fetch_topics, topics)
    return _R(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics)


def _response_bytes(topics: list[Any]) -> int:
    """The record bytes of an answer (what a fetch quota counts; Kafka counts the whole
    response, whose headers are a few dozen bytes a partition)."""
    return sum(records_size(pd.records) for ft in topics for pd in ft.partitions)


def _count(ctx: RequestContext, request: Any, fetch_topics: list[tuple[str, list[Any]]],
           topics: list[Any]) -> None:
    """Kafka's BrokerTopicMetrics of a fetch: a request for every partition fetched, as
    Kafka's ReplicaManager counts each partition it reads (an incremental session's idle
    partitions too, though they are not in the answer); errors and record bytes out (to
    consumers, or to followers: replication bytes) from the partitions answered."""
    metrics = ctx.broker.metrics
    follower = request.replica_id >= 0
    known = ctx.broker.log_manager.topics
    untracked = metrics.untracked
    for topic, parts in fetch_topics:
        # No per-topic entry for a name nobody created: broker-wide figures only.
        stats = metrics.topic(topic) if topic in known else untracked
        stats.total_fetch_requests += len(parts)
    for ft in topics:
        stats = metrics.topic(ft.topic) if ft.topic in known else untracked
        for pd in ft.partitions:
            if pd.error_code:
                stats.failed_fetch_requests += 1
            elif pd.records:  # a region, or a small one's bytes (io_threads.read_cached)
                if follower:
                    stats.replication_bytes_out += records_size(pd.records)
                else:
                    stats.bytes_out += records_size(pd.records)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(
        throttle_time_ms=0,
        error_code=code,
        session_id=0,
        responses=[
            _R.FetchableTopicResponse(
                topic=ft.topic, partitions=[_partition_error(fp.partition, code) for fp in ft.partitions]
            )
            for ft in request.topics
        ],
    )
