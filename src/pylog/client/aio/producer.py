"""The asyncio producer (``pylog.client.aio.Producer``) and the core both faces share.

``ProducerCore`` holds the cluster view, the accumulator, the sender task and the
partitioner. The asyncio ``Producer`` here and the blocking ``pylog.client.Producer`` are
thin: they serialize and check a record, find its partition, reserve its bytes of
``buffer.memory`` (waiting up to ``max.block.ms``) and append it; the sender does the rest
(see ``_sender``).

Example::

    async with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
        fut = await p.send("events", b"hello", key=b"user-1")
        meta = await fut          # RecordMetadata(topic, partition, offset, timestamp, ...)
        await p.flush()

Event-loop affinity: an asyncio ``Producer`` belongs to the loop it was started on.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from time import time_ns as _time_ns
from typing import Any

from pylog._clock import SYSTEM_CLOCK, Clock, SystemClock
from pylog.client import _many as many
from pylog.client._many import BatchDelivery, SendManyFuture, column_args
from pylog.client._native import RecordAccumulator
from pylog.client.aio._accumulator import RECORD_OVERHEAD, estimate_size
from pylog.client.aio._cluster import TopicInfo, make_cluster
from pylog.client.aio._sender import Sender
from pylog.client.aio._txn_manager import TransactionManager
from pylog.client.config import PRODUCER, ConfigError, Resolved, resolve
from pylog.client.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from pylog.client.partitioner import StickyPartitioner, partition_for_key
from pylog.client.records import RecordMetadata

__all__ = ["Producer", "ProducerCore", "producer_settings"]

_ids = itertools.count(1)

Headers = list[tuple[str, bytes | None]]


def producer_settings(config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> Resolved:
    """Resolve producer settings and settle idempotence as Kafka 3.x+ does.

    ``enable.idempotence`` defaults to true but needs ``acks=all``, ``retries > 0`` and at most
    5 requests in flight: given explicitly with a conflicting setting it is an error;
    left at its default, a conflicting setting turns it off.

    A ``transactional.id`` needs idempotence: it is turned on, and a setting that conflicts
    with it (``enable.idempotence=false`` included) is an error, as in the Java client.

    Raises:
        ConfigError: as ``resolve``; conflicting explicit settings.
    """
    s = resolve(PRODUCER, config, kwargs)
    txn_id = s["transactional.id"]
    if txn_id is not None:
        if not txn_id:
            raise ConfigError("transactional.id: must not be empty (leave it unset for a "
                              "producer without transactions)")
        if "enable.idempotence" in s.explicit and not s["enable.idempotence"]:
            raise ConfigError("transactional.id needs enable.idempotence=true (remove "
                              "enable.idempotence=false)")
        s["enable.idempotence"] = True
    if s["enable.idempotence"]:
        conflicts = []
        if s["acks"] != -1:
            conflicts.append("acks must be all")
        if s["retries"] == 0:
            conflicts.append("retries must be > 0")
        if s["max.in.flight.requests.per.connection"] > 5:
            conflicts.append("max.in.flight.requests.per.connection must be <= 5")
        if conflicts:
            if txn_id is not None:
                raise ConfigError("transactional.id needs idempotence: " + "; ".join(conflicts))
            if "enable.idempotence" in s.explicit:
                raise ConfigError("enable.idempotence=true: " + "; ".join(conflicts))
            s["enable.idempotence"] = False
    need = s["linger.ms"] + s["request.timeout.ms"]
    if s["delivery.timeout.ms"] < need:
        if "delivery.timeout.ms" in s.explicit:
            raise ConfigError(f"delivery.timeout.ms must be at least linger.ms + "
                              f"request.timeout.ms ({need})")
        s["delivery.timeout.ms"] = need
    return s


# A checked record: (value, key, headers, timestamp ms, estimated size). A tuple, not an
# object: send() makes one per record, and a tuple costs a third of a slotted object.
Prepared = tuple[bytes | None, bytes | None, Headers | None, int, int]


def _as_bytes(what: str, data: Any) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)  # a copy: the caller may reuse its buffer after send()
    raise TypeError(f"{what} must be bytes or None (or set {what}.serializer), "
                    f"got {type(data).__name__}")


class ProducerCore:
    """Everything of a producer but its public face. Built and started on its loop."""

    def __init__(self, settings: Resolved, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        self._system_clock = type(clock) is SystemClock  # time.time_ns() inline in prepare
        self.client_id = settings["client.id"] or f"pylog-producer-{next(_ids)}"
        self.cluster = make_cluster(
            settings, self.client_id, auto_create=True,
            max_in_flight=settings["max.in.flight.requests.per.connection"])
        self.acc = RecordAccumulator(settings["batch.size"], settings["buffer.memory"],
                                     self._on_ready)
        self.sender = Sender(self.cluster, self.acc, settings, settings["enable.idempotence"])
        self.txn: TransactionManager | None = None
        if settings["transactional.id"] is not None:
            self.txn = self.sender.txn = TransactionManager(self.cluster, settings, self.sender)
        self.partitioner = StickyPartitioner(settings["batch.size"])
        self._custom_partitioner: Callable[..., int] | None = settings["partitioner.class"]
        self._ignore_keys: bool = settings["partitioner.ignore.keys"]
        self._plock = threading.Lock()
        self._key_ser = settings["key.serializer"]
        self._value_ser = settings["value.serializer"]
        self.max_block = settings["max.block.ms"] / 1000
        self.max_record = min(settings["max.request.size"], settings["buffer.memory"])
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1
        self._wake_pending = False
        self.closed = False

    async def open(self) -> None:
        """Embedded mode: open the data directory (a directory in use fails here)."""
        await self.cluster.open()

    def start(self) -> None:
        """Start the sender (call on the owning loop, after ``open``)."""
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.sender.start()

    def _on_ready(self) -> None:
        loop = self.loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self.sender.wake()
        elif not self._wake_pending:
            # One cross-thread wake-up at a time: each costs a self-pipe write and a GIL
            # hand-over, and the sender looks at every queue when it wakes anyway.
            self._wake_pending = True
            try:
                loop.call_soon_threadsafe(self._wake_from_thread)
            except RuntimeError:  # loop closed: the producer is closing
                self._wake_pending = False

    def _wake_from_thread(self) -> None:
        self._wake_pending = False
        self.sender.wake()

    def prepare(self, topic: str, value: Any, key: Any, headers: Any,
                timestamp_ms: int | None) -> Prepared:
        """Serialize and check one record (any thread): (value, key, headers, timestamp,
        estimated size).

        Raises:
            ClientClosedError, TypeError, RecordTooLargeError, ValueError.
        """
        if self.closed:
            raise ClientClosedError("send() on a closed producer")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if self.txn is not None:  # before any wait for metadata
            self.txn.state.check_in_transaction("send()")
        if self._key_ser is not None:
            key = self._key_ser(key)
        if self._value_ser is not None:
            value = self._value_ser(value)
        if value is not None and type(value) is not bytes:
            value = _as_bytes("value", value)
        if key is not None and type(key) is not bytes:
            key = _as_bytes("key", key)
        size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (
            len(value) if value is not None else 0)
        hdrs: Headers | None = None
        if headers:
            items = headers.items() if isinstance(headers, Mapping) else headers
            hdrs = []
            for name, hv in items:
                if not isinstance(name, str):
                    raise TypeError(f"header names must be str, got {name!r}")
                hdrs.append((name, _as_bytes(f"header {name!r}", hv)))
            size = estimate_size(key, value, hdrs)
        if size > self.max_record:
            raise RecordTooLargeError(
                f"a record of about {size} bytes is larger than max.request.size "
                f"({self.settings['max.request.size']}) or buffer.memory "
                f"({self.settings['buffer.memory']})")
        if timestamp_ms is None:
            ts = _time_ns() // 1_000_000 if self._system_clock else self.clock.time_ms()
        else:
            ts = int(timestamp_ms)
            if ts < 0:
                raise ValueError(f"timestamp_ms must be >= 0, got {ts}")
        return value, key, hdrs, ts, size

    def place(self, info: TopicInfo, key: bytes | None, size: int, partition: int | None) -> int:
        """The record's partition: explicit, custom partitioner, murmur2 of the key, sticky."""
        n = info.num_partitions
        if partition is not None:
            if not isinstance(partition, int) or not 0 <= partition < n:
                raise ValueError(f"partition {partition!r} is not in topic {info.name!r} "
                                 f"(0-{n - 1})")
            return partition
        if self._custom_partitioner is not None:
            p = self._custom_partitioner(key, list(range(n)), info.available())
            if not isinstance(p, int) or not 0 <= p < n:
                raise ValueError(f"partitioner.class returned {p!r} for a topic of {n} partitions")
            return p
        if key is not None and not self._ignore_keys:
            return partition_for_key(key, n)
        with self._plock:
            return self.partitioner.partition(info.name, n, info.available(), size)

    def check_send(self, topic: str, partition: int) -> None:
        """A transactional producer sends only inside a transaction; a partition new to the
        transaction is added to it before its records go (any thread).

        Raises:
            IllegalStateError: no transaction is open. TransactionError: it failed.
        """
        txn = self.txn
        if txn is not None and txn.state.check_send((topic, partition)):
            self._on_ready()

    def transactions(self) -> TransactionManager:
        if self.txn is None:
            raise IllegalStateError("transactions need transactional.id in the producer's "
                                    "settings")
        return self.txn

    def flush_mark(self) -> int:
        with self.acc.lock:
            return self.acc.next_batch_id

    async def flush(self, mark: int) -> None:
        self.sender.flush_mark = max(self.sender.flush_mark, mark)
        self.sender.wake()
        await self.sender.wait_for_completion(mark)

    async def close(self, timeout: float | None) -> None:
        self.closed = True
        if self.txn is not None:
            await self.txn.close()
        await self.sender.stop(1e9 if timeout is None else timeout)
        await self.cluster.close()


class Producer:
    """Kafka producer, asyncio API. Settings as ``pylog.client.config`` describes.

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ..., "linger.ms": 5}``).
        **kwargs: the same names with underscores (``linger_ms=5``).

    Raises:
        ConfigError: an unknown, mistyped or conflicting setting.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 **kwargs: Any) -> None:
        self._core = ProducerCore(producer_settings(config, kwargs), clock)
        self._memory = asyncio.Event()
        self._core.acc.memory_listeners.append(self._memory.set)
        self._started = False

    @property
    def settings(self) -> Resolved:
        return self._core.settings

    async def start(self) -> None:
        """Start the sender (``async with`` does it)."""
        if not self._started:
            await self._core.open()
            self._started = True
            self._core.start()

    async def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None
                   ) -> asyncio.Future[RecordMetadata]:
        """Queue a record; returns a future of its ``RecordMetadata``.

        Waits (up to ``max.block.ms``) only for the topic's metadata and for room in
        ``buffer.memory``.

        Raises:
            KafkaTimeoutError: no metadata or no memory within ``max.block.ms``.
            RecordTooLargeError, TypeError, ValueError: a record that cannot be sent.
            ClientClosedError: the producer is closed.
        """
        await self.start()
        core = self._core
        deadline = time.monotonic() + core.max_block
        value, key, hdrs, ts, size = core.prepare(topic, value, key, headers, timestamp_ms)
        info = core.cluster.topic(topic)
        if info is None:
            info = await core.cluster.wait_for_topic(topic, core.max_block)
        p = core.place(info, key, size, partition)
        core.check_send(topic, p)
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        if core.acc.append(topic, p, value, key, ts, hdrs, size, fut) is not None:
            return fut
        if not await self._reserve(size, deadline):
            raise KafkaTimeoutError(
                f"no room in buffer.memory ({core.settings['buffer.memory']} bytes) "
                f"within max.block.ms ({core.settings['max.block.ms']} ms)")
        core.acc.append(topic, p, value, key, ts, hdrs, size, fut, reserved=True)
        return fut

    async def send_many(self, topic: str, values: Any, keys: Any = None, *,
                        partition: int | None = None, timestamp_ms: int | None = None
                        ) -> asyncio.Future[list[BatchDelivery]]:
        """Queue a column of records as whole batches (the blocking ``Producer.send_many``,
        whose arguments and errors these are); returns a future of each batch's
        ``BatchDelivery``, failed with the first failed batch's error.

        Waits (up to ``max.block.ms``) only for the topic's metadata and for room in
        ``buffer.memory``.
        """
        await self.start()
        core = self._core
        if core.closed:
            raise ClientClosedError("send_many() on a closed producer")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if core.txn is not None:
            core.txn.state.check_in_transaction("send_many()")
        deadline = time.monotonic() + core.max_block
        vals, ks = column_args(values, keys)
        info = core.cluster.topic(topic)
        if info is None:
            info = await core.cluster.wait_for_topic(topic, core.max_block)
        ts = many.timestamp(core, timestamp_ms)
        queued: list[tuple[str, int, int, Any]] = []
        for run in many.plan(core, info, vals, ks, partition):
            if not await self._reserve(run.size, deadline):
                raise many.memory_timeout(core, queued, len(vals))
            queued.append(many.queue(core, info, topic, run, ts))
        done = SendManyFuture(queued)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[BatchDelivery]] = loop.create_future()

        def complete(_: SendManyFuture) -> None:
            if fut.done():
                return
            error = done.exception(0)
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(done.result(0))

        done.add_done_callback(lambda f: loop.call_soon_threadsafe(complete, f))
        return fut

    async def _reserve(self, size: int, deadline: float) -> bool:
        """Take ``size`` bytes of ``buffer.memory``, waiting for room until ``deadline``."""
        core = self._core
        while not core.acc.reserve(size, 0, blocking=False):
            left = deadline - time.monotonic()
            self._memory.clear()
            core.sender.wake()
            with core.acc.lock:
                core.acc.waiting_for_memory += 1
            try:
                await asyncio.wait_for(self._memory.wait(), max(0.0, left))
            except asyncio.TimeoutError:
                return False
            finally:
                with core.acc.lock:
                    core.acc.waiting_for_memory -= 1
        return True

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            headers: Any = None, partition: int | None = None,
                            timestamp_ms: int | None = None) -> RecordMetadata:
        """``send()`` and wait for the record's metadata."""
        fut = await self.send(topic, value, key, headers, partition, timestamp_ms)
        return await fut

    async def flush(self, timeout: float | None = None) -> None:
        """Send every record queued so far and wait until each succeeded or failed.

        Raises:
            KafkaTimeoutError: not all completed within ``timeout`` seconds.
        """
        await self.start()
        mark = self._core.flush_mark()
        try:
            await asyncio.wait_for(self._core.flush(mark), timeout)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"flush did not complete within {timeout:g} s") from None

    # ------------------------------------------------------------------ transactions

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its transaction coordinator; call once, before
        the first transaction. Fences older producers with the same id and completes what
        they left open.

        Args:
            timeout: seconds to wait (None: ``max.block.ms``).

        Raises:
            RetriableTransactionError: not done in time; call again to wait for it.
            FatalTransactionError: e.g. not authorized, or the broker has no transactions.
            IllegalStateError: no ``transactional.id``, or called twice.
        """
        await self.start()
        await self._core.transactions().init_transactions(timeout)

    def begin_transaction(self) -> None:
        """Open a transaction: what is sent until commit or abort is in it (no request)."""
        self._core.transactions().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                          timeout: float | None = None) -> None:
        """Commit a consumer's offsets as part of the transaction (consume-transform-produce):
        they are visible to the group only if the transaction commits.

        Args:
            offsets: as ``Consumer.commit``'s (a mapping of partition to offset, or a list
                of objects with topic, partition, offset): the next records to read.
            group_metadata: ``Consumer.consumer_group_metadata()`` of the consumer that read
                them (or a bare group id, without the member checks).
            timeout: seconds to wait (None: ``max.block.ms``).

        Raises:
            AbortableTransactionError: e.g. the consumer is no longer in that generation
                (its ``error`` is a ``CommitFailedError``): abort.
            FatalTransactionError, RetriableTransactionError, IllegalStateError: as above.
        """
        await self._core.transactions().send_offsets_to_transaction(
            offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every queued record, then commit the transaction.

        Raises:
            AbortableTransactionError: a record (or the offsets) failed: abort instead.
            FatalTransactionError, RetriableTransactionError, IllegalStateError: as above.
        """
        await self._core.transactions().commit_transaction(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with
        ``TransactionAbortedError``; what was written is never shown to read_committed
        consumers, and the offsets sent are dropped.

        Raises:
            FatalTransactionError, RetriableTransactionError, IllegalStateError: as above.
        """
        await self._core.transactions().abort_transaction(timeout)

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (fetching metadata if needed)."""
        info = self._core.cluster.topic(topic) or await self._core.cluster.wait_for_topic(
            topic, self._core.max_block)
        return sorted(info.partitions)

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout`` s; None waits), fail the rest, close."""
        if self._core.closed:
            return
        if not self._started:
            self._core.closed = True
            await self._core.cluster.close()
            return
        await self._core.close(timeout)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
