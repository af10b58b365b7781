"""The blocking producer: ``pylog.client.Producer``.

The asyncio core (``pylog.client.aio.producer.ProducerCore``) runs on a private event loop
in a daemon thread (``_loop.LoopThread``). ``send()`` runs in the caller's thread: it
serializes the record, picks its partition and appends it to the thread-safe accumulator;
it blocks only for the topic's first metadata and for room in ``buffer.memory`` (both
bounded by ``max.block.ms``). Batches are built, compressed, sent, retried and answered on
the loop thread.

Example::

    from pylog.client import Producer

    with Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5}) as p:
        fut = p.send("events", b"hello", key=b"user-1")
        print(fut.result().offset)
        p.send("events", b"again", on_delivery=lambda err, meta: print(err, meta))
        p.flush()

Thread-safety: every method may be called from any thread, except that a blocking call
(``flush``, ``close``) from inside a delivery callback raises ``IllegalStateError``
(callbacks run on the client's I/O thread; keep them short).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.client._future import RecordFuture
from pylog.client._loop import LoopThread
from pylog.client._many import BatchDelivery, SendManyFuture, column_args, send_many
from pylog.client._native import FastSend
from pylog.client._native import RecordFuture as _RecordFuture
from pylog.client.aio.producer import ProducerCore, producer_settings
from pylog.client.config import Resolved
from pylog.client.errors import ClientClosedError, KafkaTimeoutError
from pylog.client.records import RecordMetadata

__all__ = ["BatchDelivery", "Producer", "SendManyFuture"]

DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], Any]


class Producer:
    """Kafka producer (blocking facade over the asyncio core).

    Args:
        config: Kafka's dotted names (``{"bootstrap.servers": ..., "acks": "all"}``).
        **kwargs: the same names with underscores (``bootstrap_servers=..., acks="all"``).

    Raises:
        ConfigError: an unknown, mistyped or conflicting setting (named in the message).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 **kwargs: Any) -> None:
        settings = producer_settings(config, kwargs)
        self._thread = LoopThread(f"pylog-producer-io-{settings['client.id'] or ''}")
        try:
            self._core = self._thread.run(self._make(settings, clock))
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        if FastSend is not None:
            # The common record takes the compiled path; it hands anything else (and every
            # error) to this class's send(), which behaves the same (pylog.client._native).
            self.send = FastSend(self._core, self._send)  # type: ignore[method-assign]

    def _send(self, topic: str, value: Any, key: Any, headers: Any, partition: int | None,
              timestamp_ms: int | None, *, on_delivery: DeliveryCallback | None = None
              ) -> RecordFuture:
        return Producer.send(self, topic, value, key, headers, partition, timestamp_ms,
                             on_delivery=on_delivery)

    @staticmethod
    async def _make(settings: Resolved, clock: Clock) -> ProducerCore:
        core = ProducerCore(settings, clock)
        try:
            await core.open()  # embedded mode: the directory in use fails here
        except BaseException:
            await core.cluster.close()
            raise
        core.start()
        return core

    @property
    def settings(self) -> Resolved:
        """The resolved settings, by Kafka name."""
        return self._core.settings

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
             partition: int | None = None, timestamp_ms: int | None = None, *,
             on_delivery: DeliveryCallback | None = None) -> RecordFuture:
        """Queue a record for ``topic``.

        Args:
            value, key: bytes (or anything the configured serializers take), or None.
            headers: list of ``(str, bytes | None)`` or a dict.
            partition: explicit partition; else the partitioner (murmur2 of the key as the
                Java client, sticky for keyless records).
            timestamp_ms: record timestamp (default: now).
            on_delivery: ``callback(error, metadata)`` called once on the client's I/O
                thread when the record succeeded (error None) or failed.

        Returns:
            A future of the record's ``RecordMetadata`` (``result(timeout)``,
            ``exception(timeout)``, ``done()``, ``add_done_callback(fn)``, as
            ``concurrent.futures.Future``; one shared result per batch underneath).

        Raises:
            KafkaTimeoutError: no metadata for the topic or no room in ``buffer.memory``
                within ``max.block.ms``.
            RecordTooLargeError: the record is larger than ``max.request.size`` or
                ``buffer.memory``.
            TypeError, ValueError: a bad key, value, header, partition or timestamp.
            ClientClosedError: the producer is closed.
        """
        core = self._core
        value, key, hdrs, ts, size = core.prepare(topic, value, key, headers, timestamp_ms)
        waited = 0.0  # max.block.ms bounds the metadata and the memory waits together
        info = core.cluster.topic(topic)
        if info is None:
            started = time.monotonic()
            info = self._thread.run(core.cluster.wait_for_topic(topic, core.max_block))
            waited = time.monotonic() - started
        p = core.place(info, key, size, partition)
        core.check_send(topic, p)
        acc = core.acc
        placed = acc.append(topic, p, value, key, ts, hdrs, size, None)
        if placed is None:  # buffer.memory is full: wait for room (max.block.ms in all)
            if not acc.reserve(size, core.max_block - waited, blocking=True):
                raise KafkaTimeoutError(
                    f"no room in buffer.memory ({core.settings['buffer.memory']} bytes) within "
                    f"max.block.ms ({core.settings['max.block.ms']} ms)")
            placed = acc.append(topic, p, value, key, ts, hdrs, size, None, reserved=True)
            assert placed is not None
        batch, index = placed
        fut = _RecordFuture(batch.result, index, topic, p, ts,
                           len(key) if key is not None else -1,
                           len(value) if value is not None else -1)
        if on_delivery is not None:
            fut.add_done_callback(lambda f: on_delivery(f.exception(0),
                                                        None if f.exception(0) else f.result(0)))
        return fut

    def send_many(self, topic: str, values: Any, keys: Any = None, *,
                  partition: int | None = None, timestamp_ms: int | None = None
                  ) -> SendManyFuture:
        """Queue many records at once: a column of values (and keys) in, whole batches out.

        Much cheaper per record than ``send()`` (no per-record call, future or lock): the
        columns are checked, partitioned and cut into batches of ``batch.size`` bytes a
        column or a batch at a time (``pylog.client._many``).

        Args:
            values: the records' values, bytes or None: a list or tuple, a numpy array of
                ``dtype=object``, a pyarrow binary or string array (strings as UTF-8), or
                any iterable (the configured value serializer applies to each).
            keys: None, or a column of keys as long as ``values`` (murmur2 partitioning as
                ``send()``; order is kept within each partition).
            partition: send every record to this partition.
            timestamp_ms: one timestamp for every record (default: now).

        Returns:
            A ``SendManyFuture``: ``result(timeout)`` lists each batch's partition, base
            offset and record count once all are delivered, or raises the first error.

        Raises:
            KafkaTimeoutError: no metadata for the topic, or no room in ``buffer.memory``,
                within ``max.block.ms`` (the batches queued before it stay queued; the
                message says how many records).
            RecordTooLargeError: a record larger than ``max.request.size`` (nothing queued).
            TypeError, ValueError: a bad column, item, partition or timestamp (nothing
                queued).
            ClientClosedError: the producer is closed.
        """
        core = self._core
        if core.closed:
            raise ClientClosedError("send_many() on a closed producer")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if core.txn is not None:
            core.txn.state.check_in_transaction("send_many()")
        vals, ks = column_args(values, keys)
        started = time.monotonic()
        info = core.cluster.topic(topic)
        if info is None:
            info = self._thread.run(core.cluster.wait_for_topic(topic, core.max_block))
        left = core.max_block - (time.monotonic() - started)
        return send_many(core, info, topic, vals, ks, partition, timestamp_ms, left)

    def flush(self, timeout: float | None = None) -> None:
        """Send every record queued so far and wait until each succeeded or failed.

        Raises:
            KafkaTimeoutError: not all completed within ``timeout`` seconds.
        """
        mark = self._core.flush_mark()
        self._thread.run(self._core.flush(mark), timeout)

    # ------------------------------------------------------------------ transactions

    def init_transactions(self, timeout: float | None = None) -> None:
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
        self._thread.run(self._core.transactions().init_transactions(timeout))

    def begin_transaction(self) -> None:
        """Open a transaction: what is sent until commit or abort is in it (no request)."""
        self._core.transactions().begin_transaction()

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                    timeout: float | None = None) -> None:
        """Commit a consumer's offsets as part of the transaction (consume-transform-produce):
        the group sees them only if the transaction commits.

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
        self._thread.run(self._core.transactions().send_offsets_to_transaction(
            offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every queued record, then commit the transaction.

        Raises:
            AbortableTransactionError: a record (or the offsets) failed: abort instead.
            FatalTransactionError, RetriableTransactionError, IllegalStateError: as above.
        """
        self._thread.run(self._core.transactions().commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with ``TransactionAbortedError``;
        what was written is never shown to read_committed consumers, and the offsets sent
        are dropped.

        Raises:
            FatalTransactionError, RetriableTransactionError, IllegalStateError: as above.
        """
        self._thread.run(self._core.transactions().abort_transaction(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (fetching metadata if needed)."""
        core = self._core
        info = core.cluster.topic(topic) or self._thread.run(
            core.cluster.wait_for_topic(topic, core.max_block))
        return sorted(info.partitions)

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout`` s; None waits, bounded by
        ``delivery.timeout.ms``), fail what is left with ``ClientClosedError``, stop the
        I/O thread. Idempotent.

        ``timeout`` bounds the whole close, as Kafka's ``close(Duration)``: what is still
        running then is abandoned, the connections are aborted and the I/O thread is
        stopped (``pylog.client._loop``)."""
        if self._closed:
            return
        self._closed = True
        try:
            fut = asyncio.run_coroutine_threadsafe(self._core.close(timeout), self._thread.loop)
            self._thread.finish_close(fut, timeout, self._core.cluster.abort)
        finally:
            self._thread.stop()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A producer dropped without close(): stop its thread (records still queued fail).
        if not getattr(self, "_closed", True):
            try:
                self._thread.stop()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
