"""Pure-Python twin of logcore._columns: every record of a run of batches as columns.

Output layout (Arrow-style, numpy), for n records:

    offsets          int64[n]      base_offset + offset_delta
    timestamps       int64[n]      base_timestamp + timestamp_delta (LogAppendTime:
                                   the batch max_timestamp)
    timestamp_types  int8[n]       0 create, 1 log append
    key_offsets      int32[n + 1]  key i is key_data[key_offsets[i]:key_offsets[i + 1]]
    value_offsets    int32[n + 1]  likewise for value_data
    key_data         uint8[...]    the keys, back to back
    value_data       uint8[...]    the values, back to back
    key_valid        bool[n]       False for a null key (its slot is empty)
    value_valid      bool[n]       False for a null value
    header_counts    int32[n]

With ``copy_values=False`` the values are not copied when every batch is uncompressed:
``value_data`` is the input buffer itself (read-only), ``value_offsets`` is None, and value
i is ``value_data[value_starts[i]:value_starts[i] + value_lengths[i]]`` (int64[n] and
int32[n], 0 for a null value); with a compressed batch the values are copied and described
the same way. With the default, ``value_starts`` and ``value_lengths`` are None.

Input: concatenated RecordBatch v2 (see logcore._ref.reader for the batch layout and
logcore._ref.record for the record layout); control batches are skipped.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from .fields import ATTR_TIMESTAMP_TYPE, HEADER_SIZE, INT32_MAX, wrap64
from .reader import iter_batches


class Columns:
    """Every record of a run of batches as Arrow-style numpy columns.

    Attributes:
        offsets: int64[n]
        timestamps: int64[n] (LogAppendTime batches: the batch's max_timestamp)
        timestamp_types: int8[n] (0 create, 1 log append)
        key_offsets, value_offsets: int32[n + 1]; key i is key_data[key_offsets[i]:
            key_offsets[i + 1]]; a null key has an empty slot and key_valid[i] False.
        key_data, value_data: uint8, contiguous
        key_valid, value_valid: bool[n]
        header_counts: int32[n]
        num_records: n
        value_starts: int64[n], value_lengths: int32[n], with value_offsets None, when
            decoded with ``copy_values=False`` (see the module docstring); else None.
    """

    __slots__ = (
        "_offsets",
        "_timestamps",
        "_timestamp_types",
        "_key_offsets",
        "_value_offsets",
        "_key_data",
        "_value_data",
        "_key_valid",
        "_value_valid",
        "_header_counts",
        "_value_starts",
        "_value_lengths",
        "_num_records",
    )

    def __init__(
        self,
        offsets,
        timestamps,
        timestamp_types,
        key_offsets,
        value_offsets,
        key_data,
        value_data,
        key_valid,
        value_valid,
        header_counts,
        value_starts=None,
        value_lengths=None,
    ) -> None:
        self._offsets = offsets
        self._timestamps = timestamps
        self._timestamp_types = timestamp_types
        self._key_offsets = key_offsets
        self._value_offsets = value_offsets
        self._key_data = key_data
        self._value_data = value_data
        self._key_valid = key_valid
        self._value_valid = value_valid
        self._header_counts = header_counts
        self._value_starts = value_starts
        self._value_lengths = value_lengths
        self._num_records = len(offsets)

    offsets = property(lambda self: self._offsets)
    timestamps = property(lambda self: self._timestamps)
    timestamp_types = property(lambda self: self._timestamp_types)
    key_offsets = property(lambda self: self._key_offsets)
    value_offsets = property(lambda self: self._value_offsets)
    key_data = property(lambda self: self._key_data)
    value_data = property(lambda self: self._value_data)
    key_valid = property(lambda self: self._key_valid)
    value_valid = property(lambda self: self._value_valid)
    header_counts = property(lambda self: self._header_counts)
    value_starts = property(lambda self: self._value_starts)
    value_lengths = property(lambda self: self._value_lengths)
    num_records = property(lambda self: self._num_records)

    def __len__(self) -> int:
        return self.num_records

    def __repr__(self) -> str:
        return f"Columns(num_records={self.num_records})"


def decode_columns(buffer, *, copy_values: bool = True) -> Columns:
    """Decode every record of every complete data batch into numpy columns.

    Batches are walked as iter_batches does (a truncated trailing batch is skipped);
    control batches are skipped, as a consumer does; each batch's CRC is checked.
    Nothing is allocated from a count read off the wire: columns grow with the records
    actually parsed.

    ``copy_values=False``: see the module docstring (the caller must not modify
    ``buffer`` while the columns live).

    Raises:
        CorruptRecordError: a CRC mismatch or any malformed batch or record.
    """
    offsets: list[int] = []
    timestamps: list[int] = []
    ts_types: list[int] = []
    key_offsets = [0]
    value_offsets = [0]
    key_data = bytearray()
    value_data = bytearray()
    key_valid: list[bool] = []
    value_valid: list[bool] = []
    header_counts: list[int] = []
    # Where each value sits in the input (uncompressed batches); None once a batch is
    # compressed (the values are then described by their place in the copy).
    in_place: list[int] | None = []
    for batch in iter_batches(buffer):
        if batch.is_control:
            continue
        batch._check_crc()
        section_pos = batch._position + HEADER_SIZE
        if batch.compression != "none":
            in_place = None
        log_append = bool(batch.attributes & ATTR_TIMESTAMP_TYPE)
        for raw in batch._raw_records():
            offsets.append(wrap64(batch.base_offset + raw.offset_delta))
            if log_append:
                timestamps.append(batch.max_timestamp)
            else:
                timestamps.append(wrap64(batch.base_timestamp + raw.timestamp_delta))
            ts_types.append(1 if log_append else 0)
            if raw.key is not None:
                key_data += raw.key
            key_valid.append(raw.key is not None)
            key_offsets.append(len(key_data))
            if in_place is not None:
                in_place.append(section_pos + raw.value_pos if raw.value is not None else 0)
            if raw.value is not None:
                value_data += raw.value
            value_valid.append(raw.value is not None)
            value_offsets.append(len(value_data))
            header_counts.append(len(raw.headers))
    if len(key_data) > INT32_MAX or len(value_data) > INT32_MAX:
        raise CorruptRecordError("key or value data exceeds the int32 offsets of Columns")
    if copy_values:
        return Columns(
            np.array(offsets, dtype=np.int64),
            np.array(timestamps, dtype=np.int64),
            np.array(ts_types, dtype=np.int8),
            np.array(key_offsets, dtype=np.int32),
            np.array(value_offsets, dtype=np.int32),
            np.frombuffer(bytes(key_data), dtype=np.uint8),
            np.frombuffer(bytes(value_data), dtype=np.uint8),
            np.array(key_valid, dtype=np.bool_),
            np.array(value_valid, dtype=np.bool_),
            np.array(header_counts, dtype=np.int32),
        )
    ends = np.array(value_offsets, dtype=np.int64)
    lengths = (ends[1:] - ends[:-1]).astype(np.int32)
    if in_place is not None:
        starts = np.array(in_place, dtype=np.int64)
        data = np.frombuffer(buffer, dtype=np.uint8)
        data.flags.writeable = False
    else:
        starts = ends[:-1].copy()
        data = np.frombuffer(bytes(value_data), dtype=np.uint8)
    return Columns(
        np.array(offsets, dtype=np.int64),
        np.array(timestamps, dtype=np.int64),
        np.array(ts_types, dtype=np.int8),
        np.array(key_offsets, dtype=np.int32),
        None,
        np.frombuffer(bytes(key_data), dtype=np.uint8),
        data,
        np.array(key_valid, dtype=np.bool_),
        np.array(value_valid, dtype=np.bool_),
        np.array(header_counts, dtype=np.int32),
        starts,
        lengths,
    )
