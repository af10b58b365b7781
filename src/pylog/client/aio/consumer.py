"""The asyncio consumer (``pylog.client.aio.Consumer``) and the core the blocking one shares.

A pull consumer that controls its own position (Kafka's consumer design): ``assign()`` partitions,
optionally ``seek()``, then ``poll()`` records or ``poll_columns()`` numpy columns. A
partition without a position gets one from ``auto.offset.reset`` (``earliest``: the log
start offset, ``latest``: the end, ``none``: ``NoOffsetForPartitionError``); a position that
fell out of the log (``OFFSET_OUT_OF_RANGE``, e.g. after retention) is reset the same way.

Consumer groups (``subscribe``, ``commit``, ``committed``): in embedded mode
(``log.dir``) through the embedded broker's group coordinator (``_embedded_group``); over
the network not yet, they raise ``GroupsNotAvailableError``.

Example::

    async with Consumer({"bootstrap.servers": "127.0.0.1:9092",
                         "auto.offset.reset": "earliest"}) as c:
        await c.assign([TopicPartition("events", 0)])
        for record in await c.poll(timeout=1.0):
            print(record.offset, record.key, record.value)

Event-loop affinity: an asyncio ``Consumer`` belongs to the loop it is used on.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import logcore
from pylog.client.aio._cluster import make_cluster
from pylog.client.aio._fetcher import Fetcher, PartitionState
from pylog.client.aio._offsets import EARLIEST, LATEST, list_offsets
from pylog.client.config import CONSUMER, Resolved, resolve
from pylog.client.errors import (
    ClientClosedError,
    GroupsNotAvailableError,
    IllegalStateError,
    NoOffsetForPartitionError,
)
from pylog.client.records import ConsumerRecord, TopicPartition

__all__ = ["Consumer", "ConsumerCore", "as_partitions", "commit_offsets", "rebalance_callback"]

_ids = itertools.count(1)


def as_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    """``TopicPartition``s from TopicPartitions or (topic, partition) pairs.

    Raises:
        TypeError: anything else.
    """
    out = []
    for p in partitions:
        topic, partition = getattr(p, "topic", None), getattr(p, "partition", None)
        if topic is None and isinstance(p, tuple) and len(p) == 2:
            topic, partition = p
        if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
            raise TypeError(f"expected TopicPartition or (topic, partition), got {p!r}")
        out.append(TopicPartition(topic, partition))
    return out


class ConsumerCore:
    """Assignment, positions, fetcher. Built and used on one loop."""

    def __init__(self, settings: Resolved) -> None:
        self.settings = settings
        self.client_id = settings["client.id"] or f"pylog-consumer-{next(_ids)}"
        self.cluster = make_cluster(settings, self.client_id)
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.fetcher = Fetcher(self.cluster, self.assignment, settings)
        self.reset_policy: str = settings["auto.offset.reset"]
        self.api_timeout = settings["default.api.timeout.ms"] / 1000
        self.max_poll_records: int = settings["max.poll.records"]
        self.isolation_level = self.fetcher.isolation_level
        self.closed = False
        # Group calls: embedded mode only for now (None over the network).
        self.group: Any = None
        if self.cluster.embedded:
            from pylog.client.aio._embedded_group import EmbeddedGroup

            self.group = EmbeddedGroup(self)

    @property
    def subscribed(self) -> bool:
        return self.group is not None and self.group.subscribed

    def _check(self) -> None:
        if self.closed:
            raise ClientClosedError("the consumer is closed")

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} is not assigned")
        return st

    async def assign(self, partitions: list[TopicPartition]) -> None:
        self._check()
        if self.subscribed:
            raise IllegalStateError("assign() after subscribe(): a consumer either assigns "
                                    "partitions or subscribes; call unsubscribe() first")
        keep = set(partitions)
        for tp in list(self.assignment):
            if tp not in keep:
                del self.assignment[tp]
                self.fetcher.completed.pop(tp, None)
        for tp in partitions:
            self.assignment.setdefault(tp, PartitionState())
        self.cluster.wanted = {tp.topic for tp in partitions}
        if partitions:
            self.cluster.request_update()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check()
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        st = self._state(tp)
        st.position = offset
        st.reset_to = None
        self.fetcher.completed.pop(tp, None)

    def request_reset(self, tps: list[TopicPartition], strategy: str) -> None:
        self._check()
        for tp in tps:
            st = self._state(tp)
            st.position = None
            st.reset_to = strategy
            self.fetcher.completed.pop(tp, None)

    async def update_positions(self, timeout: float | None = None) -> None:
        """Give every assigned partition without a position one (pending seeks first, then
        ``auto.offset.reset``)."""
        if self.group is not None and self.group.group_id:
            # A consumer with a group starts where the group left off (Kafka's
            # refreshCommittedOffsetsIfNeeded), unless a reset was asked for.
            initial = [tp for tp, st in self.assignment.items()
                       if st.position is None and st.reset_to is None]
            if initial:
                for tp, offset in (await self.group.committed(initial, timeout)).items():
                    st = self.assignment.get(tp)
                    if offset is not None and st is not None and st.position is None:
                        st.position = offset
        need: dict[TopicPartition, int] = {}
        for tp, st in self.assignment.items():
            if st.position is not None:
                continue
            strategy = st.reset_to or self.reset_policy
            if strategy == "none":
                raise NoOffsetForPartitionError(
                    f"{tp.topic}-{tp.partition} has no position and auto.offset.reset is none")
            need[tp] = EARLIEST if strategy == "earliest" else LATEST
        if not need:
            return
        found = await list_offsets(self.cluster, need, isolation_level=self.isolation_level,
                                   timeout=self.api_timeout if timeout is None else timeout,
                                   backoff=self.cluster.retry_backoff)
        for tp, (offset, _) in found.items():
            state = self.assignment.get(tp)
            if state is not None and state.position is None:
                state.position = offset
                state.reset_to = None

    def _handle_out_of_range(self) -> None:
        oor, self.fetcher.out_of_range = self.fetcher.out_of_range, []
        for tp in oor:
            st = self.assignment.get(tp)
            if st is None:
                continue
            if self.reset_policy == "none":
                raise NoOffsetForPartitionError(
                    f"{tp.topic}-{tp.partition}: offset {st.position} is out of range and "
                    "auto.offset.reset is none")
            st.position = None
            st.reset_to = self.reset_policy  # not the committed offset that is out of range

    def _raise_errors(self) -> None:
        errs, self.fetcher.errors = self.fetcher.errors, []
        if errs:
            raise errs[0]

    async def _wait_for_data(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            self._raise_errors()
            self._handle_out_of_range()
            if self.cluster.needs_update():
                try:
                    await asyncio.wait_for(self.cluster.update(), max(0.01, deadline - loop.time()))
                except Exception:  # noqa: BLE001 - retried on the next turn; poll must not fail
                    pass
            if any(st.position is None for st in self.assignment.values()):
                await self.update_positions(max(0.01, deadline - loop.time()))
            self.fetcher.send_fetches()
            if self.fetcher.completed:
                return
            left = deadline - loop.time()
            if left <= 0:
                return
            self.fetcher.arrived.clear()
            try:
                await asyncio.wait_for(self.fetcher.arrived.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass

    async def poll(self, timeout: float, max_records: int | None) -> list[ConsumerRecord]:
        self._check()
        if not self.assignment and not self.subscribed:
            raise IllegalStateError("poll() before assign(): no partitions assigned")
        await self._wait_for_data(timeout)
        out = self.fetcher.take_records(max_records or self.max_poll_records)
        self.fetcher.send_fetches()  # prefetch while the caller processes
        return out

    async def poll_columns(self, timeout: float) -> dict[TopicPartition, logcore.Columns]:
        self._check()
        if not self.assignment and not self.subscribed:
            raise IllegalStateError("poll_columns() before assign(): no partitions assigned")
        await self._wait_for_data(timeout)
        out = self.fetcher.take_columns()
        self.fetcher.send_fetches()
        return out

    async def position(self, tp: TopicPartition, timeout: float | None) -> int:
        self._check()
        st = self._state(tp)
        if st.position is None:
            await self.update_positions(timeout)
        assert st.position is not None
        return st.position

    async def offsets(self, tps: list[TopicPartition], ts: int | dict[TopicPartition, int],
                      timeout: float | None) -> dict[TopicPartition, tuple[int, int]]:
        wanted = dict(ts) if isinstance(ts, dict) else {tp: ts for tp in tps}
        return await list_offsets(self.cluster, wanted, isolation_level=self.isolation_level,
                                  timeout=self.api_timeout if timeout is None else timeout,
                                  backoff=self.cluster.retry_backoff)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.group is not None:
            self.group.close()
        for task in list(self.fetcher.in_flight.values()):
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing
                pass
        self.fetcher.completed.clear()
        await self.cluster.close()


_GROUPS = ("needs the client's side of the group protocols, which is not there yet over the "
           "network (the broker's group coordinator is); use assign() and seek(), or embedded "
           "mode (log_dir=), where consumer groups work")


def commit_offsets(offsets: Any) -> dict[TopicPartition, int] | None:
    """``commit()``'s argument: None (every position), or ``{partition: offset}``.

    Raises:
        TypeError / ValueError: not a mapping of partitions to offsets >= 0.
    """
    if offsets is None:
        return None
    if not isinstance(offsets, Mapping):
        raise TypeError(f"commit() takes {{TopicPartition: offset}}, got {offsets!r}")
    out = {}
    for k, v in offsets.items():
        (tp,) = as_partitions([k])
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{tp.topic}-{tp.partition}: an offset is an int >= 0, got {v!r}")
        out[tp] = v
    return out


def rebalance_callback(listener: Any, name: str, partitions: list[TopicPartition]) -> Any:
    """Call ``listener.<name>(partitions)`` (``on_partitions_revoked`` /
    ``on_partitions_assigned``, kafka-python's ``ConsumerRebalanceListener`` names) if
    there is something to report; returns what it returned (an awaitable is awaited by
    the asyncio face)."""
    if listener is None or not partitions:
        return None
    fn = getattr(listener, name, None)
    return fn(list(partitions)) if fn is not None else None


class Consumer:
    """Kafka consumer, asyncio API (assign; groups in embedded mode).

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ..., "auto.offset.reset": ...}``).
        **kwargs: the same names with underscores.

    Raises:
        ConfigError: an unknown or mistyped setting.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = ConsumerCore(resolve(CONSUMER, config, kwargs))
        self._listener: Any = None

    @property
    def settings(self) -> Resolved:
        return self._core.settings

    async def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these partitions (replacing the previous assignment)."""
        await self._core.cluster.open()
        await self._core.assign(as_partitions(partitions))

    def assignment(self) -> set[TopicPartition]:
        return set(self._core.assignment)

    def _group(self, call: str) -> Any:
        if self._core.group is None:
            raise GroupsNotAvailableError(f"{call} " + _GROUPS)
        return self._core.group

    async def _notify(self, name: str, partitions: list[TopicPartition]) -> None:
        result = rebalance_callback(self._listener, name, partitions)
        if inspect.isawaitable(result):
            await result

    async def subscribe(self, topics: Any = None, pattern: Any = None, listener: Any = None) -> None:
        """Consume every partition of ``topics`` (or of the topics matching ``pattern``) as
        a member of ``group.id``: embedded mode only (see ``_embedded_group``); over the
        network it raises ``GroupsNotAvailableError``. ``listener``'s
        ``on_partitions_revoked`` / ``on_partitions_assigned`` (plain or async) are called
        by ``poll`` when the assignment changes."""
        await self._group("subscribe()").subscribe(topics, pattern)
        self._listener = listener

    async def unsubscribe(self) -> None:
        """Drop the subscription or the assignment."""
        if self._core.group is not None:
            dropped = self._core.group.unsubscribe()
        else:
            dropped = sorted(self._core.assignment)
            await self._core.assign([])
        await self._notify("on_partitions_revoked", dropped)
        self._listener = None

    async def commit(self, offsets: Any = None) -> None:
        """Store ``offsets`` (``{partition: offset}``; default: every position) as the
        group's committed offsets (embedded mode; ``GroupsNotAvailableError`` over the
        network)."""
        await self._group("commit()").commit(commit_offsets(offsets))

    async def committed(self, partitions: Iterable[Any], timeout: float | None = None
                        ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition, None where none (embedded mode;
        ``GroupsNotAvailableError`` over the network)."""
        return await self._group("committed()").committed(as_partitions(partitions), timeout)  # type: ignore[no-any-return]

    async def _rebalance(self) -> None:
        if self._core.subscribed:
            revoked, assigned = await self._core.group.refresh()
            await self._notify("on_partitions_revoked", revoked)
            await self._notify("on_partitions_assigned", assigned)

    def seek(self, partition: Any, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` on the next poll."""
        (tp,) = as_partitions([partition])
        self._core.seek(tp, offset)

    def seek_to_beginning(self, *partitions: Any) -> None:
        """Move to the log start offset (of all assigned partitions if none given)."""
        tps = as_partitions(partitions) if partitions else list(self._core.assignment)
        self._core.request_reset(tps, "earliest")

    def seek_to_end(self, *partitions: Any) -> None:
        """Move to the end offset (of all assigned partitions if none given)."""
        tps = as_partitions(partitions) if partitions else list(self._core.assignment)
        self._core.request_reset(tps, "latest")

    async def position(self, partition: Any, timeout: float | None = None) -> int:
        """The offset of the next record to be returned for ``partition``."""
        (tp,) = as_partitions([partition])
        return await self._core.position(tp, timeout)

    def pause(self, *partitions: Any) -> None:
        for tp in as_partitions(partitions):
            self._core._state(tp).paused = True

    def resume(self, *partitions: Any) -> None:
        for tp in as_partitions(partitions):
            self._core._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._core.assignment.items() if st.paused}

    def highwater(self, partition: Any) -> int:
        """The high watermark the last fetch of ``partition`` reported (-1 before one)."""
        (tp,) = as_partitions([partition])
        return self._core._state(tp).high_watermark

    async def poll(self, timeout: float = 1.0, max_records: int | None = None
                   ) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions, waiting up to ``timeout`` s for some.

        Returns at most ``max_records`` (default ``max.poll.records``); an empty list when
        nothing arrived in time.

        Raises:
            IllegalStateError: nothing assigned.
            NoOffsetForPartitionError: no position and ``auto.offset.reset`` is none.
            ApiError: a non-retriable fetch error (e.g. CORRUPT_MESSAGE).
        """
        await self._rebalance()
        return await self._core.poll(timeout, max_records)

    async def poll_columns(self, timeout: float = 1.0) -> dict[TopicPartition, logcore.Columns]:
        """Fetched records as ``logcore.Columns`` per partition: no Python object per record.

        Headers are not decoded (``header_counts`` says how many each record has).
        """
        await self._rebalance()
        return await self._core.poll_columns(timeout)

    async def beginning_offsets(self, partitions: Iterable[Any], timeout: float | None = None
                                ) -> dict[TopicPartition, int]:
        tps = as_partitions(partitions)
        found = await self._core.offsets(tps, EARLIEST, timeout)
        return {tp: off for tp, (off, _) in found.items()}

    async def end_offsets(self, partitions: Iterable[Any], timeout: float | None = None
                          ) -> dict[TopicPartition, int]:
        tps = as_partitions(partitions)
        found = await self._core.offsets(tps, LATEST, timeout)
        return {tp: off for tp, (off, _) in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[Any, int], timeout: float | None = None
                                ) -> dict[TopicPartition, tuple[int, int] | None]:
        """The first (offset, timestamp) at or after each timestamp; None where none."""
        wanted = {as_partitions([k])[0]: int(v) for k, v in timestamps.items()}
        found = await self._core.offsets(list(wanted), wanted, timeout)
        return {tp: (v if v[0] >= 0 else None) for tp, v in found.items()}

    async def close(self) -> None:
        """Stop fetching and close (a subscribed consumer's listener hears its partitions
        revoked first). Idempotent."""
        try:
            if self._core.subscribed and not self._core.closed:
                await self._notify("on_partitions_revoked", sorted(self._core.assignment))
        finally:
            await self._core.close()

    async def __aenter__(self) -> Consumer:
        await self._core.cluster.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while not self._core.closed:
            await self._rebalance()
            recs = await self._core.poll(1.0, 1)
            if recs:
                return recs[0]
        raise StopAsyncIteration
