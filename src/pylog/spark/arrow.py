"""``logcore.Columns`` to ``pyarrow.RecordBatch`` with the schema of Spark's Kafka source.

Schema (Spark's ``KafkaRecordToRowConverter.kafkaSchema``), in Arrow types Spark takes as
they are::

    key binary | value binary | topic string | partition int32 | offset int64 |
    timestamp timestamp[us, tz=UTC] | timestampType int32 |
    headers list<struct<key string, value binary>>      (only with includeHeaders=true)

Every column is nullable, as in Spark; ``headers`` is null for a record without headers.

How this is fast: ``decode_columns`` already lays keys and values out as Arrow does (int32
offsets into one contiguous byte buffer, a validity mask), so key, value and offset columns
are wrapped, not copied (``Array.from_buffers`` over the numpy buffers); the validity masks
are packed into bitmaps only when a null is present; timestamps are one vectorised multiply
(ms to us); topic and partition are ``pyarrow.repeat`` of one scalar. No Python object is
made per record. Headers are the exception: ``decode_columns`` only counts them, so with
``includeHeaders=true`` the records that have headers are walked in Python (see
``headers_array``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["schema", "columns_to_batch", "headers_array", "records_to_batch", "HEADERS_TYPE"]

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_TS_TYPE = pa.timestamp("us", tz="UTC")
_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _TS_TYPE),
    pa.field("timestampType", pa.int32()),
]
_SCHEMA = pa.schema(_BASE)
_SCHEMA_WITH_HEADERS = pa.schema([*_BASE, pa.field("headers", HEADERS_TYPE)])


def schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the source's rows."""
    return _SCHEMA_WITH_HEADERS if include_headers else _SCHEMA


def _validity(valid: np.ndarray) -> tuple[Any, int]:
    """(bitmap buffer or None, null count) of a bool mask."""
    nulls = int(valid.size - np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _binary(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray, n: int) -> pa.Array:
    bitmap, nulls = _validity(valid)
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets),
                                                  pa.py_buffer(data)], null_count=nulls)


def _fixed(dtype: pa.DataType, values: np.ndarray, n: int) -> pa.Array:
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(values)], null_count=0)


def columns_to_batch(cols: Any, topic: str, partition: int, lo: int = 0, hi: int | None = None,
                     *, include_headers: bool = False, headers: pa.Array | None = None
                     ) -> pa.RecordBatch:
    """Records ``[lo, hi)`` of ``cols`` (a ``logcore.Columns``) as one RecordBatch.

    Args:
        cols: decoded records of one topic-partition.
        lo, hi: record indexes (not offsets) to take; ``hi`` None: to the end.
        include_headers: add the ``headers`` column.
        headers: its values for records ``[lo, hi)`` (``headers_array``); None: all null
            (no record in the slice has headers).
    """
    if hi is None:
        hi = cols.num_records
    n = hi - lo
    ts = np.multiply(cols.timestamps[lo:hi], 1000)
    arrays = [
        _binary(cols.key_offsets[lo:hi + 1], cols.key_data, cols.key_valid[lo:hi], n),
        _binary(cols.value_offsets[lo:hi + 1], cols.value_data, cols.value_valid[lo:hi], n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _fixed(pa.int64(), np.ascontiguousarray(cols.offsets[lo:hi]), n),
        _fixed(_TS_TYPE, ts, n),
        _fixed(pa.int32(), cols.timestamp_types[lo:hi].astype(np.int32), n),
    ]
    if include_headers:
        arrays.append(headers if headers is not None else pa.nulls(n, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=schema(include_headers))


def headers_array(counts: np.ndarray, flat: Sequence[tuple[str, bytes | None]]) -> pa.Array:
    """The ``headers`` column: ``counts[i]`` headers for record i, taken in order from
    ``flat``; null where a record has none (as Spark's Kafka source gives)."""
    n = len(counts)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] != len(flat):
        raise ValueError(f"{len(flat)} headers for header counts summing to {offsets[-1]}")
    keys = pa.array([h[0] for h in flat], pa.string())
    values = pa.array([h[1] for h in flat], pa.binary())
    children = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    bitmap, nulls = _validity(np.asarray(counts) > 0)
    return pa.Array.from_buffers(HEADERS_TYPE, n, [bitmap, pa.py_buffer(offsets)],
                                 null_count=nulls, children=[children])


def records_to_batch(records: Sequence[Any], topic: str, partition: int,
                     include_headers: bool) -> pa.RecordBatch:
    """``pylog.client.ConsumerRecord``s (the network path with headers) as one RecordBatch."""
    n = len(records)
    arrays = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array([r.offset for r in records], pa.int64()),
        _fixed(_TS_TYPE, np.array([r.timestamp for r in records], dtype=np.int64) * 1000, n),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if include_headers:
        counts = np.array([len(r.headers) for r in records], dtype=np.int32)
        arrays.append(headers_array(counts, [h for r in records for h in r.headers]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema(include_headers))
