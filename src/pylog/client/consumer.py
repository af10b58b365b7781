"""The blocking consumer: ``pylog.client.Consumer``.

The asyncio core (``pylog.client.aio.consumer.ConsumerCore``) runs on a private event
loop in a daemon thread; each blocking call runs one coroutine there and waits for it.
Fetches for the next ``poll`` are sent as soon as data is handed out, so the network works
while the application processes the records.

Consumer groups (``subscribe``, ``commit``, ``committed``) work in embedded mode
(``log_dir=``, see ``pylog.client.aio._embedded_group``); over the network they raise
``GroupsNotAvailableError`` for now: use ``assign`` and ``seek``.

Example::

    from pylog.client import Consumer, TopicPartition

    with Consumer({"bootstrap.servers": "127.0.0.1:9092",
                   "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition("events", 0)])
        for record in c.poll(timeout=1.0):
            print(record.offset, record.key, record.value, record.headers)
        for tp, cols in c.poll_columns().items():   # numpy columns, no per-record objects
            print(tp, cols.num_records, cols.offsets[-1])

Thread-safety: one thread at a time (as Kafka's ``KafkaConsumer``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import logcore
from pylog.client._loop import LoopThread
from pylog.client.aio._offsets import EARLIEST, LATEST
from pylog.client.aio.consumer import _GROUPS as GROUPS_MESSAGE
from pylog.client.aio.consumer import (
    ConsumerCore,
    as_partitions,
    commit_offsets,
    rebalance_callback,
)
from pylog.client.config import CONSUMER, Resolved, resolve
from pylog.client.errors import GroupsNotAvailableError
from pylog.client.records import ConsumerRecord, TopicPartition

__all__ = ["Consumer"]

log = logging.getLogger("pylog.client.consumer")


def _log_failed_commit(fut: concurrent.futures.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("asynchronous commit failed: %s", fut.exception())


class Consumer:
    """Kafka consumer (blocking facade over the asyncio core).

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ..., "auto.offset.reset":
            "earliest"}``).
        **kwargs: the same names with underscores (``auto_offset_reset="earliest"``).

    Raises:
        ConfigError: an unknown or mistyped setting (named in the message).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        settings = resolve(CONSUMER, config, kwargs)
        self._thread = LoopThread(f"pylog-consumer-io-{settings['client.id'] or ''}")
        try:
            self._core: ConsumerCore = self._thread.run(self._make(settings))
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        self._iter_buffer: collections.deque[ConsumerRecord] = collections.deque()
        self._listener: Any = None

    @staticmethod
    async def _make(settings: Resolved) -> ConsumerCore:
        core = ConsumerCore(settings)
        try:
            await core.cluster.open()  # embedded mode: the directory in use fails here
        except BaseException:
            await core.close()
            raise
        return core

    @property
    def settings(self) -> Resolved:
        return self._core.settings

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self._thread.run(coro, timeout)

    def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these partitions (TopicPartitions or (topic, partition) pairs),
        replacing the previous assignment. Positions start unset: the first poll takes
        them from ``auto.offset.reset`` unless ``seek`` sets them."""
        tps = as_partitions(partitions)
        self._iter_buffer.clear()
        self._run(self._core.assign(tps))

    def assignment(self) -> set[TopicPartition]:
        return set(self._core.assignment)

    def _group(self, call: str) -> Any:
        if self._core.group is None:
            raise GroupsNotAvailableError(f"{call} " + GROUPS_MESSAGE)
        return self._core.group

    def subscribe(self, topics: Any = None, pattern: Any = None, listener: Any = None) -> None:
        """Consume every partition of ``topics`` (or of the topics matching ``pattern``) as
        a member of ``group.id``. Embedded mode only for now: over the network it raises
        ``GroupsNotAvailableError``.

        ``listener.on_partitions_revoked(partitions)`` and
        ``listener.on_partitions_assigned(partitions)`` are called from ``poll`` (in the
        caller's thread) when the assignment changes; they may call ``commit``.

        Raises:
            InvalidGroupIdError: no ``group.id``. IllegalStateError: after ``assign()``,
            or another consumer of this process is subscribed in the group.
        """
        group = self._group("subscribe()")
        self._iter_buffer.clear()
        self._run(group.subscribe(topics, pattern))
        self._listener = listener

    def unsubscribe(self) -> None:
        """Drop the subscription or the assignment."""
        self._iter_buffer.clear()
        dropped = self._run(self._unsubscribe())
        rebalance_callback(self._listener, "on_partitions_revoked", dropped)
        self._listener = None

    async def _unsubscribe(self) -> list[TopicPartition]:
        if self._core.group is not None:
            return self._core.group.unsubscribe()  # type: ignore[no-any-return]
        dropped = sorted(self._core.assignment)
        await self._core.assign([])
        return dropped

    def commit(self, offsets: Any = None, asynchronous: bool = False) -> None:
        """Store ``offsets`` (``{partition: offset}``; default: the position of every
        assigned partition, records taken by the iterator but not yet yielded excepted) as
        the group's committed offsets. Embedded mode only for now (else
        ``GroupsNotAvailableError``).

        Args:
            asynchronous: return at once; a failure is logged.

        Raises:
            InvalidGroupIdError: no ``group.id``. KafkaTimeoutError, ApiError: the
            coordinator did not take them.
        """
        group = self._group("commit()")
        wanted = commit_offsets(offsets)
        if wanted is None:
            wanted = self._consumed()
        if asynchronous:
            fut = asyncio.run_coroutine_threadsafe(group.commit(wanted), self._thread.loop)
            fut.add_done_callback(_log_failed_commit)
            return
        self._run(group.commit(wanted))

    def _consumed(self) -> dict[TopicPartition, int]:
        out = {tp: st.position for tp, st in self._core.assignment.items()
               if st.position is not None}
        for r in reversed(self._iter_buffer):  # not yet yielded: not consumed
            out[TopicPartition(r.topic, r.partition)] = r.offset
        return out

    def committed(self, partitions: Iterable[Any], timeout: float | None = None
                  ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition; None where there is none.
        Embedded mode only for now (else ``GroupsNotAvailableError``)."""
        group = self._group("committed()")
        return self._run(group.committed(as_partitions(partitions), timeout))  # type: ignore[no-any-return]

    def _rebalance(self) -> None:
        """A subscribed consumer's assignment brought up to date; the listener hears of it
        here, in the caller's thread (so that it may call the consumer)."""
        if self._core.subscribed:
            revoked, assigned = self._run(self._core.group.refresh())
            if revoked:
                dropped = set(revoked)
                self._iter_buffer = collections.deque(
                    r for r in self._iter_buffer if (r.topic, r.partition) not in dropped)
            rebalance_callback(self._listener, "on_partitions_revoked", revoked)
            rebalance_callback(self._listener, "on_partitions_assigned", assigned)

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
        tps = as_partitions(partitions) if partitions else list(self._core.assignment)
        for tp in tps:
            self._drop_buffered(tp)
        self._run(self._reset(tps, "earliest"))

    def seek_to_end(self, *partitions: Any) -> None:
        """Move to the end offset (all assigned partitions if none given)."""
        tps = as_partitions(partitions) if partitions else list(self._core.assignment)
        for tp in tps:
            self._drop_buffered(tp)
        self._run(self._reset(tps, "latest"))

    def _drop_buffered(self, tp: TopicPartition) -> None:
        if self._iter_buffer:
            self._iter_buffer = collections.deque(
                r for r in self._iter_buffer if (r.topic, r.partition) != tp)

    def position(self, partition: Any, timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``partition`` (looked up from
        ``auto.offset.reset`` if unset).

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
        return {tp for tp, st in self._core.assignment.items() if st.paused}

    def highwater(self, partition: Any) -> int:
        """The high watermark the last fetch of ``partition`` reported (-1 before one)."""
        (tp,) = as_partitions([partition])
        return self._core._state(tp).high_watermark

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records of the assigned partitions, waiting up to ``timeout`` seconds for some.

        Returns:
            At most ``max_records`` (default ``max.poll.records``) records, in offset order
            per partition; empty when nothing arrived in time.

        Raises:
            IllegalStateError: nothing assigned.
            NoOffsetForPartitionError: no position (or out of range) with
                ``auto.offset.reset`` none.
            ApiError: a non-retriable fetch error (e.g. CorruptMessageError).
        """
        if self._iter_buffer:
            n = max_records or self._core.max_poll_records
            return [self._iter_buffer.popleft() for _ in range(min(n, len(self._iter_buffer)))]
        self._rebalance()
        return self._run(self._core.poll(timeout, max_records))  # type: ignore[no-any-return]

    def poll_columns(self, timeout: float = 1.0) -> dict[TopicPartition, logcore.Columns]:
        """Fetched records as ``logcore.Columns`` per partition (numpy arrays: offsets,
        timestamps, key/value offsets and bytes, validity, header counts), with no Python
        object per record; positions move past them. Headers are not decoded."""
        self._rebalance()
        return self._run(self._core.poll_columns(timeout))  # type: ignore[no-any-return]

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
            if not self._iter_buffer:
                self._rebalance()
                self._iter_buffer.extend(self._run(self._core.poll(1.0, None)))
                continue
            yield self._iter_buffer.popleft()

    def close(self) -> None:
        """Stop fetching, close connections, stop the I/O thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            try:
                if self._core.subscribed and not self._core.closed:
                    rebalance_callback(self._listener, "on_partitions_revoked",
                                       sorted(self._core.assignment))
            finally:
                self._run(self._core.close())
        finally:
            self._thread.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
