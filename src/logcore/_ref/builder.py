"""Pure-Python twin of logcore._builder: BatchBuilder, the producer's side.

What it writes, big-endian (Kafka's DefaultRecordBatch.java and DefaultRecord.java):

    offset  field                   type
    0       base_offset             int64
    8       batch_length            int32   bytes after this field (>= 49)
    12      partition_leader_epoch  int32   outside the CRC: the broker stamps it freely
    16      magic                   int8    = 2
    17      crc                     uint32  CRC-32C of bytes 21 .. end of batch
    21      attributes              int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy,
                                            3 lz4, 4 zstd), bit 3 timestamp type
                                            (1 = LogAppendTime), bit 4 transactional,
                                            bit 5 control, bit 6 delete horizon
    23      last_offset_delta       int32
    27      base_timestamp          int64
    35      max_timestamp           int64
    43      producer_id             int64
    51      producer_epoch          int16
    53      base_sequence           int32
    57      records_count           int32
    61      records                 (one compressed blob when the codec is not none)

    record (one per append):
        length varint | attributes int8 (unused) | timestamp_delta varlong |
        offset_delta varint | key_length varint (-1 = null) | key |
        value_length varint (-1 = null) | value | header_count varint |
        header_count x (key_length varint (>= 0) | key utf-8 |
                        value_length varint (-1 = null) | value)

base_timestamp is the first record's timestamp and each record stores its delta from
it; offset_delta is the record's index; last_offset_delta = count - 1. The CRC is
computed last, over bytes 21 .. end (after compression of the records section).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .. import _compression
from .crc32c import byte_view, crc32c
from .fields import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER,
    HEADER_SIZE,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    OFF_ATTRIBUTES,
    OFF_CRC,
    TIMESTAMP_TYPE_NAMES,
    U32,
)
from .varint import INT64_MAX, INT64_MIN, encode_varint


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} {value} is outside [{lo}, {hi}]")
    return value


def _as_bytes(name: str, value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{name} must be bytes-like or None, not str")
    try:
        return bytes(byte_view(value))
    except TypeError:
        raise TypeError(f"{name} must be bytes-like or None, not {type(value).__name__}") from None


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


class BatchBuilder:
    """Builds one RecordBatch v2 (the producer's side).

    Uncompressed output is byte-identical to aiokafka's DefaultRecordBatchBuilder for the
    same inputs. Compressed batches are always compressed (as the Java producer does),
    even when that does not make them smaller. Not thread-safe.

    Args (keyword-only):
        compression: "none", "gzip", "snappy", "lz4" or "zstd".
        compression_level: None for the codec's Kafka default, else checked (ValueError).
        base_offset, partition_leader_epoch, producer_id, producer_epoch, base_sequence:
            written into the header as given.
        timestamp_type: "create" / "log_append" (also "CreateTime", "LogAppendTime", 0, 1).
        transactional, is_control: attribute bits 4 and 5.
    """

    def __init__(
        self,
        *,
        compression: str = "none",
        compression_level: int | None = None,
        base_offset: int = 0,
        timestamp_type: str | int = "create",
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        self._codec = _compression.codec_id(compression)
        self._level = _compression.check_level(self._codec, compression_level)
        try:
            ts_type = TIMESTAMP_TYPE_NAMES[timestamp_type]
        except (KeyError, TypeError):
            raise ValueError(
                f"unknown timestamp_type {timestamp_type!r}; expected 'create' or 'log_append'"
            ) from None
        self._base_offset = _check_int("base_offset", base_offset, INT64_MIN, INT64_MAX)
        self._producer_id = _check_int("producer_id", producer_id, INT64_MIN, INT64_MAX)
        self._producer_epoch = _check_int("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
        self._base_sequence = _check_int("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
        self._leader_epoch = _check_int(
            "partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX
        )
        self._attributes = self._codec
        if ts_type:
            self._attributes |= ATTR_TIMESTAMP_TYPE
        if transactional:
            self._attributes |= ATTR_TRANSACTIONAL
        if is_control:
            self._attributes |= ATTR_CONTROL
        self._records = bytearray()  # encoded records, uncompressed
        self._count = 0
        self._base_timestamp: int | None = None
        self._max_timestamp: int | None = None

    def append(self, value, key=None, timestamp_ms: int | None = None, headers=None) -> int:
        """Add one record; return its offset delta.

        Args:
            value, key: bytes-like or None (null).
            timestamp_ms: None for the current wall-clock time in ms.
            headers: a sequence of (str, bytes-like | None) or None.

        Raises:
            TypeError: wrong types. ValueError: a timestamp outside int64, or too many
                records for one batch.
        """
        value_b = _as_bytes("value", value)
        key_b = _as_bytes("key", key)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        _check_int("timestamp_ms", timestamp_ms, INT64_MIN, INT64_MAX)
        encoded_headers = []
        for header in headers or ():
            h_key, h_value = header
            if not isinstance(h_key, str):
                raise TypeError(f"header key must be str, not {type(h_key).__name__}")
            encoded_headers.append((h_key.encode("utf-8"), _as_bytes("header value", h_value)))
        offset_delta = self._count
        if offset_delta > INT32_MAX:
            raise ValueError("a batch holds at most 2**31 records")
        base_ts = timestamp_ms if self._base_timestamp is None else self._base_timestamp
        # Raises ValueError if the delta does not fit a varlong (absurd timestamps).
        body = bytearray(b"\x00")  # record attributes: unused, always 0
        body += encode_varint(timestamp_ms - base_ts)
        body += encode_varint(offset_delta)
        body += _bytes_field(key_b)
        body += _bytes_field(value_b)
        body += encode_varint(len(encoded_headers))
        for hk, hv in encoded_headers:
            body += encode_varint(len(hk)) + hk
            body += _bytes_field(hv)
        self._records += encode_varint(len(body))
        self._records += body
        self._base_timestamp = base_ts
        if self._max_timestamp is None or timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        self._count += 1
        return offset_delta

    def append_many(
        self,
        values: Sequence,
        keys: Sequence | None = None,
        timestamps_ms: Sequence[int] | None = None,
    ) -> None:
        """Append len(values) records without headers (keys/timestamps None: nulls / now).

        Raises:
            ValueError: keys or timestamps_ms of a different length than values.
        """
        n = len(values)
        if keys is not None and len(keys) != n:
            raise ValueError(f"{len(keys)} keys for {n} values")
        if timestamps_ms is not None and len(timestamps_ms) != n:
            raise ValueError(f"{len(timestamps_ms)} timestamps for {n} values")
        for i in range(n):
            self.append(
                values[i],
                None if keys is None else keys[i],
                None if timestamps_ms is None else timestamps_ms[i],
            )

    def estimated_size(self) -> int:
        """Size of the built batch if uncompressed (an upper bound on it)."""
        return HEADER_SIZE + len(self._records)

    def __len__(self) -> int:
        return self._count

    def build(self) -> bytes:
        """Return the batch's bytes (header, CRC, records, compressed if asked).

        Raises:
            ValueError: no record was appended.
        """
        if self._count == 0:
            raise ValueError("cannot build an empty batch")
        records: bytes | bytearray = self._records
        if self._codec != _compression.NONE:
            records = _compression.compress(self._codec, bytes(records), self._level)
        out = bytearray(HEADER_SIZE)
        out += records
        HEADER.pack_into(
            out,
            0,
            self._base_offset,
            len(out) - LOG_OVERHEAD,
            self._leader_epoch,
            MAGIC,
            0,  # CRC, computed below over bytes 21..end
            self._attributes,
            self._count - 1,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        )
        U32.pack_into(out, OFF_CRC, crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
        return bytes(out)
