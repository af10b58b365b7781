"""``ReplicaFetcher``: one task fetching a set of partitions from one leader broker.

Kafka's ``ReplicaFetcherThread`` / ``AbstractFetcherThread``, on asyncio. Each round sends
one Fetch (v12: topic names, ``last_fetched_epoch``) with ``replica_id`` = this broker,
``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` / ``replica.fetch.max.bytes``
/ ``replica.fetch.response.max.bytes``; the fetch offset of each partition is its log end
offset. The fetches go through an incremental fetch session with the leader (KIP-227,
``pylog.replication.fetch_session``): after one full fetch only the partitions whose
position changed are named, and the leader answers only those with news; a session error
(evicted: FETCH_SESSION_ID_NOT_FOUND; INVALID_FETCH_SESSION_EPOCH) or a failed round
makes the next fetch full again. Per partition in the response:

- records: appended with logcore's replica path (``Log.append(assign_offsets=False)``: the
  leader's offsets and epochs are kept, the leader-epoch cache follows the batches), on the
  event loop when that is as cheap as an inline leader append (``_append_inline``), else on
  the partition's ordered I/O queue; the follower's high watermark becomes min(leader's, LEO);
- ``diverging_epoch``: the log is truncated where ``epochs.truncation_offset`` says (with
  cleaning paused), then fetching goes on from there;
- OFFSET_OUT_OF_RANGE: a log wholly behind the leader's start restarts empty there;
  otherwise it is cut to the leader's high watermark;
- NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH and other errors: the
  partition waits ``replica.fetch.backoff.ms`` (a LeaderAndIsr will move it).

A partition whose records cannot be appended (a corrupt batch, a full disk, ...) is one
partition's problem, as in Kafka's ``AbstractFetcherThread``: it is marked failed
(``failed``: the error, until an append succeeds), logged at ERROR with its
topic-partition and fetch offset, and retried after ``replica.fetch.backoff.ms``; the
other partitions of the same response are applied and fetching goes on. A follower whose
log is empty and whose first fetched batch starts below its log start (the leader's start
fell inside that batch) restarts its log at the batch's base offset (Kafka's handling of
``UnexpectedAppendOffsetException``).

Responses are only applied to partitions that still follow this leader in the epoch the
request named (a LeaderAndIsr may have moved them while the fetch was in flight).
A connection failure backs off ``replica.fetch.backoff.ms`` and reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from logcore import UnexpectedAppendOffsetError
from pylog import errors
from pylog.replication.append import INLINE_APPEND_MAX_BYTES
from pylog.replication.epochs import truncation_offset
from pylog.replication.fetch_session import FollowerFetchSession

if TYPE_CHECKING:
    from pylog.replication.manager import ReplicaManager

#: How often a partition step that is still waiting is reported (``_ordered``).
SLOW_STEP_WARN_S = 10.0

log = logging.getLogger("pylog.replication.fetcher")


class ReplicaFetcher:
    def __init__(self, manager: ReplicaManager, leader_id: int, fetcher_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.keys: set[tuple[str, int]] = set()
        self._delayed: dict[tuple[str, int], float] = {}
        #: Partitions whose last append failed: the error message, until one succeeds.
        self.failed: dict[tuple[str, int], str] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: Any = None
        self._stopped = False
        self.rounds = 0
        #: The incremental fetch session with the leader (KIP-227); ``sessions_enabled``
        #: False sends every partition in every fetch (as before sessions; benchmarks).
        self.session = FollowerFetchSession()
        self.sessions_enabled = True
        self.session_resets = 0

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, id={self.fetcher_id})"

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> list[asyncio.Task[Any]]:
        # A flag as well as the cancellation: a cancel that lands while a connect fails
        # can be swallowed by asyncio.wait_for (3.11), and the loop must still end.
        self._stopped = True
        self._wake.set()
        tasks: list[asyncio.Task[Any]] = []
        if self._task is not None:
            self._task.cancel()
            tasks.append(self._task)
        if self._conn is not None:
            tasks.append(asyncio.ensure_future(self._conn.close()))
            self._conn = None
        return tasks

    def add(self, key: tuple[str, int]) -> None:
        self.keys.add(key)
        self._delayed.pop(key, None)
        self._wake.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.keys.discard(key)
        self._delayed.pop(key, None)
        self.failed.pop(key, None)

    async def _connect(self) -> Any:
        from pylog.net.connection import BrokerConnection
        address = self.manager.leader_address(self.leader_id)
        if address is None:
            raise errors.LeaderNotAvailableError(f"no address known for broker {self.leader_id}")
        config = self.manager.broker.config
        timeout = (config["replica.fetch.wait.max.ms"] + 30_000) / 1000.0
        conn = BrokerConnection(address[0], address[1], node_id=self.leader_id,
                                client_id=f"broker-{self.manager.broker_id}-fetcher-{self.fetcher_id}",
                                request_timeout=timeout, max_in_flight=1,
                                ssl_context=self.manager.broker.inter_broker_tls(),
                                sasl=self.manager.broker.inter_broker_sasl())
        await conn.connect(timeout)
        return conn

    async def _run(self) -> None:
        config = self.manager.broker.config
        backoff = config["replica.fetch.backoff.ms"] / 1000.0
        loop = asyncio.get_running_loop()
        while not self._stopped:
            now = loop.time()
            ready = [k for k in self.keys if self._delayed.get(k, 0.0) <= now]
            if not ready:
                self._wake.clear()
                delay = min((t - now for k, t in self._delayed.items() if k in self.keys),
                            default=None)
                try:
                    await asyncio.wait_for(self._wake.wait(), delay if delay is not None else 3600.0)
                except asyncio.TimeoutError:
                    pass
                continue
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await self._connect()
                await self._fetch_once(ready)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the fetcher must keep running
                if self._stopped:
                    return
                log.info("%r: fetch failed (%s: %s); retrying in %.1f s", self, type(exc).__name__,
                         exc, backoff)
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                await asyncio.sleep(backoff)

    def _request(self, ready: list[tuple[str, int]]
                 ) -> tuple[Any, dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """The next Fetch for the ``ready`` partitions: in full, or through the session
        (``fetch_session``: only the partitions whose position changed, and those this
        fetcher no longer fetches as forgotten). Returns it with the leader epoch and the
        fetch offset of every partition it covers (named or held by the session)."""
        from pylog.protocol.messages import FetchRequest
        manager = self.manager
        config = manager.broker.config
        max_bytes = config["replica.fetch.max.bytes"]
        wanted: dict[tuple[str, int], Any] = {}
        epochs: dict[tuple[str, int], int] = {}
        offsets: dict[tuple[str, int], int] = {}
        for key in sorted(ready):
            state = manager.follower_state(key, self.leader_id)
            partition = manager.broker.log_manager.get_partition(*key)
            if state is None or partition is None:
                log.info("%r: %s-%d: no longer fetched here (%s)", self, key[0], key[1],
                         "no local log" if partition is None else
                         "this broker no longer follows this leader for it")
                self.keys.discard(key)
                continue
            plog = partition.log
            last_epoch = plog.leader_epoch_cache.latest_epoch
            epochs[key] = state.leader_epoch
            offsets[key] = plog.log_end_offset
            wanted[key] = FetchRequest.FetchPartition(
                partition=key[1], current_leader_epoch=state.leader_epoch,
                fetch_offset=offsets[key],
                last_fetched_epoch=-1 if last_epoch is None else last_epoch,
                log_start_offset=plog.log_start_offset, partition_max_bytes=max_bytes)
        if self.sessions_enabled:
            nxt = self.session.next_request(wanted)
            session_id, session_epoch, send, forgotten = (nxt.session_id, nxt.epoch, nxt.send,
                                                          nxt.forgotten)
        else:
            session_id, session_epoch, send, forgotten = 0, -1, list(wanted.items()), {}
        topics: dict[str, list[Any]] = {}
        for key, fp in send:
            topics.setdefault(key[0], []).append(fp)
        request = FetchRequest(
            replica_id=manager.broker_id, max_wait_ms=config["replica.fetch.wait.max.ms"],
            min_bytes=config["replica.fetch.min.bytes"],
            max_bytes=config["replica.fetch.response.max.bytes"], isolation_level=0,
            session_id=session_id, session_epoch=session_epoch,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=ps)
                                   for t, ps in forgotten.items()], rack_id="")
        return request, epochs, offsets

    async def _fetch_once(self, ready: list[tuple[str, int]]) -> None:
        request, epochs, offsets = self._request(ready)
        if not epochs:
            return
        try:
            response = await self._conn.send(request, min(self._conn.version_for(type(request)), 12))
        except BaseException:
            self.session.on_failure()  # the leader may hold the session at either epoch
            raise
        self.rounds += 1
        if self.sessions_enabled and not self.session.on_response(response.error_code,
                                                                  response.session_id):
            # FETCH_SESSION_ID_NOT_FOUND (evicted, or a restarted leader) or
            # INVALID_FETCH_SESSION_EPOCH: the next round, at once, is a full fetch.
            self.session_resets += 1
            log.info("%r: fetch session %d: error %d; fetching in full again", self,
                     request.session_id, response.error_code)
            return
        if response.error_code:
            cls = errors.error_for_code(response.error_code) or errors.UnknownServerError
            raise cls(f"fetch from broker {self.leader_id} failed")
        if request.session_epoch == 0 and self.session.open:
            log.info("%r: fetch session %d opened over %d partitions", self,
                     self.session.session_id, len(epochs))
        for topic in response.responses:
            for pd in topic.partitions:
                key = (topic.topic, pd.partition_index)
                state = self.manager.follower_state(key, self.leader_id)
                if state is None or key not in epochs or state.leader_epoch != epochs[key]:
                    continue  # moved while the fetch was in flight
                try:
                    await self._handle_partition(key, state, pd)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one partition's failure
                    self._partition_failed(key, offsets[key], exc)

    async def _ordered(self, key: tuple[str, int], what: str, fn: Any, *args: Any) -> Any:
        """``io.run_ordered`` for one partition's step, with a WARNING every
        ``SLOW_STEP_WARN_S`` while it waits (behind the partition's queued work, a cleaner
        pause, a slow disk): a step that never ends stalls this fetcher's partitions, and
        must not do so silently."""
        task = asyncio.ensure_future(self.manager.broker.io.run_ordered(key, fn, *args))
        # A fetcher stopped while it waits leaves the step to finish on its thread; its
        # outcome is read here so that nothing is reported as never retrieved.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        waited = 0.0
        while True:
            done, _ = await asyncio.wait({task}, timeout=SLOW_STEP_WARN_S)
            if done:
                return task.result()
            waited += SLOW_STEP_WARN_S
            log.warning("%r: %s-%d: %s has not finished after %.0f s (partition I/O queue "
                        "busy: %s)", self, key[0], key[1], what, waited,
                        self.manager.broker.io.busy(key))

    def _partition_failed(self, key: tuple[str, int], offset: int, exc: Exception) -> None:
        """Kafka's ``partitionsWithError``: this partition backs off, the others go on."""
        backoff_ms = self.manager.broker.config["replica.fetch.backoff.ms"]
        message = f"{type(exc).__name__}: {exc}"
        self.failed[key] = message
        log.error("%r: %s-%d: applying the records fetched at offset %d failed (%s); "
                  "retrying in %d ms", self, key[0], key[1], offset, message, backoff_ms)
        self._delayed[key] = asyncio.get_running_loop().time() + backoff_ms / 1000.0

    async def _handle_partition(self, key: tuple[str, int], state: Any, pd: Any) -> None:
        manager = self.manager
        broker = manager.broker
        partition = broker.log_manager.get_partition(*key)
        if partition is None:
            return
        plog = partition.log
        if pd.error_code == errors.OffsetOutOfRangeError.code:
            await self._ordered(key, "the reset to the leader's start", _reset_out_of_range,
                                broker.log_manager, partition,
                                        pd.log_start_offset, pd.high_watermark)
            return
        if pd.error_code:
            log.info("%r: %s-%d: error %d; retrying after the backoff", self, key[0], key[1],
                     pd.error_code)
            loop = asyncio.get_running_loop()
            self._delayed[key] = loop.time() + broker.config["replica.fetch.backoff.ms"] / 1000.0
            return
        diverging = getattr(pd, "diverging_epoch", None)
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            await self._ordered(key, "the truncation", _truncate, broker.log_manager, partition,
                                        diverging.epoch, diverging.end_offset, state.follower_hw)
            return
        records = pd.records
        if records is not None and len(records):
            buf = bytearray(records)
            if not _append_inline(broker, key, plog, buf):
                await self._ordered(key, "the append", _append_replica, plog, buf)
            broker.waiters.notify(key)
        if self.failed.pop(key, None) is not None:
            log.info("%r: %s-%d: fetching again from offset %d", self, key[0], key[1],
                     plog.log_end_offset)
        if plog.log_start_offset < pd.log_start_offset <= plog.log_end_offset:
            # The leader's DeleteRecords / retention moved its start: follow it (Kafka's
            # maybeIncrementLogStartOffset on the follower).
            await self._ordered(key, "the log start move", plog.delete_records_before,
                                pd.log_start_offset)
        manager.on_follower_fetched(state, pd.high_watermark, plog.log_end_offset)


def _append_inline(broker: Any, key: tuple[str, int], plog: Any, buf: bytearray) -> bool:
    """The replica append on the event loop when it is as cheap as an inline leader append
    (``pylog.replication.append``: at most ``INLINE_APPEND_MAX_BYTES``, nothing queued on a
    thread for the partition, no roll, no leader-epoch file write, no control batch, no
    flush policy: ``Log.replica_append_needs_io``). Returns False, having written
    nothing, when the append must go to an I/O thread (``_append_replica``).

    Why: a thread hand-off costs two wake-ups (the I/O thread, then the loop's), each
    waiting for a core on a busy machine, and it sits on every acks=all round: the leader
    learns of this append only from the follower's next fetch, sent after it."""
    if (len(buf) > INLINE_APPEND_MAX_BYTES or broker.io.busy(key)
            or plog.replica_append_needs_io(buf)):
        return False
    try:
        plog.append(buf, assign_offsets=False)
    except UnexpectedAppendOffsetError:
        return False  # nothing written; the thread path restarts an empty log (below)
    return True


def _append_replica(plog: Any, buf: bytearray) -> Any:
    """The replica append (I/O thread): the leader's batches as they are (offsets, leader
    epochs, cleaned batches), logcore's follower append.

    An empty log whose first fetched batch starts below its start offset but holds it
    (the leader's log start, moved by DeleteRecords or retention, fell inside that batch)
    restarts at the batch's base offset and appends it (Kafka's
    ``Partition.appendRecordsToFollowerOrFutureReplica``)."""
    try:
        return plog.append(buf, assign_offsets=False)
    except UnexpectedAppendOffsetError as exc:
        leo = plog.log_end_offset
        if not (leo == plog.log_start_offset and exc.first_offset < leo <= exc.last_offset):
            raise
        log.info("%s: the first fetched batch [%d, %d] starts below the log start %d of this "
                 "empty follower log: restarting the log at %d", plog.directory,
                 exc.first_offset, exc.last_offset, leo, exc.first_offset)
        plog.truncate_fully_and_start_at(exc.first_offset)
        return plog.append(buf, assign_offsets=False)


def _truncate(log_manager: Any, partition: Any, leader_epoch: int, leader_end: int,
              high_watermark: int) -> None:
    plog = partition.log
    leo = plog.log_end_offset
    offset, settled = truncation_offset(leader_epoch, leader_end, plog.leader_epoch_cache.entries,
                                        leo, high_watermark)
    if offset < high_watermark:
        log.warning("%s-%d: truncating to %d, below the high watermark %d", partition.topic,
                    partition.index, offset, high_watermark)
    epochs = plog.leader_epoch_cache.entries
    if log_manager.truncate_to(partition, offset):
        log.info("%s-%d: truncated from %d to %d (leader epoch %d ends at %d on the leader%s)",
                 partition.topic, partition.index, leo, plog.log_end_offset, leader_epoch,
                 leader_end, "" if settled else "; checking an older epoch next")
    elif plog.leader_epoch_cache.entries != epochs:
        # An epoch this broker began as leader at its log end, with no record in it.
        log.info("%s-%d: no record to truncate at %d; leader epochs %s dropped (the leader's "
                 "epoch %d ends at %d)", partition.topic, partition.index, leo,
                 [e for e, _s in epochs[len(plog.leader_epoch_cache.entries):]],
                 leader_epoch, leader_end)


def _reset_out_of_range(log_manager: Any, partition: Any, leader_start: int, leader_hw: int) -> None:
    plog = partition.log
    if plog.log_end_offset < leader_start:
        log.info("%s-%d: log end %d is behind the leader's start %d: restarting empty there",
                 partition.topic, partition.index, plog.log_end_offset, leader_start)
        plog.truncate_fully_and_start_at(leader_start)
    elif leader_hw >= 0 and plog.log_end_offset > leader_hw:
        log_manager.truncate_to(partition, leader_hw)
