"""The blocking consumer: ``pylog.client.Consumer``.

The asyncio core (``pylog.client.aio._consumer_core.ConsumerCore``) runs on a private event
loop in a daemon thread; each blocking call runs one coroutine there and waits for it.
Fetches for the next ``poll`` are sent as soon as data is handed out, and heartbeats go out
from that thread, so the network and the group membership go on while the application
processes records.

Rebalance callbacks run on the application's thread, inside ``poll`` (or ``close``,
``unsubscribe``), as Kafka runs them inside ``poll()``: the core hands each one to the
waiting call (``_serve``), which runs it and hands back its outcome. A callback may call the
consumer (``commit``, ``position``, ``seek`` ...), also during ``close`` (Kafka's
``commitSync`` in ``onPartitionsRevoked``); ``close``'s timeout bounds such a commit. Each
waiting call has an inbox of its own: a callback goes to the innermost call waiting (a
callback that calls ``close`` or ``unsubscribe`` serves the callbacks of that call), one
handed over while no call waits is kept for the next, and a call's own wake-up can never be
taken by another.

Example::

    from pylog.client import Consumer

    with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "billing",
                   "auto.offset.reset": "earliest"}) as c:
        c.subscribe(["events"])
        for record in c.poll(timeout=1.0):
            print(record.offset, record.key, record.value, record.headers)
        c.commit()

Thread-safety: one thread at a time (as Kafka's ``KafkaConsumer``).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import os
import queue
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import logcore
from pylog.client._loop import CLOSE_GRACE, LoopThread
from pylog.client.aio._consumer_core import ConsumerCore
from pylog.client.aio._offsets import EARLIEST, LATEST
from pylog.client.aio._rebalance import RebalanceListener, as_partitions, as_pattern
from pylog.client.aio.consumer import _commit_offsets, _partition_list
from pylog.client.config import CONSUMER, Resolved, resolve
from pylog.client.errors import IllegalStateError
from pylog.client.records import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["Consumer"]

# How long close() or the next poll waits for an interrupted poll to hand its records back.
_RECLAIM_WAIT_S = 5.0


class Consumer:
    """Kafka consumer (blocking facade over the asyncio core).

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ..., "group.id": "g",
            "auto.offset.reset": "earliest"}``).
        **kwargs: the same names with underscores (``auto_offset_reset="earliest"``).

    Raises:
        ConfigError: an unknown or mistyped setting (named in the message).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        settings = resolve(CONSUMER, config, kwargs)
        self._thread = LoopThread(f"pylog-consumer-io-{settings['client.id'] or ''}")
        # Callbacks the loop wants run on the application's thread, (fn, partitions, future):
        # put in the inbox of the innermost waiting call (``_serving``), else kept
        # (``_unserved``) for the next call that waits.
        self._inbox_lock = threading.Lock()
        self._serving: list[queue.SimpleQueue[Any]] = []
        self._unserved: collections.deque[Any] = collections.deque()
        try:
            self._core: ConsumerCore = self._thread.run(self._make(settings))
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        self._iter_buffer: collections.deque[ConsumerRecord] = collections.deque()
        # polls whose wait was interrupted while their coroutine went on (``_serve``)
        self._abandoned: list[concurrent.futures.Future[Any]] = []

    async def _make(self, settings: Resolved) -> ConsumerCore:
        core = ConsumerCore(settings)
        core.run_callback = self._dispatch
        try:
            await core.cluster.open()  # embedded mode: the directory in use fails here
        except BaseException:
            await core.close()
            raise
        return core

    @property
    def settings(self) -> Resolved:
        return self._core.settings

    # ------------------------------------------------------------------ threads

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self._thread.run(coro, timeout)

    async def _dispatch(self, fn: Callable[[list[TopicPartition]], Any],
                        partitions: list[TopicPartition]) -> Any:
        """On the loop: have the application's thread run ``fn`` and wait for it."""
        fut = asyncio.get_running_loop().create_future()
        item = (fn, partitions, fut)
        with self._inbox_lock:
            if self._serving:
                self._serving[-1].put(item)
            else:
                self._unserved.append(item)  # the next waiting call runs it
        return await fut

    def _serve(self, coro: Any, *, returns_records: bool = False,
               close_timeout: float | None = None) -> Any:
        """Run ``coro`` on the loop; meanwhile run the callbacks handed over to this call.

        ``returns_records``: ``coro`` hands out records (``poll``). If the wait is
        interrupted (Ctrl-C's KeyboardInterrupt, SIGTERM's SystemExit) the coroutine goes on
        and its records would be lost, though their positions moved past them: they are
        taken back by ``_reclaim`` (the next ``poll`` returns them; ``commit`` and ``close``
        do not count them as consumed).

        ``close_timeout``: ``coro`` is the close, abandoned (``LoopThread.abandon``: the
        connections aborted) if not done within that many seconds and ``CLOSE_GRACE``;
        then None is returned."""
        if self._thread.in_loop_thread():
            coro.close()
            raise IllegalStateError("a blocking consumer call from the consumer's own I/O thread "
                                    "would deadlock")
        loop = self._thread.loop
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self._inbox_lock:
            while self._unserved:
                inbox.put(self._unserved.popleft())
            self._serving.append(inbox)
        cf = None
        try:
            cf = asyncio.run_coroutine_threadsafe(coro, loop)
            cf.add_done_callback(lambda _: inbox.put(None))
            deadline = (None if close_timeout is None
                        else time.monotonic() + max(close_timeout, 0.0) + CLOSE_GRACE)
            while True:
                try:
                    item = inbox.get(timeout=None if deadline is None
                                     else max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    self._thread.abandon(cf, self._core.cluster.abort, close_timeout)
                    return None
                if item is None:  # this call is done
                    return cf.result()
                fn, partitions, fut = item
                if fut.cancelled():
                    continue  # asked for by a rebalance that was called off (e.g. by close)
                try:
                    result, error = fn(partitions), None
                except BaseException as exc:  # noqa: BLE001 - handed back to the loop
                    result, error = None, exc
                loop.call_soon_threadsafe(_settle, fut, result, error)
        except BaseException:
            if returns_records and cf is not None and not cf.done():
                self._abandoned.append(cf)
            raise
        finally:
            with self._inbox_lock:
                self._serving.remove(inbox)
                # Handed over after this call ended (a rebalance going on in the
                # background): the next waiting call runs them.
                while True:
                    try:
                        item = inbox.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        self._unserved.append(item)

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these partitions (TopicPartitions or (topic, partition) pairs),
        replacing the previous assignment; an empty list unassigns. Positions start unset:
        the first poll takes the group's committed offsets (with ``group.id``), else
        ``auto.offset.reset``, unless ``seek`` sets them.

        Raises:
            IllegalStateError: the consumer is subscribed.
        """
        tps = as_partitions(partitions)
        self._iter_buffer.clear()
        self._serve(self._core.assign(tps))

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned now (by ``assign`` or by the group)."""
        return self._run(self._snapshot(lambda: set(self._core.assignment)))  # type: ignore[no-any-return]

    @staticmethod
    async def _snapshot(fn: Callable[[], Any]) -> Any:
        return fn()

    def subscribe(self, topics: Any = None, pattern: Any = None, listener: Any = None, *,
                  on_assign: Any = None, on_revoke: Any = None, on_lost: Any = None) -> None:
        """Join the consumer group (``group.id``) for these topics; ``poll`` joins it.

        Args:
            topics: topic names, or a regex (a compiled pattern, or a string starting with
                ``^`` as confluent-kafka takes it) matched in full against every topic;
                topics created later are picked up at the next metadata refresh
                (``metadata.max.age.ms``).
            pattern: the regex as a keyword (kafka-python's ``pattern=``).
            listener: kafka-python's ``ConsumerRebalanceListener`` style: an object with
                ``on_partitions_revoked(partitions)``, ``on_partitions_assigned(partitions)``
                and optionally ``on_partitions_lost(partitions)``.
            on_assign, on_revoke, on_lost: confluent-kafka's style: callables
                ``(consumer, partitions)``.

        Callbacks run on this thread inside ``poll``; they get sorted lists of
        ``TopicPartition`` (newly assigned ones for ``on_assign``; under the cooperative
        protocol only the partitions that move are revoked). An exception from a callback
        is raised by that ``poll`` once the rebalance step is done.

        Raises:
            InvalidGroupIdError: no ``group.id``. IllegalStateError: partitions were
                assigned with ``assign()``. TypeError / ValueError: bad arguments.
        """
        names, regex = as_pattern(topics, pattern)
        cb = RebalanceListener(self, listener, on_assign, on_revoke, on_lost)
        self._serve(self._core.subscribe(names, regex, cb))
        _leave_groups_on_sigterm(self)

    def subscription(self) -> set[str]:
        """The subscribed topics (a pattern's current matches)."""
        return self._run(self._snapshot(lambda: set(self._core.subscription.topics)))  # type: ignore[no-any-return]

    def unsubscribe(self) -> None:
        """Leave the group (the revoke callback runs first) or drop the manual assignment."""
        self._iter_buffer.clear()
        self._serve(self._core.unsubscribe())

    # ------------------------------------------------------------------ offsets

    def commit(self, offsets: Any = None, asynchronous: bool = False, *,
               message: ConsumerRecord | None = None, timeout: float | None = None) -> Any:
        """Commit positions to the group (``group.id``).

        Args:
            offsets: None (the position after everything ``poll`` returned; partitions of
                a topic deleted meanwhile are left out), a mapping of partition to offset /
                ``OffsetAndMetadata(offset, metadata)`` / (offset, metadata), or a list of
                objects with ``topic``, ``partition``, ``offset`` (confluent-kafka's
                TopicPartition). An offset is the next record to read; the metadata string
                is stored with it.
            asynchronous: send without waiting, not retried; returns a
                ``concurrent.futures.Future`` of the committed offsets.
            message: commit just past this record (confluent-kafka's ``message=``).
            timeout: seconds for a synchronous commit (default ``default.api.timeout.ms``;
                in a revoke callback during ``close``, at most what is left of close's
                timeout); retriable errors are retried until then.

        Returns:
            The committed offsets (synchronous) or a Future of them (asynchronous).

        Raises:
            CommitFailedError: the group rebalanced and this member is no longer in it
                (the time between polls exceeded ``max.poll.interval.ms``?).
            RebalanceInProgressError: a rebalance is under way: poll, then commit again.
            UnknownTopicOrPartitionError: a partition in ``offsets`` no longer exists.
            InvalidGroupIdError: no ``group.id``. KafkaTimeoutError: not done in time.
            ClientClosedError: the consumer is closed.
        """
        parsed = _commit_offsets(offsets, message)
        consumed = parsed is None
        if parsed is None:
            self._reclaim()
            parsed = self._run(self._consumed())
        if asynchronous:
            return asyncio.run_coroutine_threadsafe(self._commit_async(parsed, consumed),
                                                    self._thread.loop)
        return self._run(self._core.commit(parsed, timeout, consumed=consumed))

    async def _commit_async(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                            consumed: bool) -> Any:
        self._core._check()
        return await self._core.start_async_commit(offsets, consumed)

    async def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The consumed positions: records the iterator took but has not yielded yet are
        not consumed."""
        out = self._core.consumed_offsets()
        for r in self._iter_buffer:
            tp = TopicPartition(r.topic, r.partition)
            if tp in out and r.offset < out[tp].offset:
                out[tp] = OffsetAndMetadata(r.offset, "", -1)
        return out

    def committed(self, partitions: Any, timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed ``OffsetAndMetadata`` (offset, metadata, leader epoch) of
        each partition, None where nothing is committed."""
        return self._run(self._core.committed(_partition_list(partitions), timeout))  # type: ignore[no-any-return]

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group id, generation, member id and group instance id, for
        ``Producer.send_offsets_to_transaction`` (confluent-kafka's name). Take it after the
        ``poll`` that returned the records, so it names the generation they came from.

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        return self._run(self._snapshot(self._core.group_metadata))  # type: ignore[no-any-return]

    def seek(self, partition: Any, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` on the next poll (records already fetched
        for it are dropped)."""
        (tp,) = as_partitions([partition])
        self._drop_buffered(tp)
        self._thread.run(self._seek(tp, offset))

    async def _seek(self, tp: TopicPartition, offset: int) -> None:
        self._core.seek(tp, offset)

    async def _reset(self, tps: list[TopicPartition], strategy: str) -> None:
        self._core.request_reset(tps, strategy)

    def seek_to_beginning(self, *partitions: Any) -> None:
        """Move to the log start offset (all assigned partitions if none given)."""
        tps = as_partitions(partitions) if partitions else sorted(self.assignment())
        for tp in tps:
            self._drop_buffered(tp)
        self._run(self._reset(tps, "earliest"))

    def seek_to_end(self, *partitions: Any) -> None:
        """Move to the end offset (all assigned partitions if none given)."""
        tps = as_partitions(partitions) if partitions else sorted(self.assignment())
        for tp in tps:
            self._drop_buffered(tp)
        self._run(self._reset(tps, "latest"))

    def _drop_buffered(self, tp: TopicPartition) -> None:
        if self._iter_buffer:
            self._iter_buffer = collections.deque(
                r for r in self._iter_buffer if (r.topic, r.partition) != tp)

    def position(self, partition: Any, timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``partition`` (looked up from
        the committed offset or ``auto.offset.reset`` if unset).

        Raises:
            IllegalStateError: not assigned. NoOffsetForPartitionError: reset policy none.
        """
        (tp,) = as_partitions([partition])
        pos: int = self._run(self._core.position(tp, timeout))
        # Records taken by the iterator but not yet yielded are not consumed.
        for r in self._iter_buffer:
            if (r.topic, r.partition) == tp:
                return r.offset
        return pos

    def pause(self, *partitions: Any) -> None:
        """Stop fetching these partitions until ``resume``."""
        self._run(self._set_paused(as_partitions(partitions), True))

    def resume(self, *partitions: Any) -> None:
        self._run(self._set_paused(as_partitions(partitions), False))

    async def _set_paused(self, tps: list[TopicPartition], paused: bool) -> None:
        for tp in tps:
            self._core._state(tp).paused = paused

    def paused(self) -> set[TopicPartition]:
        return self._run(self._snapshot(  # type: ignore[no-any-return]
            lambda: {tp for tp, st in self._core.assignment.items() if st.paused}))

    def highwater(self, partition: Any) -> int:
        """The high watermark the last fetch of ``partition`` reported (-1 before one)."""
        (tp,) = as_partitions([partition])
        return self._core._state(tp).high_watermark

    # ------------------------------------------------------------------ poll

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records of the assigned partitions, waiting up to ``timeout`` seconds for some. A
        subscribed consumer joins or rejoins its group here, and its rebalance callbacks
        run here.

        Returns:
            At most ``max_records`` (default ``max.poll.records``) records, in offset order
            per partition; empty when nothing arrived in time.

        Raises:
            IllegalStateError: neither assigned nor subscribed.
            NoOffsetForPartitionError: no position (or out of range) with
                ``auto.offset.reset`` none.
            ApiError: a non-retriable fetch or group error (e.g. CorruptMessageError,
                FencedInstanceIdError); the exception of a rebalance callback.
        """
        self._reclaim()
        if self._iter_buffer:
            n = max_records or self._core.max_poll_records
            return [self._iter_buffer.popleft() for _ in range(min(n, len(self._iter_buffer)))]
        return self._serve(self._core.poll(timeout, max_records),  # type: ignore[no-any-return]
                           returns_records=True)

    def _reclaim(self) -> None:
        """Put the records of interrupted polls back in front of the buffer (``_serve``)."""
        while self._abandoned:
            cf = self._abandoned.pop()
            try:
                records = cf.result(_RECLAIM_WAIT_S)
            except BaseException:  # noqa: BLE001 - the poll failed or ran on: nothing handed out
                continue
            if records:
                self._iter_buffer.extendleft(reversed(records))

    def poll_columns(self, timeout: float = 1.0, *, copy_values: bool = True
                     ) -> dict[TopicPartition, logcore.Columns]:
        """Fetched records as ``logcore.Columns`` per partition (numpy arrays: offsets,
        timestamps, key/value offsets and bytes, validity, header counts), with no Python
        object per record; positions move past them. Headers are not decoded.
        ``copy_values=False``: values stay in the fetched response where its batches are
        uncompressed, located by ``value_starts``/``value_lengths`` (``value_offsets`` is
        None; docs/client.md, "Columns")."""
        return self._serve(  # type: ignore[no-any-return]
            self._core.poll_columns(timeout, copy_values))

    def beginning_offsets(self, partitions: Iterable[Any], timeout: float | None = None
                          ) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        found = self._run(self._core.offsets(as_partitions(partitions), EARLIEST, timeout))
        return {tp: off for tp, (off, _) in found.items()}

    def end_offsets(self, partitions: Iterable[Any], timeout: float | None = None
                    ) -> dict[TopicPartition, int]:
        """Each partition's end offset (high watermark; last stable offset with
        read_committed)."""
        found = self._run(self._core.offsets(as_partitions(partitions), LATEST, timeout))
        return {tp: off for tp, (off, _) in found.items()}

    def offsets_for_times(self, timestamps: Mapping[Any, int], timeout: float | None = None
                          ) -> dict[TopicPartition, tuple[int, int] | None]:
        """The first (offset, timestamp) at or after each timestamp (ms); None where none."""
        wanted = {as_partitions([k])[0]: int(v) for k, v in timestamps.items()}
        found = self._run(self._core.offsets(list(wanted), wanted, timeout))
        return {tp: (v if v[0] >= 0 else None) for tp, v in found.items()}

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever (polling with a 1 s timeout) until the consumer is closed."""
        while not self._closed:
            self._reclaim()
            if not self._iter_buffer:
                self._iter_buffer.extend(self._serve(self._core.poll(1.0, None),
                                                     returns_records=True))
                continue
            yield self._iter_buffer.popleft()

    def close(self, timeout: float | None = None) -> None:
        """Commit what was consumed (``enable.auto.commit``), revoke the partitions (the
        callback runs here, and may commit), leave the group (dynamic members), stop
        fetching, close connections, stop the I/O thread. ``timeout`` (30 s) bounds the
        group's part: the auto commit, the commits the callback makes and the LeaveGroup
        (a JoinGroup still waiting on the broker is abandoned, not waited for). Idempotent.

        A ``timeout`` given bounds the whole close, as Kafka's ``close(Duration)``: what is
        still running then is abandoned, the connections are aborted and the I/O thread is
        stopped (``pylog.client._loop``), the revoke callback excepted once it has started
        (it runs on this thread)."""
        if self._closed:
            return
        self._closed = True
        _IN_GROUPS.discard(self)
        try:
            self._reclaim()
            if self._iter_buffer:
                self._run(self._rewind())
            self._serve(self._core.close(timeout), close_timeout=timeout)
        finally:
            self._thread.stop()

    async def _rewind(self) -> None:
        """Records the iterator took but did not yield are not consumed: move back to them
        (so the commit on close does not skip them)."""
        first: dict[TopicPartition, int] = {}
        for r in self._iter_buffer:
            first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
        self._iter_buffer.clear()
        for tp, offset in first.items():
            if tp in self._core.assignment:
                self._core.seek(tp, offset)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


# -------------------------------------------------------------- SIGTERM and exit
# A process killed by SIGTERM's default action (a plain `kill`, a process supervisor) dies
# at once: its group members stay in their groups until session.timeout.ms (45 s), holding
# their partitions, and what they consumed is not committed. Where the application leaves
# SIGTERM at its default, the first subscribe() on the main thread makes SIGTERM raise
# SystemExit(143) instead, as Ctrl-C raises KeyboardInterrupt: `with` blocks and `finally`
# clauses close the consumers (commit with enable.auto.commit, LeaveGroup), and at exit
# the consumers still open are closed. An application with a SIGTERM handler of its own
# keeps it untouched.

_IN_GROUPS: weakref.WeakSet[Consumer] = weakref.WeakSet()
_EXIT_CLOSE_TIMEOUT_S = 10.0


def _on_sigterm(signum: int, frame: Any) -> None:
    if not _IN_GROUPS:  # no consumer left to close: SIGTERM's default action after all
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise SystemExit(128 + signum)


def _leave_groups_on_sigterm(consumer: Consumer) -> None:
    _IN_GROUPS.add(consumer)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers are set from the main thread only
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


@atexit.register
def _close_at_exit() -> None:
    for consumer in list(_IN_GROUPS):
        try:
            consumer.close(_EXIT_CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - exiting: nothing left to report it to
            pass
