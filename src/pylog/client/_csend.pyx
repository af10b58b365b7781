# The producer's per-record path, compiled: the twin of ``aio/_accumulator.py``'s
# ``PendingBatch`` and ``RecordAccumulator`` and of ``_future.py``'s ``RecordFuture``, with
# the same behaviour and Python-visible attributes, plus ``FastSend``: ``Producer.send`` for
# the common record (bytes or None key and value, no headers, no serializers, no
# transaction, default timestamp) in one C call. Anything else goes to the Python path,
# which stays the reference (LOGCORE_PUREPYTHON=1 runs it alone; the unit tests run both).
"""The producer's per-record path in C (see ``pylog.client._native``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.time cimport monotonic as _monotonic
from cpython.time cimport time_ns as _time_ns
from libc.stdint cimport int32_t, int64_t, uint32_t

import collections
import threading
import time

import logcore

from pylog.client._future import BatchResult
from pylog.client.aio._accumulator import BATCH_OVERHEAD as _PY_BATCH_OVERHEAD
from pylog.client.aio._accumulator import RECORD_OVERHEAD as _PY_RECORD_OVERHEAD
from pylog.client.errors import KafkaTimeoutError
from pylog.client.records import RecordMetadata

cdef Py_ssize_t BATCH_OVERHEAD = _PY_BATCH_OVERHEAD
cdef Py_ssize_t RECORD_OVERHEAD = _PY_RECORD_OVERHEAD


cdef inline uint32_t _murmur2(const unsigned char *data, Py_ssize_t length) noexcept nogil:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c), as ``partitioner.murmur2`` unsigned."""
    cdef uint32_t m = 0x5BD1E995U
    cdef uint32_t h = 0x9747B28CU ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, n4 = length & ~3
    for i in range(0, n4, 4):
        k = (<uint32_t>data[i] | (<uint32_t>data[i + 1] << 8) | (<uint32_t>data[i + 2] << 16)
             | (<uint32_t>data[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h = (h * m) ^ k
    i = length & 3
    if i == 3:
        h ^= <uint32_t>data[n4 + 2] << 16
    if i >= 2:
        h ^= <uint32_t>data[n4 + 1] << 8
    if i >= 1:
        h ^= <uint32_t>data[n4]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


cdef inline Py_ssize_t _key_partition(bytes key, Py_ssize_t n):
    return <Py_ssize_t>((_murmur2(<const unsigned char *>PyBytes_AS_STRING(key),
                                  PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % <uint32_t>n)


def partition_for_key(bytes key not None, Py_ssize_t num_partitions):
    """``toPositive(murmur2(key)) % num_partitions`` (twin: ``partitioner.partition_for_key``)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return _key_partition(key, num_partitions)


def partitions_for_keys(list keys not None, Py_ssize_t num_partitions):
    """The partition of every key (-1 for a None key), as a list (twin:
    ``partitioner.partitions_for_keys``).

    Raises:
        TypeError: a key that is neither bytes nor None (naming its index).
    """
    cdef Py_ssize_t i, n = len(keys)
    cdef list out
    cdef object k
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    out = [-1] * n
    for i in range(n):
        k = keys[i]
        if type(k) is bytes:
            out[i] = _key_partition(<bytes>k, num_partitions)
        elif k is not None:
            raise TypeError(f"key {i} must be bytes or None, got {type(k).__name__}")
    return out


cdef class PendingBatch:
    """One partition's batch: records until drained, then encoded bytes until answered
    (``aio/_accumulator.py`` has the documented twin)."""

    cdef public str topic
    cdef public int partition
    cdef public int64_t batch_id
    cdef public list values
    cdef public object keys
    cdef public list timestamps
    cdef public object headers
    cdef public object futures
    cdef public object result
    cdef public Py_ssize_t size
    cdef public double created
    cdef public int attempts
    cdef public double next_attempt
    cdef public object data
    cdef public int64_t base_sequence
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public bint in_flight
    cdef public bint done

    def __init__(self, str topic, int partition, int64_t batch_id, double created):
        self.topic = topic
        self.partition = partition
        self.batch_id = batch_id
        self.values = []
        self.keys = None
        self.timestamps = []
        self.headers = None
        self.futures = None
        self.result = BatchResult()
        self.size = BATCH_OVERHEAD
        self.created = created
        self.attempts = 0
        self.next_attempt = 0.0
        self.data = None
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.in_flight = False
        self.done = False

    def __len__(self):
        return len(self.values)

    def encode(self, compression, producer_id, producer_epoch, base_sequence,
               transactional=False):
        """Build the batch once (kept for retries); ``transactional`` sets attribute bit 4."""
        if self.data is None:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.base_sequence = base_sequence
            b = logcore.BatchBuilder(compression=compression, producer_id=producer_id,
                                     producer_epoch=producer_epoch,
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


cdef class RecordAccumulator:
    """Per-partition batch queues and the ``buffer.memory`` pool (thread-safe; the
    documented twin is ``aio/_accumulator.py``)."""

    cdef public Py_ssize_t batch_size
    cdef public Py_ssize_t buffer_memory
    cdef public object on_ready
    cdef public object lock
    cdef public object memory_freed
    cdef public Py_ssize_t used
    cdef public dict queues
    cdef public dict incomplete
    cdef public int64_t next_batch_id
    cdef public int waiting_for_memory
    cdef public list memory_listeners
    cdef object _acquire
    cdef object _release

    def __init__(self, Py_ssize_t batch_size, Py_ssize_t buffer_memory, on_ready):
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.on_ready = on_ready
        self.lock = threading.Lock()
        self._acquire = self.lock.acquire
        self._release = self.lock.release
        self.memory_freed = threading.Condition(self.lock)
        self.used = 0
        self.queues = {}
        self.incomplete = {}
        self.next_batch_id = 0
        self.waiting_for_memory = 0
        self.memory_listeners = []

    def reserve(self, Py_ssize_t size, timeout, bint blocking):
        """Take ``size`` bytes of the pool; block (facade) up to ``timeout`` if asked."""
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

    cpdef object append(self, str topic, int partition, object value, object key,
                        int64_t timestamp, object headers, Py_ssize_t size, object future,
                        bint reserved=False):
        """Add a record to the partition's open batch, taking ``size`` bytes of memory:
        (batch, index of the record in it), or None when ``buffer.memory`` has no room."""
        cdef bint wake = False
        cdef PendingBatch batch = None
        cdef Py_ssize_t index
        cdef object q
        self._acquire()
        try:
            if not reserved:
                if self.used + size > self.buffer_memory:
                    return None
                self.used += size
            qkey = (topic, partition)
            q = self.queues.get(qkey)
            if q is None:
                q = self.queues[qkey] = collections.deque()
            if q:
                batch = q[-1]
            if batch is None or batch.data is not None or (
                    batch.size + size > self.batch_size and len(batch.values)):
                batch = PendingBatch(topic, partition, self.next_batch_id, _monotonic())
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
        finally:
            self._release()
        if wake:
            self.on_ready()
        return batch, index

    def append_batch(self, str topic, int partition, list values, object keys,
                     list timestamps, Py_ssize_t size):
        """Queue ``values`` (``keys`` a list or None) as a new batch of the partition,
        behind its open one; ``size`` bytes (the records' estimates) were reserved."""
        cdef PendingBatch batch
        cdef object q
        self._acquire()
        try:
            qkey = (topic, partition)
            q = self.queues.get(qkey)
            if q is None:
                q = self.queues[qkey] = collections.deque()
            batch = PendingBatch(topic, partition, self.next_batch_id, _monotonic())
            self.next_batch_id += 1
            batch.values = values
            batch.keys = keys
            batch.timestamps = timestamps
            batch.size += size
            self.incomplete[batch.batch_id] = batch
            q.append(batch)
        finally:
            self._release()
        self.on_ready()
        return batch

    def release(self, PendingBatch batch):
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

    def requeue(self, PendingBatch batch):
        """Put a batch to retry back at its place (ordered by base sequence, then id)."""
        cdef PendingBatch other
        with self.lock:
            q = self.queues.setdefault((batch.topic, batch.partition), collections.deque())
            i = 0
            while i < len(q):
                other = q[i]
                if other.data is None or (other.base_sequence, other.batch_id) >= (
                        batch.base_sequence, batch.batch_id):
                    break
                i += 1
            q.insert(i, batch)

    def pending(self):
        with self.lock:
            return bool(self.incomplete)


cdef class RecordFuture:
    """The future ``RecordMetadata`` of one record of a batch (``_future.py`` has the
    documented twin)."""

    cdef readonly object _batch
    cdef readonly Py_ssize_t _index
    cdef readonly str _topic
    cdef readonly int _partition
    cdef readonly int64_t _timestamp
    cdef readonly Py_ssize_t _key_size
    cdef readonly Py_ssize_t _value_size

    def __init__(self, batch, Py_ssize_t index, str topic, int partition, int64_t timestamp,
                 Py_ssize_t key_size, Py_ssize_t value_size):
        self._batch = batch
        self._index = index
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self):
        return self._batch.done

    def cancelled(self):
        return False

    def cancel(self):
        return False

    def _wait(self, timeout):
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"the record was not delivered within {timeout:g} s")

    def result(self, timeout=None):
        """The record's metadata, waiting up to ``timeout`` s (None: until it completes)."""
        self._wait(timeout)
        b = self._batch
        if b.error is not None:
            raise b.error
        return RecordMetadata(
            self._topic, self._partition, b.base_offset + self._index if b.base_offset >= 0 else -1,
            b.log_append_time if b.log_append_time >= 0 else self._timestamp,
            self._key_size, self._value_size)

    def exception(self, timeout=None):
        self._wait(timeout)
        return self._batch.error

    def add_done_callback(self, fn):
        """Call ``fn(self)`` once complete (on the client's I/O thread, or now if done)."""
        self._batch.add_callback(lambda: fn(self))

    def __repr__(self):
        state = "pending" if not self.done() else ("failed" if self._batch.error else "done")
        return f"<RecordFuture {self._topic}-{self._partition} {state}>"


cdef inline RecordFuture _future(PendingBatch batch, Py_ssize_t index, str topic,
                                 int partition, int64_t ts, Py_ssize_t key_size,
                                 Py_ssize_t value_size):
    cdef RecordFuture fut = RecordFuture.__new__(RecordFuture)
    fut._batch = batch.result
    fut._index = index
    fut._topic = topic
    fut._partition = partition
    fut._timestamp = ts
    fut._key_size = key_size
    fut._value_size = value_size
    return fut


cdef class FastSend:
    """``Producer.send`` for the common record, in C; every other case (and every error)
    goes to ``slow``, the Python ``send`` of the same producer, which behaves the same.

    Fast: no headers, no ``on_delivery``, no ``timestamp_ms``, bytes or None key and
    value, no serializers, no transaction, the system clock, the topic's metadata known,
    room in ``buffer.memory``; the partition explicit, murmur2 of the key, or sticky.
    """

    cdef object core
    cdef object slow
    cdef object cluster
    cdef RecordAccumulator acc
    cdef object partitioner
    cdef object plock
    cdef Py_ssize_t max_record
    cdef bint enabled
    cdef bint ignore_keys

    def __init__(self, core, slow):
        self.core = core
        self.slow = slow
        self.cluster = core.cluster
        self.acc = core.acc
        self.partitioner = core.partitioner
        self.plock = core._plock
        self.max_record = core.max_record
        self.ignore_keys = core._ignore_keys
        self.enabled = (core.txn is None and core._key_ser is None and core._value_ser is None
                        and core._custom_partitioner is None and core._system_clock)

    def __call__(self, topic, value=None, key=None, headers=None, partition=None,
                 timestamp_ms=None, *, on_delivery=None):
        cdef Py_ssize_t size, n, klen, vlen
        cdef Py_ssize_t p = -1
        cdef int64_t ts
        if (not self.enabled or headers or on_delivery is not None or timestamp_ms is not None
                or type(topic) is not str or self.core.closed):
            return self.slow(topic, value, key, headers, partition, timestamp_ms,
                             on_delivery=on_delivery)
        if value is None:
            vlen = -1
        elif type(value) is bytes:
            vlen = len(<bytes>value)
        else:
            return self.slow(topic, value, key, headers, partition, timestamp_ms)
        if key is None:
            klen = -1
        elif type(key) is bytes:
            klen = len(<bytes>key)
        else:
            return self.slow(topic, value, key, headers, partition, timestamp_ms)
        size = RECORD_OVERHEAD + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
        info = self.cluster.topics.get(topic)
        if size > self.max_record or info is None or info.error_code:
            return self.slow(topic, value, key, headers, partition, timestamp_ms)
        n = len(info.partitions)
        if n == 0:
            return self.slow(topic, value, key, headers, partition, timestamp_ms)
        if partition is not None:
            if type(partition) is not int or not 0 <= partition < n:
                return self.slow(topic, value, key, headers, partition, timestamp_ms)
            p = partition
        elif key is not None and not self.ignore_keys:
            p = _key_partition(<bytes>key, n)
        else:
            with self.plock:
                p = self.partitioner.partition(topic, n, info.available(), size)
        ts = _time_ns() // 1000000
        placed = self.acc.append(topic, p, value, key, ts, None, size, None)
        if placed is None:  # buffer.memory is full: the Python path waits for room
            return self.slow(topic, value, key, headers, p, timestamp_ms)
        batch, index = <tuple>placed
        return _future(<PendingBatch>batch, <Py_ssize_t>index, topic, p, ts, klen, vlen)
