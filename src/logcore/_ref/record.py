"""Pure-Python twin of logcore._record: one record of a RecordBatch v2.

Record layout (Kafka's DefaultRecord.java), all varints zig-zag:

    length varint | attributes int8 (unused) | timestamp_delta varlong |
    offset_delta varint | key_length varint (-1 = null) | key |
    value_length varint (-1 = null) | value | header_count varint |
    header_count x (key_length varint (>= 0) | key utf-8 |
                    value_length varint (-1 = null) | value)

An int32 field's varint may take at most 5 bytes and must decode to an int32; a varlong
at most 10 bytes. The smallest record is 7 bytes (length byte + six one-byte fields).
Every read goes through ``Reader``, which checks the bound before it advances; errors are
CorruptRecordError naming the byte position of the field that failed.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from .fields import INT32_MAX, INT32_MIN, MIN_RECORD_SIZE


def corrupt(reason: str, batch_index: int | None, position: int) -> CorruptRecordError:
    """CorruptRecordError naming the batch and the byte position."""
    where = (
        f"batch {batch_index} at byte {position}"
        if batch_index is not None
        else (f"batch at byte {position}")
    )
    return CorruptRecordError(f"{where}: {reason}", batch_index=batch_index, position=position)


class Reader:
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


class RawRecord:
    """A parsed record: fields as plain values, key/value/header bytes as views."""

    __slots__ = ("timestamp_delta", "offset_delta", "key", "value", "headers", "value_pos")

    def __init__(self, timestamp_delta, offset_delta, key, value, headers,
                 value_pos: int = 0) -> None:
        self.timestamp_delta = timestamp_delta
        self.offset_delta = offset_delta
        self.key = key  # memoryview or None
        self.value = value  # memoryview or None
        self.headers = headers  # list of (key memoryview, value memoryview | None)
        self.value_pos = value_pos  # where the value starts in the records section


def read_record(r: Reader) -> RawRecord:
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
        value_pos = r.pos
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
    return RawRecord(timestamp_delta, offset_delta, key, value, headers, value_pos)


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
    headers_or_none = property(lambda self: self._headers or None)

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )

