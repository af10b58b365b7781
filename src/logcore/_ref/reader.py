"""Pure-Python twin of logcore._reader: RecordBatch views and iter_batches.

A batch, big-endian (Kafka's DefaultRecordBatch.java and KIP-98):

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

Batches are concatenated with nothing between them: the next batch starts at
12 + batch_length. iter_batches walks them as Kafka's ByteBufferLogInputStream does
(fewer than 17 bytes left ends the walk; so does a last batch cut short). Records are
parsed by logcore._ref.record. Arithmetic that Kafka does on Java longs (base_offset +
offset_delta, base_timestamp + timestamp_delta) wraps to int64 here too, so that the
compiled codec and this twin agree on absurd but well-formed input.

RecordBatch views are read-only and may be shared between threads as long as the buffer
is not mutated.
"""

from __future__ import annotations

from collections.abc import Iterator

from .. import _compression
from ..errors import CorruptRecordError
from .crc32c import byte_view, crc32c
from .fields import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER,
    HEADER_SIZE,
    I32,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    MIN_BATCH_PROBE,
    OFF_ATTRIBUTES,
    OFF_BATCH_LENGTH,
    OFF_MAGIC,
    OFF_RECORDS,
    TIMESTAMP_TYPES,
    wrap64,
)
from .record import RawRecord, Reader, Record, corrupt, read_record


def _check_batch_header(view: memoryview, pos: int, batch_index: int | None) -> int:
    """Check the constructor's conditions for a batch at ``pos``; return its full size."""
    avail = len(view) - pos
    if avail < HEADER_SIZE:
        raise corrupt(
            f"batch header needs {HEADER_SIZE} bytes, only {avail} present", batch_index, pos
        )
    (batch_length,) = I32.unpack_from(view, pos + OFF_BATCH_LENGTH)
    if batch_length < MIN_BATCH_LENGTH:
        raise corrupt(
            f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            batch_index,
            pos,
        )
    size = LOG_OVERHEAD + batch_length
    if size > avail:
        raise corrupt(
            f"batch of {size} bytes runs past the end of the buffer ({avail} bytes left)",
            batch_index,
            pos,
        )
    magic = view[pos + OFF_MAGIC]
    if magic != MAGIC:
        raise corrupt(f"unsupported magic {magic} (expected 2)", batch_index, pos)
    return size


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
        view = byte_view(buffer)
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
        return wrap64(self.base_offset + self.last_offset_delta)

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
        return corrupt(reason, self._batch_index, self._position if position is None else position)

    def _check_crc(self) -> None:
        actual = crc32c(self._view[OFF_ATTRIBUTES:])
        if actual != self.crc:
            raise self._err(f"CRC mismatch: stored 0x{self.crc:08x}, computed 0x{actual:08x}")

    def _records_section(self, limit: int | None = None) -> tuple[memoryview, int]:
        """The (decompressed) record bytes, and their position in the buffer (or -1);
        ``limit`` bounds the decompressed size (default: a read's bound)."""
        codec = self.attributes & ATTR_CODEC_MASK
        body = self._view[OFF_RECORDS:]
        if codec == _compression.NONE:
            return body, self._position + OFF_RECORDS
        if codec >= len(_compression.NAMES):
            raise self._err(f"unknown compression codec id {codec}")
        try:
            data = _compression.decompress(
                codec, body, limit=_compression.MAX_DECOMPRESSED_BYTES if limit is None else limit
            )
        except CorruptRecordError as exc:
            raise self._err(str(exc), self._position + OFF_RECORDS) from None
        return memoryview(data), -1

    def _raw_records(self, limit: int | None = None) -> Iterator[RawRecord]:
        """Parse exactly records_count records covering the whole record section."""
        count = self.records_count
        if count < 0:
            raise self._err(f"negative records_count {count}")
        section, section_pos = self._records_section(limit)
        base = section_pos if section_pos >= 0 else 0
        r = Reader(section, 0, len(section), base)
        for index in range(count):
            if r.pos >= r.end:
                raise self._err(f"records_count is {count} but the records end after {index}")
            try:
                yield read_record(r)
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
                timestamp = wrap64(self.base_timestamp + raw.timestamp_delta)
            headers = []
            for hk, hv in raw.headers:
                try:
                    name = str(hk, "utf-8")
                except UnicodeDecodeError:
                    # Kafka's clients decode header keys strictly (kafka-python, aiokafka).
                    raise self._err(f"record {index}: header key is not valid utf-8") from None
                headers.append((name, None if hv is None else bytes(hv)))
            yield Record(
                wrap64(self.base_offset + raw.offset_delta),
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
    view = byte_view(buffer)
    pos = 0
    index = 0
    n = len(view)
    while n - pos >= MIN_BATCH_PROBE:
        (batch_length,) = I32.unpack_from(view, pos + OFF_BATCH_LENGTH)
        if batch_length < MIN_BATCH_LENGTH:
            raise corrupt(
                f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
                index,
                pos,
            )
        size = LOG_OVERHEAD + batch_length
        if size > n - pos:
            return  # truncated trailing batch
        magic = view[pos + OFF_MAGIC]
        if magic != MAGIC:
            raise corrupt(f"unsupported magic {magic} (expected 2)", index, pos)
        yield RecordBatch._at(view[pos : pos + size], pos, index)
        pos += size
        index += 1

