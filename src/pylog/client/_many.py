"""``Producer.send_many``: a column of records in, whole batches out.

``send()`` pays for one record at a time (checks, partitioner, an append under the
accumulator's lock, a future). ``send_many`` takes the values (and keys) of many records at
once, from a list, a numpy object array or a pyarrow binary/string array, and does the work
per column or per batch instead:

1. the columns are checked in one pass each (``set(map(type, ...))``) and their lengths
   read with ``map(len, ...)`` into numpy arrays;
2. keyed records get their partitions from one C loop of murmur2 (``partitions_for_keys``)
   and are grouped by partition with a stable sort (order within a partition is kept);
   keyless ones go, batch by batch, where the sticky partitioner points (as ``send()``
   would send them); an explicit ``partition`` takes them all;
3. each partition's records are cut into runs of at most ``batch.size`` bytes (cumulative
   sizes and a binary search), ``buffer.memory`` is reserved per run (blocking up to
   ``max.block.ms`` in all) and each run is queued as one new ``PendingBatch``, which the
   sender encodes with one ``BatchBuilder.append_many`` call as usual.

Retries, idempotence, transactions and ``linger.ms`` treat these batches as any other.
``SendManyFuture`` completes when every batch has; its result names each batch's
partition, base offset and record count.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from pylog.client._future import BatchResult
from pylog.client._native import partitions_for_keys
from pylog.client.aio._accumulator import RECORD_OVERHEAD
from pylog.client.errors import KafkaTimeoutError, RecordTooLargeError

if TYPE_CHECKING:
    from pylog.client.aio._cluster import TopicInfo
    from pylog.client.aio.producer import ProducerCore

__all__ = ["BatchDelivery", "Run", "SendManyFuture", "as_column", "plan", "queue", "send_many"]

_NONE = type(None)


class BatchDelivery(NamedTuple):
    """Where one batch of a ``send_many`` call went: records ``base_offset`` to
    ``base_offset + record_count - 1`` of ``topic``-``partition``, in the order given
    (keyed records grouped by partition)."""

    topic: str
    partition: int
    base_offset: int
    record_count: int
    log_append_time: int


class SendManyFuture:
    """Completes when every batch of a ``send_many`` call has succeeded or failed
    (``result``, ``exception``, ``done``, ``add_done_callback``; thread-safe)."""

    __slots__ = ("_parts", "_record_count")

    def __init__(self, parts: list[tuple[str, int, int, BatchResult]]) -> None:
        self._parts = parts  # (topic, partition, record count, the batch's result)
        self._record_count = sum(p[2] for p in parts)

    @property
    def record_count(self) -> int:
        """Records queued by the call."""
        return self._record_count

    def done(self) -> bool:
        return all(p[3].done for p in self._parts)

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for _t, _p, _n, result in self._parts:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not result.wait(left):
                raise KafkaTimeoutError(f"the records were not delivered within {timeout:g} s")

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The first failed batch's error (None if all succeeded), waiting up to ``timeout``."""
        self._wait(timeout)
        return next((p[3].error for p in self._parts if p[3].error is not None), None)

    def result(self, timeout: float | None = None) -> list[BatchDelivery]:
        """Each batch's ``BatchDelivery``, in the order the batches were queued.

        Raises:
            the first failed batch's error; KafkaTimeoutError if not complete in time.
        """
        error = self.exception(timeout)
        if error is not None:
            raise error
        return [BatchDelivery(t, p, r.base_offset, n, r.log_append_time)
                for t, p, n, r in self._parts]

    def add_done_callback(self, fn: Callable[[SendManyFuture], Any]) -> None:
        """Call ``fn(self)`` once every batch is complete (on the client's I/O thread, or
        now if already done)."""
        left = [len(self._parts)]

        def one() -> None:
            left[0] -= 1  # BatchResult runs callbacks outside its lock, one batch at a time
            if left[0] == 0:
                fn(self)

        if not self._parts:
            fn(self)
        for part in self._parts:
            part[3].add_callback(one)

    def __repr__(self) -> str:
        return (f"<SendManyFuture {self._record_count} records in {len(self._parts)} batches, "
                f"{'done' if self.done() else 'pending'}>")


def as_column(data: Any, name: str) -> list[Any]:
    """A column of ``send_many`` as a list: a list or tuple, a numpy object array, a pyarrow
    binary or string array (strings become UTF-8), or any other iterable of records.

    Raises:
        TypeError: a single bytes/str value instead of a column, or a numpy fixed-width
            bytes array (it drops trailing NUL bytes: pass ``dtype=object``).
    """
    if type(data) is list:
        return data
    if type(data) is tuple:
        return list(data)
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"{name} must be a column of records (a list, array, ...), not one "
                        f"{type(data).__name__}; send one record with send()")
    if isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise TypeError(f"{name}: a numpy array must be one-dimensional, got {data.ndim} "
                            "dimensions")
        if data.dtype.kind == "S":
            raise TypeError(f"{name}: numpy fixed-width bytes (dtype {data.dtype}) drop trailing "
                            "NUL bytes; pass an array of dtype=object holding bytes")
        return data.tolist()  # type: ignore[no-any-return]
    module = type(data).__module__ or ""
    if module.startswith("pyarrow"):
        import pyarrow as pa

        typ = data.type
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            data = data.cast(pa.large_binary())
        elif not (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)
                  or pa.types.is_fixed_size_binary(typ)):
            raise TypeError(f"{name}: a pyarrow array of {typ} is not binary or string data")
        return data.to_pylist()  # type: ignore[no-any-return]
    return list(data)


def _check_bytes(column: list[Any], name: str) -> bool:
    """True when the column holds a None; bytes-like items become bytes (in place).

    Raises:
        TypeError: an item that is not bytes-like or None (naming its index).
    """
    kinds = set(map(type, column))
    if kinds <= {bytes}:
        return False
    if kinds <= {bytes, _NONE}:
        return True
    for i, item in enumerate(column):
        if item is None or type(item) is bytes:
            continue
        if isinstance(item, (bytearray, memoryview)):
            column[i] = bytes(item)
        else:
            raise TypeError(f"{name}[{i}] must be bytes or None, got {type(item).__name__} "
                            "(configure a serializer to send other types)")
    return None in kinds


def _lengths(column: list[Any], has_none: bool) -> np.ndarray:
    n = len(column)
    if not has_none:
        return np.fromiter(map(len, column), dtype=np.int64, count=n)
    return np.fromiter((0 if v is None else len(v) for v in column), dtype=np.int64, count=n)


def _runs(sizes: np.ndarray, batch_size: int) -> list[tuple[int, int]]:
    """Cut records of ``sizes`` into [start, end) runs of at most ``batch_size`` bytes (a run
    holds at least one record)."""
    ends = np.cumsum(sizes)
    runs = []
    start, base, n = 0, 0, len(sizes)
    while start < n:
        end = int(np.searchsorted(ends, base + batch_size, side="right"))
        end = min(max(end, start + 1), n)
        runs.append((start, end))
        base = int(ends[end - 1])
        start = end
    return runs


def _take(column: list[Any], index: np.ndarray) -> list[Any]:
    if len(index) == 1:
        return [column[int(index[0])]]
    return list(operator.itemgetter(*index.tolist())(column))


class Run(NamedTuple):
    """One batch to queue: its records and their reserved size; ``partition`` None means
    where the sticky partitioner points when it is queued."""

    partition: int | None
    values: list[Any]
    keys: list[Any] | None
    size: int


def plan(core: ProducerCore, info: TopicInfo, values: list[Any], keys: list[Any] | None,
         partition: int | None) -> list[Run]:
    """Check the columns and cut them into batches (steps 1-3 of the module docstring).

    Raises:
        TypeError, ValueError, RecordTooLargeError: nothing is queued.
    """
    n = len(values)
    if keys is not None and len(keys) != n:
        raise ValueError(f"{len(keys)} keys for {n} values")
    if core._value_ser is not None:
        values = [core._value_ser(v) for v in values]
    if keys is not None and core._key_ser is not None:
        keys = [core._key_ser(k) for k in keys]
    sizes = _lengths(values, _check_bytes(values, "values")) + RECORD_OVERHEAD
    if keys is not None:
        sizes += _lengths(keys, _check_bytes(keys, "keys"))
        if not keys or set(map(type, keys)) == {_NONE}:
            keys = None
    if n and int(sizes.max()) > core.max_record:
        i = int(sizes.argmax())
        raise RecordTooLargeError(
            f"record {i} of about {int(sizes[i])} bytes is larger than max.request.size "
            f"({core.settings['max.request.size']}) or buffer.memory "
            f"({core.settings['buffer.memory']})")
    # (partition or None for "sticky, per run", values, keys, sizes) groups, in order.
    groups: list[tuple[int | None, list[Any], list[Any] | None, np.ndarray]] = []
    if partition is not None:
        groups.append((core.place(info, None, 0, partition), values, keys, sizes))
    elif core._custom_partitioner is not None or (keys is not None and not core._ignore_keys):
        if core._custom_partitioner is not None:
            each_key = keys if keys is not None else [None] * n
            parts = np.array([core.place(info, k, int(s), None)
                              for k, s in zip(each_key, sizes, strict=True)], dtype=np.int64)
        else:
            assert keys is not None
            parts = np.array(partitions_for_keys(keys, info.num_partitions), dtype=np.int64)
        order = np.argsort(parts, kind="stable")
        bounds = np.flatnonzero(np.diff(parts[order])) + 1
        for index in np.split(order, bounds) if n else []:
            p = int(parts[index[0]])
            groups.append((p if p >= 0 else None, _take(values, index),
                           _take(keys, index) if keys is not None else None, sizes[index]))
    else:
        groups.append((None, values, keys, sizes))
    runs = []
    for group_partition, vals, ks, szs in groups:
        for start, end in _runs(szs, core.acc.batch_size):
            runs.append(Run(group_partition, vals[start:end],
                            ks[start:end] if ks is not None else None,
                            int(szs[start:end].sum())))
    return runs


def timestamp(core: ProducerCore, timestamp_ms: int | None) -> int:
    if timestamp_ms is None:
        return time.time_ns() // 1_000_000 if core._system_clock else core.clock.time_ms()
    ts = int(timestamp_ms)
    if ts < 0:
        raise ValueError(f"timestamp_ms must be >= 0, got {ts}")
    return ts


def queue(core: ProducerCore, info: TopicInfo, topic: str, run: Run,
          ts: int) -> tuple[str, int, int, BatchResult]:
    """Queue one run whose ``run.size`` bytes of ``buffer.memory`` are reserved."""
    target = run.partition if run.partition is not None else core.place(info, None, run.size,
                                                                        None)
    core.check_send(topic, target)
    count = len(run.values)
    batch = core.acc.append_batch(topic, target, run.values, run.keys, [ts] * count, run.size)
    return topic, target, count, batch.result


def memory_timeout(core: ProducerCore, queued: list[tuple[str, int, int, BatchResult]],
                   total: int) -> KafkaTimeoutError:
    return KafkaTimeoutError(
        f"no room in buffer.memory ({core.settings['buffer.memory']} bytes) within "
        f"max.block.ms ({core.settings['max.block.ms']} ms); "
        f"{sum(q[2] for q in queued)} of {total} records were queued")


def send_many(core: ProducerCore, info: TopicInfo, topic: str, values: list[Any],
              keys: list[Any] | None, partition: int | None, timestamp_ms: int | None,
              max_block: float) -> SendManyFuture:
    """Queue the records from a caller's thread (the blocking ``Producer``), waiting for
    ``buffer.memory`` up to ``max_block`` seconds in all."""
    ts = timestamp(core, timestamp_ms)
    runs = plan(core, info, values, keys, partition)
    deadline = time.monotonic() + max_block
    out: list[tuple[str, int, int, BatchResult]] = []
    for run in runs:
        if not core.acc.reserve(run.size, max(0.0, deadline - time.monotonic()),
                                blocking=True):
            raise memory_timeout(core, out, len(values))
        out.append(queue(core, info, topic, run, ts))
    return SendManyFuture(out)


def column_args(values: Sequence[Any] | Any, keys: Sequence[Any] | Any | None
                ) -> tuple[list[Any], list[Any] | None]:
    """``values`` and ``keys`` as lists (``as_column``)."""
    return as_column(values, "values"), None if keys is None else as_column(keys, "keys")
