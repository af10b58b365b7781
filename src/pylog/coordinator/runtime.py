"""One runtime for the coordinators that keep their state in an internal topic.

Kafka's ``CoordinatorRuntime`` idea: the group coordinator (``__consumer_offsets``) and the
transaction coordinator (``__transaction_state``) are sans-IO state machines; what they
share (hosting the partitions this broker leads, loading them from the log, appending
their records in order, resigning) lives here once, so that the two cannot drift apart.
A user (``pylog.group.service``, ``pylog.txn.service``) gives a ``TopicSpec`` and a
``ShardHandler`` and keeps only what is its own (requests, timers, markers).

Per internal-topic partition a state machine (``PartitionState``)::

    LOADING --(replayed to the end)--> ACTIVE --(resign, topic deleted, shutdown)--> CLOSED
       |  ^                              (a partition is CLOSED from any state)
       v  | (backoff elapsed)
     FAILED

- **Load** on becoming leader (cluster mode: ``on_become_leader``, called by the replica
  manager after LeaderAndIsr) or at start and topic creation (single node: every partition):
  ``handler.begin_load``, then the partition is read on an I/O thread in chunks of at most
  ``load_chunk_bytes`` (``loader.read_chunk``, ordered behind the partition's queued
  appends) and each chunk is replayed into the coordinator on the loop
  (``handler.replay``), yielding to the loop between chunks: a large partition never holds
  the loop for more than one chunk's replay. Then ``handler.complete_load``.
- **Failed load**: a read error or a replay that raises leaves the partition FAILED (its
  requests keep getting COORDINATOR_LOAD_IN_PROGRESS from the coordinator, which stays in
  its loading state) and the load is started again after a backoff
  (``LOAD_RETRY_BACKOFF_MS``, doubled per failure up to ``LOAD_RETRY_BACKOFF_MAX_MS``),
  until it succeeds or the partition is closed. Kafka leaves such a partition loading
  forever; a transient read error (EMFILE, EIO on a flaky disk) should not need a restart.
- **Ordered appends**: ``enqueue`` takes the coordinator's writes; one appender task per
  partition appends them one at a time through the replica manager's append path
  (``pylog.replication.append.append_replicated``: acks=all, bounded by the handler's
  timeout), so a write is appended only after the previous one is settled, and hands each
  outcome to ``handler.settled``.
- **Resign** (``on_resign``, a deleted topic, shutdown): the partition is CLOSED,
  ``handler.unload`` drops its state and queued writes get NOT_COORDINATOR.
- **Reload** (``reload``, after a failed write): closed as for a resign, then LOADING again
  from the log, so the handler's memory is what the log holds.

``DeadlineTimer`` is the one asyncio timer at a coordinator's next deadline, for the users'
timers.

Event-loop affinity: everything here runs on the broker's loop, except ``read_chunk`` (an
I/O thread). The broker is handed in; nothing here imports ``pylog.broker``.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

import logcore
from pylog import errors
from pylog.replication.append import (
    AppendError,
    append_replicated,
    must_wait_for_acks,
    try_append_inline,
)

from .loader import LoadedMarker, LoadedRecord, read_chunk

__all__ = ["LOAD_RETRY_BACKOFF_MAX_MS", "LOAD_RETRY_BACKOFF_MS", "CoordinatorRuntime", "DeadlineTimer",
           "PartitionState", "ShardHandler", "TopicSpec"]

log = logging.getLogger("pylog.coordinator")

#: The first retry of a failed load waits this long; each further failure doubles it.
LOAD_RETRY_BACKOFF_MS = 100
LOAD_RETRY_BACKOFF_MAX_MS = 10_000
_NOT_COORDINATOR = errors.NotCoordinatorError.code
_NOT_INLINE = -2  # not a Kafka code: the write cannot be appended on the loop now


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


#: Every legal transition; ``_set_state`` is the one place a partition's state changes.
_TRANSITIONS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.LOADING: frozenset({PartitionState.ACTIVE, PartitionState.FAILED, PartitionState.CLOSED}),
    PartitionState.FAILED: frozenset({PartitionState.LOADING, PartitionState.CLOSED}),
    PartitionState.ACTIVE: frozenset({PartitionState.CLOSED}),
    PartitionState.CLOSED: frozenset(),
}


def _set_state(p: _Partition, state: PartitionState) -> None:
    if state not in _TRANSITIONS[p.state]:
        raise RuntimeError(f"coordinator partition {p.index}: {p.state.value} -> {state.value} is not a transition")
    p.state = state


class TopicSpec(NamedTuple):
    """How the internal topic is created on a single node (in cluster mode FindCoordinator
    creates it through ZooKeeper)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, Any]


class ShardHandler(Protocol):
    """What a coordinator service gives the runtime, per partition index."""

    def begin_load(self, index: int, epoch: int | None) -> None:
        """Start (or restart, after a failure) loading: forget what was replayed; requests
        get COORDINATOR_LOAD_IN_PROGRESS. ``epoch``: the leader epoch in cluster mode."""

    def replay(self, index: int, entries: Sequence[LoadedRecord | LoadedMarker]) -> None:
        """Apply one chunk of the log, in log order. Raising fails the load (retried)."""

    def complete_load(self, index: int, read_end: int) -> int:
        """Serve the partition; returns how many groups or transactions it holds (for the
        log). ``read_end``: the offset the load read to."""

    def unload(self, index: int) -> None:
        """Stop serving the partition: its state goes, its requests get NOT_COORDINATOR."""

    def batch(self, write: Any) -> bytes:
        """The record batch a write appends."""

    def append_timeout_ms(self, write: Any) -> int:
        """How long a write's append waits for the ISR."""

    def settled(self, index: int, write: Any, code: int, info: Any) -> None:
        """A write was appended (``code`` 0, ``info`` logcore's LogAppendInfo) or failed."""


class _Superseded(Exception):
    """The partition closed (or was hosted anew) while its load read: the load stops."""


class _Partition:
    """One hosted partition: its state, epoch, load task and appender queue."""

    def __init__(self, index: int, epoch: int | None) -> None:
        self.index = index
        self.epoch = epoch
        self.state = PartitionState.LOADING
        self.failures = 0
        self.queue: collections.deque[Any] = collections.deque()
        self.appender: asyncio.Task[None] | None = None
        self.draining = False  # enqueue is appending writes inline (_drain_inline)
        self.loader: asyncio.Task[None] | None = None


class CoordinatorRuntime:
    """The hosted partitions of one internal topic. See the module docstring.

    ``reload_on_new_epoch``: whether a newer leader epoch of a partition already led here
    loads it again (the transaction coordinator: its epoch fences markers) or keeps it
    (the group coordinator)."""

    def __init__(self, broker: Any, spec: TopicSpec, handler: ShardHandler, *, load_chunk_bytes: int,
                 reload_on_new_epoch: bool = False, retry_backoff_ms: int = LOAD_RETRY_BACKOFF_MS,
                 retry_backoff_max_ms: int = LOAD_RETRY_BACKOFF_MAX_MS) -> None:
        self.broker = broker
        self.spec = spec
        self.handler = handler
        self.load_chunk_bytes = max(int(load_chunk_bytes), 1)
        self.reload_on_new_epoch = reload_on_new_epoch
        # A failed write reloads its partition from the log (``reload``): for handlers whose
        # memory changes before their records are durable (the group coordinator).
        self.reload_on_failed_write = False
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.closed = False
        self._partitions: dict[int, _Partition] = {}
        self._create_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ state

    @property
    def cluster_mode(self) -> bool:
        return getattr(self.broker, "cluster", None) is not None

    def state(self, index: int) -> PartitionState | None:
        """The partition's state; None when it is not hosted here."""
        p = self._partitions.get(index)
        return None if p is None else p.state

    def hosted(self) -> list[int]:
        return sorted(self._partitions)

    def epoch(self, index: int) -> int | None:
        p = self._partitions.get(index)
        return None if p is None else p.epoch

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """A task the runtime cancels at shutdown."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ hosting

    async def start(self) -> None:
        """Single node: load every partition of an existing topic (in the background). In
        cluster mode nothing is hosted until LeaderAndIsr (``on_become_leader``)."""
        if self.cluster_mode:
            return
        topic = self.broker.log_manager.topics.get(self.spec.name)
        if topic is not None:
            self._host_all(topic)

    async def load_all(self) -> None:
        """Single node: host every partition of an existing topic and wait until they are
        loaded (or failed). In cluster mode nothing is hosted until LeaderAndIsr."""
        if self.cluster_mode:
            return
        topic = self.broker.log_manager.topics.get(self.spec.name)
        if topic is not None:
            loads = self._host_all(topic)
            if loads:
                await asyncio.gather(*loads, return_exceptions=True)

    async def ensure_topic(self) -> Any:
        """The internal topic, created (and hosted) on first use on a single node. In
        cluster mode the local topic (or None): created through ZooKeeper and hosted on
        LeaderAndIsr."""
        manager = self.broker.log_manager
        if self.cluster_mode:
            return manager.topics.get(self.spec.name)
        async with self._create_lock:
            topic = manager.topics.get(self.spec.name)
            if topic is None:
                spec = self.spec
                topic = await manager.create_topic_async(self.broker.executor, spec.name, spec.num_partitions,
                                                         spec.replication_factor, spec.configs)
                log.info("created %s (%d partitions)", spec.name, spec.num_partitions)
                # Empty partitions load at once: wait, so that the client's next request
                # does not get COORDINATOR_LOAD_IN_PROGRESS.
                loads = self._host_all(topic)
                if loads:
                    await asyncio.gather(*loads)
            self._host_all(topic)
            return topic

    def _host_all(self, topic: Any) -> list[asyncio.Task[Any]]:
        if self.closed:
            return []
        return [self._host(p.index, None) for p in topic.partitions if p.index not in self._partitions]

    def _host(self, index: int, epoch: int | None) -> asyncio.Task[Any]:
        """LOADING from now on: the handler begins at once (requests get
        COORDINATOR_LOAD_IN_PROGRESS, not NOT_COORDINATOR), the read runs in a task."""
        p = self._partitions[index] = _Partition(index, epoch)
        self.handler.begin_load(index, epoch)
        p.loader = self.spawn(self._load(p))
        return p.loader

    def _leads(self, index: int) -> bool:
        """Whether the replica manager says this broker leads the partition now (the hooks
        may run after a newer LeaderAndIsr was applied: the current role decides)."""
        state = self.broker.replicas.partitions.get((self.spec.name, index))
        return state is not None and state.leader is not None

    async def on_become_leader(self, index: int) -> None:
        """This broker now leads the partition (Kafka's ``onElection``): load it in the
        background with its leader epoch."""
        if self.closed or not self._leads(index):
            return
        topic = self.broker.log_manager.topics.get(self.spec.name)
        if topic is None or index >= len(topic.partitions):
            log.error("told to lead %s-%d, which has no local log", self.spec.name, index)
            return
        epoch = self.broker.replicas.partitions[(self.spec.name, index)].leader_epoch
        p = self._partitions.get(index)
        if p is not None:
            if not self.reload_on_new_epoch or p.epoch == epoch:
                p.epoch = epoch
                return  # leader -> leader: what is loaded stays
            self._close(p)
        log.info("leading %s-%d in epoch %d: loading it", self.spec.name, index, epoch)
        self._host(index, epoch)

    async def on_resign(self, index: int) -> None:
        """This broker no longer leads the partition (Kafka's ``onResignation``). Ignored
        when the replica manager says it leads it again (a stale call)."""
        if self._leads(index):
            return
        p = self._partitions.get(index)
        if p is not None:
            self._close(p)
            log.info("resigned %s-%d", self.spec.name, index)

    def reload(self, index: int) -> bool:
        """Fence the partition and load it again from the log: a write failed, so what the
        handler holds in memory may be ahead of the log (Kafka's runtime reverts its
        timeline snapshot instead; reloading gives the same state: exactly what is in the
        log). ``handler.unload`` drops the state, queued writes get NOT_COORDINATOR, then
        the partition is LOADING (COORDINATOR_LOAD_IN_PROGRESS) until replayed. Returns
        False, after closing it, when the broker no longer leads the partition (cluster
        mode) or shuts down; False without a change when it is not hosted."""
        p = self._partitions.get(index)
        if p is None or p.state is PartitionState.CLOSED:
            return False
        epoch = p.epoch
        self._close(p)
        if self.closed or (self.cluster_mode and not self._leads(index)):
            return False
        self._host(index, epoch)
        return True

    def on_topic_deleted(self) -> int:
        """The topic was deleted: every hosted partition resigns (the next FindCoordinator
        creates it anew). Returns how many resigned. An append in flight fails on the closed
        log and its request gets NOT_COORDINATOR too."""
        hosted = list(self._partitions.values())
        for p in hosted:
            self._close(p)
        return len(hosted)

    def _close(self, p: _Partition) -> None:
        """CLOSED: out of the table, the load stops, the handler drops the partition's
        state, queued writes get NOT_COORDINATOR (one being appended settles on its own)."""
        if self._partitions.get(p.index) is p:
            del self._partitions[p.index]
        waiting = p.state is PartitionState.FAILED
        if p.state is not PartitionState.CLOSED:
            _set_state(p, PartitionState.CLOSED)
        if waiting and p.loader is not None and not p.loader.done():
            p.loader.cancel()  # asleep before a retry (a read in flight ends on its own)
        writes = list(p.queue)
        p.queue.clear()
        self.handler.unload(p.index)
        for w in writes:
            w.fail(_NOT_COORDINATOR)

    async def shutdown(self) -> None:
        """Broker shutdown (before the logs close): writes already queued are appended
        (their requests are answered), then every partition closes."""
        self.closed = True
        while True:
            appenders = [p.appender for p in self._partitions.values()
                         if p.appender is not None and not p.appender.done()]
            if not appenders:
                break
            await asyncio.gather(*appenders, return_exceptions=True)
        for p in list(self._partitions.values()):
            self._close(p)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------------ loading

    def _current(self, p: _Partition) -> bool:
        return self._partitions.get(p.index) is p and p.state is not PartitionState.CLOSED

    async def _load(self, p: _Partition) -> None:
        """LOADING until replayed to the end (ACTIVE); FAILED and retried after a backoff
        while it cannot be read or replayed; stops when the partition closes."""
        while self._current(p):
            if p.state is PartitionState.FAILED:
                _set_state(p, PartitionState.LOADING)
                self.handler.begin_load(p.index, p.epoch)  # again: nothing half-replayed is kept
            started = self.broker.clock.monotonic()
            try:
                read_end, records = await self._replay_log(p)
            except _Superseded:
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of a load is retried, never final
                if not self._current(p):
                    return
                _set_state(p, PartitionState.FAILED)
                delay_ms = min(self.retry_backoff_ms * 2 ** p.failures, self.retry_backoff_max_ms)
                p.failures += 1
                log.error("cannot load %s-%d (attempt %d): %s: %s; retrying in %d ms", self.spec.name,
                          p.index, p.failures, type(exc).__name__, exc, delay_ms,
                          exc_info=not isinstance(exc, (OSError, logcore.LogcoreError)))
                # On the broker's clock: a virtual clock (pylog.testing) retries on advance().
                await self.broker.clock.sleep(delay_ms / 1000.0)
                continue
            if not self._current(p):
                return
            _set_state(p, PartitionState.ACTIVE)
            held = self.handler.complete_load(p.index, read_end)
            if records or p.failures:
                log.info("loaded %d records of %s-%d (%d held) in %.3f s%s", records, self.spec.name, p.index,
                         held, self.broker.clock.monotonic() - started,
                         f" after {p.failures} failed attempts" if p.failures else "")
            return

    async def _replay_log(self, p: _Partition) -> tuple[int, int]:
        """Read the partition from log start to the end it had when the load began, one
        chunk at a time on an I/O thread, replaying each chunk on the loop. Returns the
        offset read to and the number of entries replayed."""
        topic = self.broker.log_manager.topics.get(self.spec.name)
        if topic is None or p.index >= len(topic.partitions):
            raise logcore.LogcoreError(f"{self.spec.name}-{p.index} has no local log")
        partition = topic.partitions[p.index]
        plog = partition.log
        key = (partition.topic, partition.index)
        offset = plog.log_start_offset
        end = plog.log_end_offset
        replayed = 0
        while offset < end:
            chunk = await self.broker.io.run_ordered(key, read_chunk, plog, offset, self.load_chunk_bytes)
            if not self._current(p):
                raise _Superseded
            self.handler.replay(p.index, chunk.entries)
            replayed += len(chunk.entries)
            if chunk.next_offset <= offset:
                break
            offset = chunk.next_offset
            await asyncio.sleep(0)  # the loop's other work runs between chunks
        return max(offset, end), replayed

    # ------------------------------------------------------------------ appends

    def enqueue(self, index: int, writes: Iterable[Any]) -> None:
        """Append ``writes`` to the partition, in order, after those already queued. A
        partition not hosted here (or closed while shutting down with nothing queued)
        fails them with NOT_COORDINATOR.

        Inline writes: when nothing is queued or being appended for the partition and the
        append needs no wait for the ISR (a single node: ``must_wait_for_acks``; in cluster
        mode every write waits for the ISR in the appender task), a write is appended and settled here, on the caller's turn of
        the loop, as inline produce appends are (``try_append_inline``: small, nothing for
        the partition on an I/O thread). The order is the queue's either way: the first
        write that cannot go inline, and all after it, go to the appender task. A write
        settled inline answers its request without two more loop turns (the appender
        task's start, the request's future): an OffsetCommit round trip on one node."""
        writes = list(writes)
        if not writes:
            return
        p = self._partitions.get(index)
        if p is None or (self.closed and (p.appender is None or p.appender.done())):
            for w in writes:
                w.fail(_NOT_COORDINATOR)
            return
        p.queue.extend(writes)
        if p.appender is None or p.appender.done():
            if p.draining:
                return  # a write settled inline queued these: the drain below takes them
            self._drain_inline(p)
            if p.queue:
                p.appender = self.spawn(self._append_loop(p))

    def _drain_inline(self, p: _Partition) -> None:
        """Append the queued writes inline while each can be (see ``enqueue``); stop at the
        first that cannot, leaving it queued. ``settled`` may enqueue more writes: they
        join the queue and are taken here in turn (``p.draining``)."""
        if must_wait_for_acks(self.broker, (self.spec.name, p.index)):
            return
        handler = self.handler
        p.draining = True
        try:
            while p.queue:
                write = p.queue[0]
                code, info = self._append_one(p, write)
                if code == _NOT_INLINE:
                    return
                p.queue.popleft()
                handler.settled(p.index, write, code, info)
                if code:
                    self._after_failed_write(p, code)
        finally:
            p.draining = False

    def _partition(self, p: _Partition) -> Any:
        """The local partition a write of ``p`` is appended to; None when ``p`` is no longer
        current or the topic is gone (the write gets NOT_COORDINATOR)."""
        topic = self.broker.log_manager.topics.get(self.spec.name)
        if not self._current(p) or topic is None or p.index >= len(topic.partitions):
            return None
        return topic.partitions[p.index]

    def _append_one(self, p: _Partition, write: Any) -> tuple[int, Any]:
        """One write appended inline: (code, info) when settled; (``_NOT_INLINE``, None)
        when the append must go to a thread (nothing was appended)."""
        partition = self._partition(p)
        if partition is None:
            return _NOT_COORDINATOR, None
        try:
            info = try_append_inline(self.broker, partition, self.handler.batch(write), -1)
        except AppendError as exc:
            log.warning("append to %s-%d failed: %s", self.spec.name, p.index, exc)
            return exc.code, None
        except logcore.LogcoreError as exc:
            if not partition.log.closed:
                log.error("append to %s-%d failed: %s", self.spec.name, p.index, exc)
                return errors.code_for_exception(exc), None
            log.info("%s-%d was closed during an append: %s", self.spec.name, p.index, exc)
            return _NOT_COORDINATOR, None  # the topic was deleted meanwhile (resigned)
        if info is None:
            return _NOT_INLINE, None
        return 0, info

    async def _append_loop(self, p: _Partition) -> None:
        handler = self.handler
        name = self.spec.name
        while p.queue:
            write = p.queue.popleft()
            code = 0
            appended = False
            info = None
            partition = self._partition(p)
            if partition is None:
                code = _NOT_COORDINATOR
            else:
                try:
                    info = await append_replicated(self.broker, partition, handler.batch(write),
                                                   handler.append_timeout_ms(write))
                except AppendError as exc:
                    code = exc.code
                    appended = exc.appended
                    log.warning("append to %s-%d failed: %s", name, p.index, exc)
                except logcore.LogcoreError as exc:
                    if not partition.log.closed:
                        raise
                    code = _NOT_COORDINATOR  # the topic was deleted meanwhile (resigned)
                    log.info("%s-%d was closed during an append: %s", name, p.index, exc)
            handler.settled(p.index, write, code, info)
            if code and not appended:
                self._after_failed_write(p, code)

    def _after_failed_write(self, p: _Partition, code: int) -> None:
        """With ``reload_on_failed_write``, a write that failed without reaching the log
        reloads the current partition (``reload``), as Kafka's runtime reverts its snapshot
        when an append fails. A write that is in the leader's log but timed out waiting for
        the ISR is not undone (Kafka keeps it too: the log has it; it commits when the ISR
        catches up or goes with a leader change). A partition already closed or replaced is
        left alone."""
        if not self.reload_on_failed_write or not self._current(p):
            return
        reloading = self.reload(p.index)
        log.warning("%s-%d: a write failed (error %d); %s", self.spec.name, p.index, code,
                    "reloading it from the log" if reloading else "resigned")


class DeadlineTimer:
    """One asyncio timer at a sans-IO coordinator's next deadline (``arm(deadline_ms)`` on
    the injected clock's monotonic milliseconds; re-arming at the same deadline is free)."""

    def __init__(self, clock: Any, fire: Callable[[], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._handle: Any = None  # the clock's timer handle (cancel())
        self._deadline: int | None = None

    def arm(self, deadline_ms: int | None) -> None:
        if deadline_ms == self._deadline and self._handle is not None:
            return
        self.cancel()
        self._deadline = deadline_ms
        if deadline_ms is None:
            return
        delay = max(deadline_ms - self._clock.monotonic() * 1000, 0) / 1000.0
        # On the clock, not the loop: a virtual clock (pylog.testing) fires it on advance().
        self._handle = self._clock.call_later(delay, self._expired)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadline = None

    def _expired(self) -> None:
        self._handle = None
        self._deadline = None
        self._fire()
