"""The producer's record accumulator: per-partition queues of batches, bounded memory.

Thread-safe (one ``threading.Lock``): the blocking facade appends from the caller's thread
while the sender drains on the client's event-loop thread, as the Java client's
``RecordAccumulator`` is shared by ``send()`` callers and its ``Sender`` thread.

Records are kept as Python references (value, key, timestamp, headers) in a
``PendingBatch`` and encoded only when the batch is drained: the sender then knows the
producer id, epoch and base sequence, and a batch of records without headers is encoded by
one ``logcore.BatchBuilder.append_many`` call instead of one ``append`` per record. The
encoded bytes are kept for retries, so a retried batch is byte-identical (same sequence
numbers: the broker deduplicates it).

Memory: each record reserves ``estimate_size(record)`` bytes of ``buffer.memory`` when it is
appended and its batch gives them back when it completes (success or failure). ``reserve``
fails when the pool is full; the facade then waits on ``memory_freed`` (a
``threading.Condition``), the asyncio core on an event, both bounded by ``max.block.ms``.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import logcore
from pylog.client._future import BatchResult

__all__ = ["PendingBatch", "RecordAccumulator", "estimate_size", "RECORD_OVERHEAD",
           "BATCH_OVERHEAD"]

# Upper bounds of the framing around one record's key and value in a v2 batch: length
# varint, attributes, timestamp and offset deltas, key/value length varints, header count.
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61  # the RecordBatch v2 header


def estimate_size(key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes | None]] | None) -> int:
    size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (
        len(value) if value is not None else 0)
    if headers:
        for name, hv in headers:
            size += 10 + len(name) + (len(hv) if hv is not None else 0)
    return size


class PendingBatch:
    """One partition's batch: records until drained, then encoded bytes until answered.

    ``result`` is completed once for the whole batch (the blocking facade's
    ``RecordFuture``s read it); ``futures[i]``, when not None, is completed with record i's
    ``RecordMetadata`` or error (the asyncio face's per-record futures).

    ``keys``, ``headers`` and ``futures`` stay None until a record has one (then they are
    filled with None for the records before it): keyless records of the blocking facade
    cost no list appends for them.
    """

    __slots__ = ("topic", "partition", "batch_id", "values", "keys", "timestamps", "headers",
                 "futures", "result", "size", "created", "attempts", "next_attempt", "data",
                 "base_sequence", "producer_id", "producer_epoch", "in_flight", "done")

    def __init__(self, topic: str, partition: int, batch_id: int, created: float) -> None:
        self.topic = topic
        self.partition = partition
        self.batch_id = batch_id
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None
        self.timestamps: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] | None = None
        self.futures: list[Any] | None = None
        self.result = BatchResult()
        self.size = BATCH_OVERHEAD
        self.created = created
        self.attempts = 0
        self.next_attempt = 0.0
        self.data: bytes | None = None
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.in_flight = False
        self.done = False

    def __len__(self) -> int:
        return len(self.values)

    def encode(self, compression: str, producer_id: int, producer_epoch: int,
               base_sequence: int, transactional: bool = False) -> bytes:
        """Build the batch once (kept for retries); ``transactional`` sets attribute bit 4."""
        if self.data is None:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.base_sequence = base_sequence
            b = logcore.BatchBuilder(compression=compression,  # type: ignore[arg-type]
                                     producer_id=producer_id, producer_epoch=producer_epoch,
                                     base_sequence=base_sequence, transactional=transactional)
            if self.headers is None:
                b.append_many(self.values, self.keys, self.timestamps)
            else:
                keys = self.keys if self.keys is not None else [None] * len(self.values)
                for v, k, ts, h in zip(self.values, keys, self.timestamps, self.headers,
                                      strict=True):
                    b.append(v, key=k, timestamp_ms=ts, headers=h)
            self.data = b.build()
        return self.data


class RecordAccumulator:
    """Per-partition batch queues and the ``buffer.memory`` pool (thread-safe).

    Args:
        batch_size: a batch is full at this estimated size.
        buffer_memory: bytes of records held at most.
        on_ready: called (under no lock, from the appending thread) when the sender should
            look: a first batch for a partition, or a batch became full.
    """

    def __init__(self, batch_size: int, buffer_memory: int,
                 on_ready: Callable[[], None]) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.on_ready = on_ready
        self.lock = threading.Lock()
        self.memory_freed = threading.Condition(self.lock)
        self.used = 0
        self.queues: dict[tuple[str, int], collections.deque[PendingBatch]] = {}
        self.incomplete: dict[int, PendingBatch] = {}
        self.next_batch_id = 0
        self.waiting_for_memory = 0
        self.memory_listeners: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ callers' side

    def reserve(self, size: int, timeout: float | None, blocking: bool) -> bool:
        """Take ``size`` bytes of the pool; block (facade) up to ``timeout`` if asked.

        Returns:
            False when the bytes are not available (non-blocking, or the wait timed out).
        """
        with self.lock:
            if self.used + size <= self.buffer_memory:
                self.used += size
                return True
            if not blocking:
                return False
            deadline = time.monotonic() + (timeout or 0.0)
            self.waiting_for_memory += 1
            self.on_ready()  # the sender drains eagerly while someone waits for memory
            try:
                while self.used + size > self.buffer_memory:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self.memory_freed.wait(left)
                self.used += size
                return True
            finally:
                self.waiting_for_memory -= 1

    def append(self, topic: str, partition: int, value: bytes | None, key: bytes | None,
               timestamp: int, headers: list[tuple[str, bytes | None]] | None, size: int,
               future: Any, *, reserved: bool = False) -> tuple[PendingBatch, int] | None:
        """Add a record to the partition's open batch, taking ``size`` bytes of memory.

        Args:
            future: a per-record future to complete, or None (use ``batch.result``).
            reserved: the bytes were already taken with ``reserve``.

        Returns:
            (batch, index of the record in it), or None when ``buffer.memory`` has no room
            (nothing was added; ``reserve`` and call again with ``reserved=True``).
        """
        wake = False
        with self.lock:
            if not reserved:
                if self.used + size > self.buffer_memory:
                    return None
                self.used += size
            q = self.queues.get((topic, partition))
            if q is None:
                q = self.queues[(topic, partition)] = collections.deque()
            batch = q[-1] if q else None
            if batch is None or batch.data is not None or (
                    batch.size + size > self.batch_size and len(batch)):
                batch = PendingBatch(topic, partition, self.next_batch_id, time.monotonic())
                self.next_batch_id += 1
                self.incomplete[batch.batch_id] = batch
                q.append(batch)
                wake = len(q) <= 2  # a first batch, or the previous one is now full
            index = len(batch.values)
            if headers:
                if batch.headers is None:
                    batch.headers = [None] * index
                batch.headers.append(headers)
            elif batch.headers is not None:
                batch.headers.append(None)
            if key is not None:
                if batch.keys is None:
                    batch.keys = [None] * index
                batch.keys.append(key)
            elif batch.keys is not None:
                batch.keys.append(None)
            if future is not None:
                if batch.futures is None:
                    batch.futures = [None] * index
                batch.futures.append(future)
            elif batch.futures is not None:
                batch.futures.append(None)
            batch.values.append(value)
            batch.timestamps.append(timestamp)
            batch.size += size
            if batch.size >= self.batch_size:
                wake = True
        if wake:
            self.on_ready()
        return batch, index

    def append_batch(self, topic: str, partition: int, values: list[bytes | None],
                     keys: list[bytes | None] | None, timestamps: list[int],
                     size: int) -> PendingBatch:
        """Queue ``values`` (with ``keys``, or None) as a new batch of the partition, behind
        its open one (``Producer.send_many``); ``size`` bytes (the records' estimates) were
        taken with ``reserve``. A later ``append`` may add to it while it has room."""
        with self.lock:
            q = self.queues.get((topic, partition))
            if q is None:
                q = self.queues[(topic, partition)] = collections.deque()
            batch = PendingBatch(topic, partition, self.next_batch_id, time.monotonic())
            self.next_batch_id += 1
            batch.values, batch.keys, batch.timestamps = values, keys, timestamps
            batch.size += size
            self.incomplete[batch.batch_id] = batch
            q.append(batch)
        self.on_ready()
        return batch

    # ------------------------------------------------------------------ sender's side

    def release(self, batch: PendingBatch) -> None:
        """A batch completed: give its memory back and forget it."""
        with self.lock:
            if batch.done:
                return
            batch.done = True
            self.incomplete.pop(batch.batch_id, None)
            self.used -= batch.size - BATCH_OVERHEAD
            if self.waiting_for_memory:  # blocked send()s count themselves under this lock
                self.memory_freed.notify_all()
            listeners = list(self.memory_listeners)
        for fn in listeners:
            fn()

    def requeue(self, batch: PendingBatch) -> None:
        """Put a batch to retry back at its place (ordered by base sequence, then id)."""
        with self.lock:
            q = self.queues.setdefault((batch.topic, batch.partition), collections.deque())
            i = 0
            while i < len(q) and q[i].data is not None and (
                    q[i].base_sequence, q[i].batch_id) < (batch.base_sequence, batch.batch_id):
                i += 1
            q.insert(i, batch)

    def pending(self) -> bool:
        with self.lock:
            return bool(self.incomplete)
