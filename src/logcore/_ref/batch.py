"""Pure-Python RecordBatch v2 codec: the test oracle for ``logcore._batch``.

Byte layout (big-endian; Kafka's DefaultRecordBatch.java and DefaultRecord.java,
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/DefaultRecordBatch.java
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/record/DefaultRecord.java
and KIP-98 for the producer fields):

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

    record:  length varint | attributes int8 | timestamp_delta varlong |
             offset_delta varint | key_length varint (-1 = null) | key |
             value_length varint (-1 = null) | value | header_count varint |
             header_count x (key_length varint (>= 0) | key utf-8 |
                             value_length varint (-1 = null) | value)

All varints are zig-zag. An int32 field's varint may take at most 5 bytes and must
decode to an int32; a varlong at most 10 bytes. The smallest record is 7 bytes
(length byte + six one-byte fields).

This module follows logcore's codec contract (docs/architecture.md) to the letter and
favours plain, checkable code over speed: every read goes through ``_Reader``, which
checks the bound before it advances. Arithmetic that Kafka does on Java longs
(base_offset + offset_delta, base_timestamp + timestamp_delta) wraps to int64 here too,
so that the compiled codec and this twin agree on absurd but well-formed input.

Nothing here is thread-safe in the sense of sharing a BatchBuilder between threads;
RecordBatch views are read-only and may be shared as long as the buffer is not mutated.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence

import numpy as np

from .. import _compression
from ..errors import CorruptRecordError, RecordTooLargeError
from .crc32c import byte_view as _byte_view
from .crc32c import crc32c
from .varint import INT64_MAX, INT64_MIN, encode_varint

# ---------------------------------------------------------------------------------------
# Layout constants
# ---------------------------------------------------------------------------------------

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
assert HEADER_SIZE == 61

OFF_BASE_OFFSET = 0
OFF_BATCH_LENGTH = 8
OFF_LEADER_EPOCH = 12
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_LAST_OFFSET_DELTA = 23
OFF_BASE_TIMESTAMP = 27
OFF_MAX_TIMESTAMP = 35
OFF_PRODUCER_ID = 43
OFF_PRODUCER_EPOCH = 51
OFF_BASE_SEQUENCE = 53
OFF_RECORDS_COUNT = 57
OFF_RECORDS = 61

LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted in batch_length
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MIN_RECORD_SIZE = 7
# iter_batches needs base_offset, batch_length, leader epoch and magic to decide.
MIN_BATCH_PROBE = OFF_MAGIC + 1  # 17

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

MAGIC = 2
NO_PARTITION_LEADER_EPOCH = -1

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")

TIMESTAMP_TYPES = ("create", "log_append")
_TIMESTAMP_TYPE_NAMES = {
    "create": 0,
    "log_append": 1,
    "CreateTime": 0,
    "LogAppendTime": 1,
    0: 0,
    1: 1,
}


def _wrap64(n: int) -> int:
    """Two's-complement wrap to int64, as Java long arithmetic does."""
    return ((n - INT64_MIN) & 0xFFFFFFFFFFFFFFFF) + INT64_MIN


# ---------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------


class _Reader:
    """A bounded cursor over ``view[pos:end]``: every read checks, then advances.

    Errors are raised as CorruptRecordError with ``position`` = ``base + pos`` of the
    field that failed, so that a position in a decompressed record section can be mapped
    back (``base`` is the section's position in the caller's buffer when that makes sense).
    """

    __slots__ = ("view", "pos", "end", "base")

    def __init__(self, view: memoryview, pos: int, end: int, base: int = 0) -> None:
        self.view = view
        self.pos = pos
        self.end = end
        self.base = base

    def error(self, what: str, pos: int | None = None) -> CorruptRecordError:
        p = self.base + (self.pos if pos is None else pos)
        return CorruptRecordError(f"{what} at byte {p}", position=p)

    def _raw_varint(self, max_bytes: int) -> int:
        start = self.pos
        value = 0
        shift = 0
        while True:
            if self.pos >= self.end:
                raise self.error("truncated varint", start)
            if self.pos - start >= max_bytes:
                raise self.error(f"varint longer than {max_bytes} bytes", start)
            b = self.view[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def varint(self) -> int:
        """A zig-zag varint for an int32 field: at most 5 bytes, value within int32."""
        start = self.pos
        raw = self._raw_varint(5)
        value = (raw >> 1) ^ -(raw & 1)
        if not INT32_MIN <= value <= INT32_MAX:
            raise self.error("varint overflows int32", start)
        return value

    def varlong(self) -> int:
        """A zig-zag varint for an int64 field: at most 10 bytes, value within int64."""
        start = self.pos
        raw = self._raw_varint(10)
        if raw > 0xFFFFFFFFFFFFFFFF:
            raise self.error("varlong overflows int64", start)
        return (raw >> 1) ^ -(raw & 1)

    def take(self, n: int, what: str, at: int | None = None) -> memoryview:
        """n bytes; ``at`` is where the field (its length prefix) began, for errors."""
        if n > self.end - self.pos:
            raise self.error(f"{what} of {n} bytes runs past the end of its record", at)
        out = self.view[self.pos : self.pos + n]
        self.pos += n
        return out

    def skip(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            raise self.error(f"{what} of {n} bytes runs past the end of its record")
        self.pos += n


class _RawRecord:
    """A parsed record: fields as plain values, key/value/header bytes as views."""

    __slots__ = ("timestamp_delta", "offset_delta", "key", "value", "headers")

    def __init__(self, timestamp_delta, offset_delta, key, value, headers) -> None:
        self.timestamp_delta = timestamp_delta
        self.offset_delta = offset_delta
        self.key = key  # memoryview or None
        self.value = value  # memoryview or None
        self.headers = headers  # list of (key memoryview, value memoryview | None)


def _read_record(r: _Reader) -> _RawRecord:
    """Parse one record at ``r.pos``; leave ``r.pos`` just after it.

    Raises:
        CorruptRecordError: any field malformed, a length out of range, a field running
            past the record's declared length, or the record not ending exactly there.
    """
    start = r.pos
    length = r.varint()
    if length < MIN_RECORD_SIZE - 1:
        raise r.error(f"record length {length} is below the minimum", start)
    if length > r.end - r.pos:
        raise r.error(f"record of {length} bytes runs past the end of the records", start)
    outer_end = r.end
    r.end = r.pos + length  # every field must stay inside the declared record
    try:
        # Errors point at the first byte of the offending field (`at` before each read).
        r.skip(1, "record attributes")
        timestamp_delta = r.varlong()
        offset_delta = r.varint()
        at = r.pos
        key_length = r.varint()
        if key_length < -1:
            raise r.error(f"invalid key length {key_length}", at)
        key = None if key_length == -1 else r.take(key_length, "key", at)
        at = r.pos
        value_length = r.varint()
        if value_length < -1:
            raise r.error(f"invalid value length {value_length}", at)
        value = None if value_length == -1 else r.take(value_length, "value", at)
        at = r.pos
        header_count = r.varint()
        if header_count < 0:
            raise r.error(f"invalid header count {header_count}", at)
        headers = []
        # No preallocation from header_count: each header needs at least 2 bytes, so the
        # loop ends at the record's end long before an absurd count matters.
        for _ in range(header_count):
            at = r.pos
            hk_length = r.varint()
            if hk_length < 0:
                raise r.error(f"invalid header key length {hk_length}", at)
            hk = r.take(hk_length, "header key", at)
            at = r.pos
            hv_length = r.varint()
            if hv_length < -1:
                raise r.error(f"invalid header value length {hv_length}", at)
            hv = None if hv_length == -1 else r.take(hv_length, "header value", at)
            headers.append((hk, hv))
        if r.pos != r.end:
            raise r.error(f"record has {r.end - r.pos} bytes after its last header")
    finally:
        r.end = outer_end
    return _RawRecord(timestamp_delta, offset_delta, key, value, headers)


class Record:
    """One record of a batch, with its absolute offset and timestamp.

    ``key``, ``value`` and header values are ``bytes`` copies (or None for null), so a
    Record outlives the buffer it came from.
    """

    __slots__ = ("_offset", "_timestamp", "_timestamp_type", "_key", "_value", "_headers")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
    ) -> None:
        self._offset = offset
        self._timestamp = timestamp
        self._timestamp_type = timestamp_type
        self._key = key
        self._value = value
        self._headers = headers

    # Read-only, like the compiled Record.
    offset = property(lambda self: self._offset)
    timestamp = property(lambda self: self._timestamp)
    timestamp_type = property(lambda self: self._timestamp_type)
    key = property(lambda self: self._key)
    value = property(lambda self: self._value)
    headers = property(lambda self: self._headers)

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


# ---------------------------------------------------------------------------------------
# RecordBatch
# ---------------------------------------------------------------------------------------


def _check_batch_header(view: memoryview, pos: int, batch_index: int | None) -> int:
    """Check the constructor's conditions for a batch at ``pos``; return its full size."""
    avail = len(view) - pos
    if avail < HEADER_SIZE:
        raise _corrupt(
            f"batch header needs {HEADER_SIZE} bytes, only {avail} present", batch_index, pos
        )
    (batch_length,) = _I32.unpack_from(view, pos + OFF_BATCH_LENGTH)
    if batch_length < MIN_BATCH_LENGTH:
        raise _corrupt(
            f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            batch_index,
            pos,
        )
    size = LOG_OVERHEAD + batch_length
    if size > avail:
        raise _corrupt(
            f"batch of {size} bytes runs past the end of the buffer ({avail} bytes left)",
            batch_index,
            pos,
        )
    magic = view[pos + OFF_MAGIC]
    if magic != MAGIC:
        raise _corrupt(f"unsupported magic {magic} (expected 2)", batch_index, pos)
    return size


def _corrupt(reason: str, batch_index: int | None, position: int) -> CorruptRecordError:
    where = (
        f"batch {batch_index} at byte {position}"
        if batch_index is not None
        else (f"batch at byte {position}")
    )
    return CorruptRecordError(f"{where}: {reason}", batch_index=batch_index, position=position)


class RecordBatch:
    """A read-only view of one RecordBatch v2 at the start of a buffer.

    The view is zero-copy: it keeps the buffer alive (and, for an mmap, exported) for as
    long as it lives. Trailing bytes after the batch are ignored. Header properties never
    raise once constructed; ``validate()`` checks the CRC and the full record structure;
    iteration checks the structure (not the CRC) and yields ``Record`` objects.

    Args:
        buffer: bytes, bytearray, memoryview, mmap or any other byte buffer.

    Raises:
        CorruptRecordError: (position=0) fewer than 61 bytes, batch_length < 49, the batch
            runs past the end of the buffer, or magic != 2.
        TypeError: buffer does not support the buffer protocol.
    """

    __slots__ = (
        "_view",
        "_position",
        "_batch_index",
        "_base_offset",
        "_batch_length",
        "_partition_leader_epoch",
        "_magic",
        "_crc",
        "_attributes",
        "_last_offset_delta",
        "_base_timestamp",
        "_max_timestamp",
        "_producer_id",
        "_producer_epoch",
        "_base_sequence",
        "_records_count",
    )

    def __init__(self, buffer) -> None:
        view = _byte_view(buffer)
        size = _check_batch_header(view, 0, None)
        self._init(view[:size], 0, None)

    @classmethod
    def _at(cls, view: memoryview, position: int, batch_index: int) -> RecordBatch:
        """A batch already checked by the caller, remembering where it sits in its buffer."""
        self = cls.__new__(cls)
        self._init(view, position, batch_index)
        return self

    def _init(self, view: memoryview, position: int, batch_index: int | None) -> None:
        self._view = view
        self._position = position
        self._batch_index = batch_index
        (
            self._base_offset,
            self._batch_length,
            self._partition_leader_epoch,
            self._magic,
            self._crc,
            self._attributes,
            self._last_offset_delta,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._records_count,
        ) = HEADER.unpack_from(view, 0)

    # -- header fields (read-only) -------------------------------------------------------

    base_offset = property(lambda self: self._base_offset)
    batch_length = property(lambda self: self._batch_length)
    partition_leader_epoch = property(lambda self: self._partition_leader_epoch)
    magic = property(lambda self: self._magic)
    crc = property(lambda self: self._crc)
    attributes = property(lambda self: self._attributes)
    last_offset_delta = property(lambda self: self._last_offset_delta)
    base_timestamp = property(lambda self: self._base_timestamp)
    max_timestamp = property(lambda self: self._max_timestamp)
    producer_id = property(lambda self: self._producer_id)
    producer_epoch = property(lambda self: self._producer_epoch)
    base_sequence = property(lambda self: self._base_sequence)
    records_count = property(lambda self: self._records_count)

    # -- header-derived properties -------------------------------------------------------

    @property
    def last_offset(self) -> int:
        return _wrap64(self.base_offset + self.last_offset_delta)

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def compression(self) -> str:
        """Codec name; "unknown" for the invalid ids 5-7 (validate() rejects those)."""
        cid = self.attributes & ATTR_CODEC_MASK
        return _compression.NAMES[cid] if cid < len(_compression.NAMES) else "unknown"

    @property
    def timestamp_type(self) -> str:
        return TIMESTAMP_TYPES[1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0]

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records_count={self.records_count}, "
            f"compression={self.compression!r}, size_in_bytes={self.size_in_bytes})"
        )

    # -- validation ----------------------------------------------------------------------

    def _err(self, reason: str, position: int | None = None) -> CorruptRecordError:
        return _corrupt(reason, self._batch_index, self._position if position is None else position)

    def _check_crc(self) -> None:
        actual = crc32c(self._view[OFF_ATTRIBUTES:])
        if actual != self.crc:
            raise self._err(f"CRC mismatch: stored 0x{self.crc:08x}, computed 0x{actual:08x}")

    def _records_section(self) -> tuple[memoryview, int]:
        """The (decompressed) record bytes, and their position in the buffer (or -1)."""
        codec = self.attributes & ATTR_CODEC_MASK
        body = self._view[OFF_RECORDS:]
        if codec == _compression.NONE:
            return body, self._position + OFF_RECORDS
        if codec >= len(_compression.NAMES):
            raise self._err(f"unknown compression codec id {codec}")
        try:
            data = _compression.decompress(codec, body)
        except CorruptRecordError as exc:
            raise self._err(str(exc), self._position + OFF_RECORDS) from None
        return memoryview(data), -1

    def _raw_records(self) -> Iterator[_RawRecord]:
        """Parse exactly records_count records covering the whole record section."""
        count = self.records_count
        if count < 0:
            raise self._err(f"negative records_count {count}")
        section, section_pos = self._records_section()
        base = section_pos if section_pos >= 0 else 0
        r = _Reader(section, 0, len(section), base)
        for index in range(count):
            if r.pos >= r.end:
                raise self._err(f"records_count is {count} but the records end after {index}")
            try:
                yield _read_record(r)
            except CorruptRecordError as exc:
                raise self._record_err(index, exc, section_pos) from None
        if r.pos != r.end:
            raise self._err(f"{r.end - r.pos} bytes after the last of {count} records")

    def _record_err(self, index: int, exc: CorruptRecordError, section_pos: int):
        if section_pos >= 0:
            return self._err(f"record {index}: {exc}", exc.position)
        return self._err(f"record {index} (decompressed records): {exc}")

    def validate(self) -> None:
        """Check the CRC, the codec and every record (decompressing if needed).

        Raises:
            CorruptRecordError: the first problem found (CRC, codec, record structure, a
                header key that is not utf-8), naming the batch position; a CRC mismatch
                names both the stored and the computed CRC.
        """
        self._check_crc()
        # Exactly what iteration checks (so is_valid() means iteration succeeds), including
        # that header keys are utf-8. validate_for_append does not decode header keys:
        # Kafka's broker accepts any bytes there.
        for _ in self:
            pass

    def is_valid(self) -> bool:
        """True if validate() would not raise."""
        try:
            self.validate()
        except CorruptRecordError:
            return False
        return True

    # -- records -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Record]:
        """Yield the batch's records (decompressing if needed; the CRC is not checked).

        Raises:
            CorruptRecordError: malformed records, unknown codec, bad compressed data.
        """
        log_append = bool(self.attributes & ATTR_TIMESTAMP_TYPE)
        ts_type = TIMESTAMP_TYPES[1 if log_append else 0]
        for index, raw in enumerate(self._raw_records()):
            if log_append:
                timestamp = self.max_timestamp
            else:
                timestamp = _wrap64(self.base_timestamp + raw.timestamp_delta)
            headers = []
            for hk, hv in raw.headers:
                try:
                    name = str(hk, "utf-8")
                except UnicodeDecodeError:
                    # Kafka's clients decode header keys strictly (kafka-python, aiokafka).
                    raise self._err(f"record {index}: header key is not valid utf-8") from None
                headers.append((name, None if hv is None else bytes(hv)))
            yield Record(
                _wrap64(self.base_offset + raw.offset_delta),
                timestamp,
                ts_type,
                None if raw.key is None else bytes(raw.key),
                None if raw.value is None else bytes(raw.value),
                headers,
            )


def iter_batches(buffer) -> Iterator[RecordBatch]:
    """Yield a zero-copy RecordBatch view for each batch in concatenated batches.

    Fewer than 17 bytes left, or a batch whose declared size runs past the end of the
    buffer, ends the iteration silently (a truncated trailing batch, as Kafka clients
    treat a fetch response cut at max_bytes). Checks are Kafka's
    (ByteBufferLogInputStream.nextBatch): size first, then whether it fits, then magic.

    Raises:
        CorruptRecordError: batch_length < 49 or magic != 2 (position = batch start).
    """
    view = _byte_view(buffer)
    pos = 0
    index = 0
    n = len(view)
    while n - pos >= MIN_BATCH_PROBE:
        (batch_length,) = _I32.unpack_from(view, pos + OFF_BATCH_LENGTH)
        if batch_length < MIN_BATCH_LENGTH:
            raise _corrupt(
                f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
                index,
                pos,
            )
        size = LOG_OVERHEAD + batch_length
        if size > n - pos:
            return  # truncated trailing batch
        magic = view[pos + OFF_MAGIC]
        if magic != MAGIC:
            raise _corrupt(f"unsupported magic {magic} (expected 2)", index, pos)
        yield RecordBatch._at(view[pos : pos + size], pos, index)
        pos += size
        index += 1


# ---------------------------------------------------------------------------------------
# Columnar decode
# ---------------------------------------------------------------------------------------


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
    num_records = property(lambda self: self._num_records)

    def __len__(self) -> int:
        return self.num_records

    def __repr__(self) -> str:
        return f"Columns(num_records={self.num_records})"


def decode_columns(buffer) -> Columns:
    """Decode every record of every complete data batch into numpy columns.

    Batches are walked as iter_batches does (a truncated trailing batch is skipped);
    control batches are skipped, as a consumer does; each batch's CRC is checked.
    Nothing is allocated from a count read off the wire: columns grow with the records
    actually parsed.

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
    for batch in iter_batches(buffer):
        if batch.is_control:
            continue
        batch._check_crc()
        log_append = bool(batch.attributes & ATTR_TIMESTAMP_TYPE)
        for raw in batch._raw_records():
            offsets.append(_wrap64(batch.base_offset + raw.offset_delta))
            if log_append:
                timestamps.append(batch.max_timestamp)
            else:
                timestamps.append(_wrap64(batch.base_timestamp + raw.timestamp_delta))
            ts_types.append(1 if log_append else 0)
            if raw.key is not None:
                key_data += raw.key
            key_valid.append(raw.key is not None)
            key_offsets.append(len(key_data))
            if raw.value is not None:
                value_data += raw.value
            value_valid.append(raw.value is not None)
            value_offsets.append(len(value_data))
            header_counts.append(len(raw.headers))
    if len(key_data) > INT32_MAX or len(value_data) > INT32_MAX:
        raise CorruptRecordError("key or value data exceeds the int32 offsets of Columns")
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


# ---------------------------------------------------------------------------------------
# validate_for_append
# ---------------------------------------------------------------------------------------


class AppendInfo:
    """What validate_for_append found and assigned (read-only attributes).

    first_offset / last_offset: offsets assigned to the first and last record.
    record_count, batch_count, size_in_bytes: totals over the record set.
    max_timestamp, offset_of_max_timestamp (first record holding the max),
    min_timestamp: LogAppendTime sets all three from log_append_time_ms / first_offset.
    producer_id, producer_epoch, first_sequence: of the first batch; last_sequence: of the
    last batch (base_sequence + last_offset_delta, wrapping past 2**31 - 1 to 0; -1 when
    base_sequence is -1). is_transactional, is_control: of the first batch.
    timestamp_type: "create" or "log_append", as written.
    """

    __slots__ = (
        "_first_offset",
        "_last_offset",
        "_record_count",
        "_max_timestamp",
        "_offset_of_max_timestamp",
        "_min_timestamp",
        "_size_in_bytes",
        "_batch_count",
        "_producer_id",
        "_producer_epoch",
        "_first_sequence",
        "_last_sequence",
        "_is_transactional",
        "_is_control",
        "_timestamp_type",
    )

    def __init__(self, **fields) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, fields[name[1:]])

    first_offset = property(lambda self: self._first_offset)
    last_offset = property(lambda self: self._last_offset)
    record_count = property(lambda self: self._record_count)
    max_timestamp = property(lambda self: self._max_timestamp)
    offset_of_max_timestamp = property(lambda self: self._offset_of_max_timestamp)
    min_timestamp = property(lambda self: self._min_timestamp)
    size_in_bytes = property(lambda self: self._size_in_bytes)
    batch_count = property(lambda self: self._batch_count)
    producer_id = property(lambda self: self._producer_id)
    producer_epoch = property(lambda self: self._producer_epoch)
    first_sequence = property(lambda self: self._first_sequence)
    last_sequence = property(lambda self: self._last_sequence)
    is_transactional = property(lambda self: self._is_transactional)
    is_control = property(lambda self: self._is_control)
    timestamp_type = property(lambda self: self._timestamp_type)

    def __setattr__(self, name, value):
        raise AttributeError(f"AppendInfo is read-only ({name})")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n[1:]}={getattr(self, n)!r}" for n in self.__slots__)
        return f"AppendInfo({fields})"


def _last_sequence(base_sequence: int, delta: int) -> int:
    # DefaultRecordBatch.incrementSequence: sequences wrap from Integer.MAX_VALUE to 0.
    if base_sequence == -1:
        return -1
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


class _Checked:
    """Pass-1 facts about one batch, needed by pass 2 and AppendInfo."""

    __slots__ = ("pos", "batch", "max_ts", "max_ts_delta", "min_ts")

    def __init__(self, pos, batch, max_ts, max_ts_delta, min_ts) -> None:
        self.pos = pos
        self.batch = batch
        self.max_ts = max_ts
        self.max_ts_delta = max_ts_delta  # offset delta of the first record holding max_ts
        self.min_ts = min_ts


def _check_for_append(view: memoryview, pos: int, index: int, max_message_bytes: int) -> _Checked:
    """Pass 1 for the batch at ``pos``, in the contract's order of checks."""
    avail = len(view) - pos
    if avail < HEADER_SIZE:
        raise _corrupt(
            f"partial batch: {avail} bytes, a batch header needs {HEADER_SIZE}", index, pos
        )
    (batch_length,) = _I32.unpack_from(view, pos + OFF_BATCH_LENGTH)
    if batch_length < MIN_BATCH_LENGTH:
        raise _corrupt(
            f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}", index, pos
        )
    size = LOG_OVERHEAD + batch_length
    if size > avail:
        raise _corrupt(f"partial batch: declares {size} bytes, only {avail} present", index, pos)
    if size > max_message_bytes:
        raise RecordTooLargeError(
            f"batch {index} at byte {pos}: {size} bytes exceeds max_message_bytes "
            f"{max_message_bytes}",
            batch_index=index,
            position=pos,
            size=size,
            limit=max_message_bytes,
        )
    magic = view[pos + OFF_MAGIC]
    if magic != MAGIC:
        raise _corrupt(f"unsupported magic {magic} (expected 2)", index, pos)
    batch = RecordBatch._at(view[pos : pos + size], pos, index)
    batch._check_crc()
    codec = batch.attributes & ATTR_CODEC_MASK
    if codec >= len(_compression.NAMES):
        raise batch._err(f"unknown compression codec id {codec}")
    count = batch.records_count
    if count < 1:
        raise batch._err(f"records_count {count}: a produced batch needs at least one record")
    if batch.last_offset_delta != count - 1:
        raise batch._err(
            f"last_offset_delta {batch.last_offset_delta} does not match records_count {count}"
        )
    log_append = bool(batch.attributes & ATTR_TIMESTAMP_TYPE)
    max_ts = min_ts = None
    max_ts_delta = 0
    for i, raw in enumerate(batch._raw_records()):
        if raw.offset_delta != i:
            raise batch._err(f"record {i} has offset_delta {raw.offset_delta}, expected {i}")
        if log_append:
            ts = batch.max_timestamp
        else:
            ts = _wrap64(batch.base_timestamp + raw.timestamp_delta)
        if max_ts is None or ts > max_ts:
            max_ts, max_ts_delta = ts, i
        if min_ts is None or ts < min_ts:
            min_ts = ts
    return _Checked(pos, batch, max_ts, max_ts_delta, min_ts)


def validate_for_append(
    buffer,
    *,
    next_offset: int,
    max_message_bytes: int,
    log_append_time_ms: int | None = None,
    partition_leader_epoch: int | None = None,
) -> AppendInfo:
    """Validate a produced record set and assign offsets in place (the broker's append).

    Pass 1 checks every batch (see _check_for_append for the order); pass 2 rewrites
    base_offset, the leader epoch, and the LogAppendTime / max_timestamp fields with their
    CRC. Nothing is written unless every batch passed, so on error the buffer is untouched.

    Args:
        buffer: a writable buffer (bytearray, writable memoryview, writable mmap).
        next_offset: offset to assign to the first record.
        max_message_bytes: the largest batch (12 + batch_length) accepted.
        log_append_time_ms: if given, stamp LogAppendTime with this time.
        partition_leader_epoch: if given, written into every batch.

    Returns:
        AppendInfo.

    Raises:
        TypeError: the buffer is read-only (or not a buffer).
        CorruptRecordError: any invalid batch, naming batch_index and position.
        RecordTooLargeError: a batch larger than max_message_bytes.
        ValueError: next_offset or the stamps are out of their field's range.
    """
    try:
        view = _byte_view(buffer)
    except (ValueError, BufferError) as exc:
        raise TypeError(
            f"validate_for_append needs a writable byte buffer (bytearray, mmap, ...): {exc}"
        ) from None
    if view.readonly:
        raise TypeError("validate_for_append needs a writable buffer (bytearray, mmap, ...)")
    if not 0 <= next_offset <= INT64_MAX:
        raise ValueError(f"next_offset {next_offset} is outside [0, 2**63 - 1]")
    if log_append_time_ms is not None and not INT64_MIN <= log_append_time_ms <= INT64_MAX:
        raise ValueError(f"log_append_time_ms {log_append_time_ms} is outside int64")
    if partition_leader_epoch is not None and not INT32_MIN <= partition_leader_epoch <= INT32_MAX:
        raise ValueError(f"partition_leader_epoch {partition_leader_epoch} is outside int32")
    if len(view) == 0:
        raise CorruptRecordError("empty record set", batch_index=0, position=0)

    # Pass 1: check everything, write nothing.
    checked: list[_Checked] = []
    pos = 0
    while pos < len(view):
        c = _check_for_append(view, pos, len(checked), max_message_bytes)
        checked.append(c)
        pos += c.batch.size_in_bytes
    total = sum(c.batch.records_count for c in checked)
    if next_offset + total - 1 > INT64_MAX:
        raise ValueError(f"offsets from {next_offset} for {total} records overflow int64")

    # Pass 2: rewrite headers in place.
    offset = next_offset
    max_ts = min_ts = None
    offset_of_max = next_offset
    for c in checked:
        b = c.batch
        p = c.pos
        _I64.pack_into(view, p + OFF_BASE_OFFSET, offset)
        if partition_leader_epoch is not None:
            _I32.pack_into(view, p + OFF_LEADER_EPOCH, partition_leader_epoch)
        if log_append_time_ms is not None:
            _I16.pack_into(view, p + OFF_ATTRIBUTES, b.attributes | ATTR_TIMESTAMP_TYPE)
            _I64.pack_into(view, p + OFF_MAX_TIMESTAMP, log_append_time_ms)
            _rewrite_crc(view, p, b.size_in_bytes)
        elif b.max_timestamp != c.max_ts:
            # Kafka fixes a CreateTime batch whose header max_timestamp disagrees with its
            # records (LogValidator); the CRC covers the field, so recompute it.
            _I64.pack_into(view, p + OFF_MAX_TIMESTAMP, c.max_ts)
            _rewrite_crc(view, p, b.size_in_bytes)
        if max_ts is None or c.max_ts > max_ts:
            max_ts, offset_of_max = c.max_ts, offset + c.max_ts_delta
        if min_ts is None or c.min_ts < min_ts:
            min_ts = c.min_ts
        offset += b.records_count

    first, last = checked[0].batch, checked[-1].batch
    if log_append_time_ms is not None:
        max_ts = min_ts = log_append_time_ms
        offset_of_max = next_offset
        ts_type = "log_append"
    else:
        ts_type = first.timestamp_type
    return AppendInfo(
        first_offset=next_offset,
        last_offset=next_offset + total - 1,
        record_count=total,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        min_timestamp=min_ts,
        size_in_bytes=len(view),
        batch_count=len(checked),
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        first_sequence=first.base_sequence,
        last_sequence=_last_sequence(last.base_sequence, last.last_offset_delta),
        is_transactional=first.is_transactional,
        is_control=first.is_control,
        timestamp_type=ts_type,
    )


def _rewrite_crc(view: memoryview, pos: int, size: int) -> None:
    _U32.pack_into(view, pos + OFF_CRC, crc32c(view[pos + OFF_ATTRIBUTES : pos + size]))


# ---------------------------------------------------------------------------------------
# BatchBuilder
# ---------------------------------------------------------------------------------------


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
        return bytes(_byte_view(value))
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
            ts_type = _TIMESTAMP_TYPE_NAMES[timestamp_type]
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
        _U32.pack_into(out, OFF_CRC, crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
        return bytes(out)
