"""The asyncio consumer: ``pylog.client.aio.Consumer`` (the core is ``_consumer_core``).

A pull consumer that controls its own position (Kafka's consumer design). Partitions come
from ``assign()``, or from a consumer group after ``subscribe()`` (with ``group.id``): the
group's members share the partitions of the subscribed topics, rebalancing when members
come and go, through Kafka's classic group protocol or, with ``group.protocol=consumer``,
the consumer group protocol of KIP-848 (the broker assigns). ``poll()`` returns records,
``poll_columns()`` numpy columns. Positions start from the group's committed offsets, else
``auto.offset.reset``; ``commit()`` and auto commit store them.

Example::

    async with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "billing",
                         "auto.offset.reset": "earliest"}) as c:
        await c.subscribe(["events"])
        for record in await c.poll(timeout=1.0):
            print(record.offset, record.key, record.value)
        await c.commit()

Event-loop affinity: an asyncio ``Consumer`` belongs to the loop it is used on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import logcore
from pylog.client.aio._consumer_core import ConsumerCore
from pylog.client.aio._offsets import EARLIEST, LATEST
from pylog.client.aio._rebalance import RebalanceListener, as_offsets, as_partitions, as_pattern
from pylog.client.config import CONSUMER, Resolved, resolve
from pylog.client.records import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["Consumer", "ConsumerCore", "as_partitions"]


class Consumer:
    """Kafka consumer, asyncio API.

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ..., "group.id": ...}``).
        **kwargs: the same names with underscores.

    Raises:
        ConfigError: an unknown or mistyped setting.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._core = ConsumerCore(resolve(CONSUMER, config, kwargs))

    @property
    def settings(self) -> Resolved:
        return self._core.settings

    async def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these partitions (replacing the previous assignment; an empty
        list unassigns).

        Raises:
            IllegalStateError: the consumer is subscribed.
            LogDirInUseError: embedded mode, and another process holds ``log.dir``.
        """
        await self._core.cluster.open()
        await self._core.assign(as_partitions(partitions))

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned now (by ``assign`` or by the group)."""
        return set(self._core.assignment)

    async def subscribe(self, topics: Any = None, pattern: Any = None, listener: Any = None, *,
                        on_assign: Any = None, on_revoke: Any = None, on_lost: Any = None) -> None:
        """Join the consumer group (``group.id``) for these topics; the next ``poll`` joins.

        Args:
            topics: topic names, or a regex (a compiled pattern or a string starting with
                ``^``) matched in full against every topic (new ones are picked up at the
                next metadata refresh, ``metadata.max.age.ms``).
            pattern: the regex as a keyword.
            listener: an object with ``on_partitions_revoked(partitions)``,
                ``on_partitions_assigned(partitions)`` and optionally
                ``on_partitions_lost(partitions)`` (kafka-python's style), methods or
                coroutines.
            on_assign, on_revoke, on_lost: callables ``(consumer, partitions)``
                (confluent-kafka's style) instead of ``listener``.

        Raises:
            InvalidGroupIdError: no ``group.id``. IllegalStateError: partitions were
                assigned with ``assign()``. TypeError / ValueError: bad arguments.
        """
        names, regex = as_pattern(topics, pattern)
        cb = RebalanceListener(self, listener, on_assign, on_revoke, on_lost)
        await self._core.cluster.open()
        await self._core.subscribe(names, regex, cb)

    def subscription(self) -> set[str]:
        """The subscribed topics (a pattern's current matches)."""
        return set(self._core.subscription.topics)

    async def unsubscribe(self) -> None:
        """Leave the group (the revoke callback runs first) or drop the assignment."""
        await self._core.unsubscribe()

    async def commit(self, offsets: Any = None, asynchronous: bool = False, *,
                     message: ConsumerRecord | None = None, timeout: float | None = None) -> Any:
        """Commit positions to the group.

        Args:
            offsets: None (the positions of everything consumed; partitions of a topic
                deleted meanwhile are left out), a mapping of partition to offset /
                ``OffsetAndMetadata`` / (offset, metadata), or a list of objects with
                ``topic``, ``partition``, ``offset``. An offset is the next record to read.
            asynchronous: send and return an ``asyncio.Task`` (result: the committed offsets)
                without waiting; not retried.
            message: commit just past this record (confluent-kafka's ``message=``).
            timeout: seconds for a synchronous commit (default ``default.api.timeout.ms``;
                in a revoke callback during ``close``, at most what is left of close's
                timeout).

        Returns:
            The committed offsets (synchronous), or the task (asynchronous).

        Raises:
            CommitFailedError: the group rebalanced and the member is no longer in it.
            RebalanceInProgressError: a rebalance is under way; poll, then commit again.
            UnknownTopicOrPartitionError: a partition in ``offsets`` no longer exists.
            InvalidGroupIdError: no ``group.id``. KafkaTimeoutError: not done in time.
            ClientClosedError: the consumer is closed.
        """
        parsed = _commit_offsets(offsets, message)
        if asynchronous:
            self._core._check()
            if parsed is None:
                return self._core.start_async_commit(self._core.consumed_offsets(), consumed=True)
            return self._core.start_async_commit(parsed)
        return await self._core.commit(parsed, timeout)

    async def committed(self, partitions: Any, timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None where nothing is committed)."""
        return await self._core.committed(_partition_list(partitions), timeout)

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group id, generation, member id and group instance id, for
        ``Producer.send_offsets_to_transaction`` (confluent-kafka's name). Take it after the
        ``poll`` that returned the records, so it names the generation they came from.

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        return self._core.group_metadata()

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
        A subscribed consumer joins or rejoins its group here (rebalance callbacks run here).

        Returns at most ``max_records`` (default ``max.poll.records``); an empty list when
        nothing arrived in time.

        Raises:
            IllegalStateError: neither assigned nor subscribed.
            NoOffsetForPartitionError: no position and ``auto.offset.reset`` is none.
            ApiError: a non-retriable fetch error (e.g. CORRUPT_MESSAGE).
        """
        return await self._core.poll(timeout, max_records)

    async def poll_columns(self, timeout: float = 1.0, *, copy_values: bool = True
                           ) -> dict[TopicPartition, logcore.Columns]:
        """Fetched records as ``logcore.Columns`` per partition: no Python object per record.

        Headers are not decoded (``header_counts`` says how many each record has).
        ``copy_values=False``: values are not copied out of the fetched response where its
        batches are uncompressed; the columns then locate them with ``value_starts`` and
        ``value_lengths`` in ``value_data`` (the response bytes, read-only, kept alive by
        the columns) and ``value_offsets`` is None (docs/client.md, "Columns").
        """
        return await self._core.poll_columns(timeout, copy_values)

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

    async def close(self, timeout: float | None = None) -> None:
        """Commit (``enable.auto.commit``), revoke the partitions (the callback may commit),
        leave the group, close. ``timeout`` (30 s) bounds the group's part: the auto commit,
        the commits the callback makes and the LeaveGroup. Idempotent."""
        await self._core.close(timeout)

    async def __aenter__(self) -> Consumer:
        await self._core.cluster.open()  # embedded mode: the directory in use fails here
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while not self._core.closed:
            recs = await self._core.poll(1.0, 1)
            if recs:
                return recs[0]
        raise StopAsyncIteration


def _partition_list(partitions: Any) -> list[TopicPartition]:
    if isinstance(partitions, tuple) and len(partitions) == 2 and isinstance(partitions[0], str):
        return as_partitions([partitions])
    return as_partitions(partitions)


def _commit_offsets(offsets: Any, message: ConsumerRecord | None
                    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
    if message is not None:
        if offsets is not None:
            raise TypeError("give offsets or message=, not both")
        return {TopicPartition(message.topic, message.partition): OffsetAndMetadata(
            message.offset + 1, "", getattr(message, "leader_epoch", -1))}
    return None if offsets is None else as_offsets(offsets)
