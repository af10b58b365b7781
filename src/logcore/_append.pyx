"""validate_for_append: the broker's check of a produced record set, and its stamps.

What it reads and writes in each batch (big-endian; the full header is in _fields.pxd,
Kafka's DefaultRecordBatch.java):

    offset  field                   checked                     rewritten
    0       base_offset             -                           next offset
    8       batch_length            >= 49, fits, <= max bytes   -
    12      partition_leader_epoch  -                           if given
    16      magic                   = 2                         -
    17      crc                     CRC-32C of 21 .. end        when 21 .. end changed
    21      attributes              codec id <= 4               LogAppendTime bit
    23      last_offset_delta       = records_count - 1         -
    35      max_timestamp           -                           LogAppendTime, or the
                                                                records' real maximum
    57      records_count           >= 1                        -
    61      records                 every record parses (_record.pxd), record i has
                                    offset_delta i, exactly records_count of them

base_offset and partition_leader_epoch lie outside the CRC, so stamping them costs no
CRC; attributes and max_timestamp are inside it. Nothing is written unless every batch
passed. The pure-Python twin is logcore._ref.append.

How this unit is fast: pass 1 (framing, CRC, record walk) and pass 2 (the rewrites)
touch no Python object for uncompressed batches and run without the GIL above
WALK_NOGIL_THRESHOLD bytes; compressed batches are decompressed (logcore._compression,
Python, bounded) and walked with the GIL in between.

Thread-safety: validate_for_append mutates its buffer and releases the GIL while it
checks and rewrites uncompressed batches: the caller must not touch the buffer meanwhile.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport (
    INT32_MAX, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t,
    uint64_t,
)
from libc.stdlib cimport free, realloc

from logcore._consts cimport *
from logcore._crc32c cimport crc32c_update
from logcore._fields cimport be_i16, be_i32, be_i64
from logcore._includes cimport (
    lc_crc32c_init, lc_load_be16, lc_load_be32, lc_store_be16, lc_store_be32, lc_store_be64,
    LOGCORE_DEBUG,
)
from logcore._record cimport WalkError, WalkStats, corrupt, records_walk, walk_error

from logcore import _compression
from logcore.errors import CorruptRecordError, RecordTooLargeError

lc_crc32c_init()

cdef str _CREATE = "create"
cdef str _LOG_APPEND = "log_append"


@cython.final
cdef class AppendInfo:
    """What validate_for_append found and assigned (read-only attributes).

    first_offset / last_offset: offsets assigned to the first and last record.
    record_count, batch_count, size_in_bytes: totals over the record set.
    max_timestamp, offset_of_max_timestamp (first record holding the max),
    min_timestamp: LogAppendTime sets all three from log_append_time_ms / first_offset.
    shallow_offset_of_max_timestamp: the last offset of the first batch holding the max
    (Kafka's shallowOffsetOfMaxTimestamp, what the time index stores; LogAppendTime: the
    first batch's last offset).
    producer_id, producer_epoch, first_sequence: of the first batch; last_sequence: of the
    last batch (base_sequence + last_offset_delta, wrapping past 2**31 - 1 to 0; -1 when
    base_sequence is -1). is_transactional, is_control: of the first batch.
    timestamp_type: "create" or "log_append", as written.
    """

    def __repr__(self):
        names = ("first_offset", "last_offset", "record_count", "max_timestamp",
                 "offset_of_max_timestamp", "shallow_offset_of_max_timestamp", "min_timestamp", "size_in_bytes", "batch_count",
                 "producer_id", "producer_epoch", "first_sequence", "last_sequence",
                 "is_transactional", "is_control", "timestamp_type")
        return "AppendInfo(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"


# Pass-1 facts about one batch of a produced record set.
cdef struct _AppendBatch:
    Py_ssize_t pos
    Py_ssize_t size
    int32_t count
    int64_t max_timestamp
    int32_t max_timestamp_index
    int64_t min_timestamp
    bint deferred                  # compressed: records walked afterwards, with the GIL


# Why pass 1 stopped.
cdef struct _AppendFail:
    int status
    Py_ssize_t index               # batch index
    Py_ssize_t pos                 # batch start
    int64_t a                      # status-specific values for the message
    int64_t b
    WalkError walk                 # for record-level failures
    const unsigned char *section


cdef int _append_pass1(const unsigned char *base, Py_ssize_t n, int64_t max_message_bytes,
                       _AppendBatch **out, Py_ssize_t *nout, _AppendFail *f) noexcept nogil:
    """Check every batch in the contract's order, without the GIL.

    Uncompressed batches are checked completely (CRC and record walk); compressed ones up
    to their CRC, codec and counts, then marked `deferred` for the caller to decompress.
    Stops at the first failure (f filled). The batch array grows by doubling.
    """
    cdef Py_ssize_t pos = 0, size, cap = 0, index = 0
    cdef const unsigned char *p
    cdef int32_t batch_length, count, last_delta
    cdef int16_t attrs
    cdef int codec, st
    cdef uint32_t stored, actual
    cdef _AppendBatch *arr = NULL
    cdef _AppendBatch *grown
    cdef _AppendBatch *ab
    cdef WalkStats stats
    f.status = ST_OK
    # The order of the checks is the contract's (and _ref's), so that the same bad input
    # gives the same error from both implementations: framing, size limit, magic, CRC,
    # codec, counts, records.
    while pos < n:
        f.index = index
        f.pos = pos
        p = base + pos
        if n - pos < HDR_SIZE:
            f.status = ST_PARTIAL_HEADER
            f.a = n - pos
            break
        batch_length = be_i32(p + HDR_BATCH_LENGTH)
        if batch_length < HDR_MIN_BATCH_LENGTH:
            f.status = ST_BAD_BATCH_LENGTH
            f.a = batch_length
            break
        size = HDR_LOG_OVERHEAD + <Py_ssize_t>batch_length
        if size > n - pos:
            f.status = ST_PARTIAL_BATCH
            f.a = size
            f.b = n - pos
            break
        if size > max_message_bytes:
            f.status = ST_TOO_LARGE
            f.a = size
            break
        if p[HDR_MAGIC] != MAGIC_V2:
            f.status = ST_BAD_MAGIC
            f.a = <int8_t>p[HDR_MAGIC]
            break
        # The CRC first, before any record is parsed: a produce request that was damaged
        # in flight is refused as corrupt rather than as whatever garbage it parses to.
        stored = lc_load_be32(p + HDR_CRC)
        actual = crc32c_update(0, p + HDR_ATTRIBUTES, <size_t>(size - HDR_ATTRIBUTES))
        if stored != actual:
            f.status = ST_CRC_MISMATCH
            f.a = stored
            f.b = actual
            break
        attrs = be_i16(p + HDR_ATTRIBUTES)
        codec = attrs & ATTR_CODEC_MASK
        if codec > CODEC_MAX:
            f.status = ST_UNKNOWN_CODEC
            f.a = codec
            break
        count = be_i32(p + HDR_RECORDS_COUNT)
        if count < 1:
            f.status = ST_BAD_RECORDS_COUNT
            f.a = count
            break
        last_delta = be_i32(p + HDR_LAST_OFFSET_DELTA)
        if last_delta != count - 1:
            f.status = ST_BAD_LAST_OFFSET_DELTA
            f.a = last_delta
            f.b = count
            break
        if index == cap:
            cap = cap * 2 if cap else 8
            grown = <_AppendBatch *>realloc(arr, <size_t>cap * sizeof(_AppendBatch))
            if grown == NULL:
                f.status = ST_NO_MEMORY
                break
            arr = grown
        ab = &arr[index]
        ab.pos = pos
        ab.size = size
        ab.count = count
        # Decompression is Python (logcore._compression) and needs the GIL: compressed
        # batches are only marked here and walked by the caller, in batch order.
        ab.deferred = codec != CODEC_NONE
        if not ab.deferred:
            st = records_walk(p + HDR_SIZE, p + size, count, be_i64(p + HDR_BASE_TIMESTAMP),
                              be_i64(p + HDR_MAX_TIMESTAMP),
                              (attrs & ATTR_TIMESTAMP_TYPE) != 0, True, False, &stats,
                              &f.walk)
            if st != ST_OK:
                f.status = st
                f.section = p + HDR_SIZE
                break
            ab.max_timestamp = stats.max_timestamp
            ab.max_timestamp_index = stats.max_timestamp_index
            ab.min_timestamp = stats.min_timestamp
        pos += size
        index += 1
    out[0] = arr
    nout[0] = index
    return f.status


cdef object _append_error(const _AppendFail *f):
    cdef int st = f.status
    if st == ST_PARTIAL_HEADER:
        return corrupt(f"partial batch: {f.a} bytes, a batch header needs {HDR_SIZE}",
                        f.index, f.pos)
    if st == ST_BAD_BATCH_LENGTH:
        return corrupt(f"batch_length {f.a} is below the minimum {HDR_MIN_BATCH_LENGTH}",
                        f.index, f.pos)
    if st == ST_PARTIAL_BATCH:
        return corrupt(f"partial batch: declares {f.a} bytes, only {f.b} present",
                        f.index, f.pos)
    if st == ST_BAD_MAGIC:
        return corrupt(f"unsupported magic {f.a} (expected 2)", f.index, f.pos)
    if st == ST_CRC_MISMATCH:
        return corrupt(f"CRC mismatch: stored 0x{f.a:08x}, computed 0x{f.b:08x}",
                        f.index, f.pos)
    if st == ST_UNKNOWN_CODEC:
        return corrupt(f"unknown compression codec id {f.a}", f.index, f.pos)
    if st == ST_BAD_RECORDS_COUNT:
        return corrupt(f"records_count {f.a}: a produced batch needs at least one record",
                        f.index, f.pos)
    if st == ST_BAD_LAST_OFFSET_DELTA:
        return corrupt(f"last_offset_delta {f.a} does not match records_count {f.b}",
                        f.index, f.pos)
    if st == ST_NO_MEMORY:
        return MemoryError()
    return walk_error(&f.walk, f.index, f.pos, f.section, f.pos + HDR_SIZE,
                       be_i32(f.section - HDR_SIZE + HDR_RECORDS_COUNT))


cdef int _append_deferred(const unsigned char[::1] view, _AppendBatch *ab,
                          Py_ssize_t index) except -1:
    """Decompress a compressed batch and walk its records (with the GIL)."""
    cdef const unsigned char *p = &view[0] + ab.pos
    cdef WalkStats stats
    cdef WalkError e
    cdef int16_t attrs = be_i16(p + HDR_ATTRIBUTES)
    cdef const unsigned char *sec
    cdef Py_ssize_t sec_len
    try:
        data = _compression.decompress(attrs & ATTR_CODEC_MASK,
                                       view[ab.pos + HDR_SIZE:ab.pos + ab.size],
                                       limit=_compression.append_limit(ab.size))
    except CorruptRecordError as exc:
        raise corrupt(str(exc), index, ab.pos + HDR_SIZE) from None
    sec = <const unsigned char *>PyBytes_AS_STRING(data)
    sec_len = PyBytes_GET_SIZE(data)
    if records_walk(sec, sec + sec_len, ab.count, be_i64(p + HDR_BASE_TIMESTAMP),
                    be_i64(p + HDR_MAX_TIMESTAMP), (attrs & ATTR_TIMESTAMP_TYPE) != 0, True, False,
                    &stats, &e) != ST_OK:
        raise walk_error(&e, index, ab.pos, sec, -1, ab.count)
    ab.max_timestamp = stats.max_timestamp
    ab.max_timestamp_index = stats.max_timestamp_index
    ab.min_timestamp = stats.min_timestamp
    ab.deferred = False
    return 0


cdef void _append_pass2(unsigned char *base, _AppendBatch *arr, Py_ssize_t nb,
                        int64_t next_offset, bint stamp_epoch, int32_t epoch,
                        bint log_append_time, int64_t log_append_time_ms) noexcept nogil:
    """Rewrite headers in place: base_offset, leader epoch, LogAppendTime / max_timestamp
    (with the CRC recomputed whenever a CRC-covered field changed)."""
    cdef Py_ssize_t b
    cdef unsigned char *p
    cdef int64_t offset = next_offset
    cdef bint crc_dirty
    # base_offset and partition_leader_epoch lie outside the CRC (bytes 0..15; the CRC
    # covers 21..end, DefaultRecordBatch.java): stamping them costs no CRC. Attributes
    # and max_timestamp are inside it, so changing them means a new CRC.
    for b in range(nb):
        p = base + arr[b].pos
        lc_store_be64(p + HDR_BASE_OFFSET, <uint64_t>offset)
        if stamp_epoch:
            lc_store_be32(p + HDR_PARTITION_LEADER_EPOCH, <uint32_t>epoch)
        crc_dirty = False
        if log_append_time:
            lc_store_be16(p + HDR_ATTRIBUTES,
                          <uint16_t>(lc_load_be16(p + HDR_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE))
            lc_store_be64(p + HDR_MAX_TIMESTAMP, <uint64_t>log_append_time_ms)
            crc_dirty = True
        elif be_i64(p + HDR_MAX_TIMESTAMP) != arr[b].max_timestamp:
            # Kafka fixes a CreateTime batch whose header max_timestamp disagrees with
            # its records (LogValidator); the CRC covers the field.
            lc_store_be64(p + HDR_MAX_TIMESTAMP, <uint64_t>arr[b].max_timestamp)
            crc_dirty = True
        if crc_dirty:
            lc_store_be32(p + HDR_CRC, crc32c_update(
                0, p + HDR_ATTRIBUTES, <size_t>(arr[b].size - HDR_ATTRIBUTES)))
        offset += arr[b].count


cdef inline int32_t _last_sequence(int32_t base_sequence, int32_t delta) noexcept nogil:
    # DefaultRecordBatch.incrementSequence: sequences wrap from Integer.MAX_VALUE to 0.
    if base_sequence == -1:
        return -1
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def validate_for_append(buffer, *, next_offset, max_message_bytes,
                        log_append_time_ms=None, partition_leader_epoch=None):
    """Validate a produced record set and assign offsets in place (the broker's append).

    Pass 1 checks every batch in this order: header present and batch fits; size against
    max_message_bytes; magic; CRC; codec; records_count >= 1 and last_offset_delta ==
    records_count - 1; every record parsed (compressed batches decompressed) with
    offset_delta == its index and exactly records_count records; no trailing bytes.
    Pass 2 rewrites base_offset, the leader epoch, and the LogAppendTime / max_timestamp
    fields with their CRC. Nothing is written unless every batch passed. Both passes run
    without the GIL for uncompressed batches (they touch no Python object).

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
    cdef unsigned char[::1] view
    cdef const unsigned char[::1] cview
    cdef Py_ssize_t n, nb = 0, i
    cdef unsigned char *base
    cdef _AppendBatch *arr = NULL
    cdef _AppendFail f
    cdef int64_t c_next, c_lat = 0, max_ts, off_of_max, shallow_of_max, min_ts, offset
    cdef int64_t total = 0
    cdef int32_t c_epoch = 0
    cdef int64_t c_max_bytes
    cdef bint stamp_epoch = partition_leader_epoch is not None
    cdef bint lat = log_append_time_ms is not None
    cdef int st
    cdef AppendInfo info
    cdef const unsigned char *first
    cdef const unsigned char *last
    # A writable typed memoryview is both the type check and the export that pins the
    # buffer (a bytearray cannot be resized, an mmap cannot be closed) while the GIL is
    # released below.
    try:
        view = buffer
    except (BufferError, ValueError) as exc:
        # Cython reports a read-only buffer as "buffer source array is read-only"
        raise TypeError(
            "validate_for_append needs a writable buffer (bytearray, mmap, ...): "
            f"{exc}") from None
    if not 0 <= next_offset <= INT64_MAX:
        raise ValueError(f"next_offset {next_offset} is outside [0, 2**63 - 1]")
    if lat and not INT64_MIN <= log_append_time_ms <= INT64_MAX:
        raise ValueError(f"log_append_time_ms {log_append_time_ms} is outside int64")
    if stamp_epoch and not -(1 << 31) <= partition_leader_epoch <= INT32_MAX:
        raise ValueError(f"partition_leader_epoch {partition_leader_epoch} is outside int32")
    c_next = next_offset
    if lat:
        c_lat = log_append_time_ms
    if stamp_epoch:
        c_epoch = partition_leader_epoch
    # A limit beyond int64 cannot be exceeded by any batch.
    c_max_bytes = max_message_bytes if max_message_bytes <= INT64_MAX else INT64_MAX
    n = view.shape[0]
    if n == 0:
        raise CorruptRecordError("empty record set", batch_index=0, position=0)
    base = &view[0]
    cview = view
    try:
        # Pass 1. Validation of a big uncompressed produce request is all CRC and varint
        # parsing: release the GIL for it.
        if n >= WALK_NOGIL_THRESHOLD:
            with nogil:
                st = _append_pass1(base, n, c_max_bytes, &arr, &nb, &f)
        else:
            st = _append_pass1(base, n, c_max_bytes, &arr, &nb, &f)
        # Compressed batches before the failure point (or all, if none) are walked now,
        # in order, so that the first bad batch is the one reported.
        for i in range(nb):
            if arr[i].deferred:
                _append_deferred(cview, &arr[i], i)
        if st != ST_OK:
            if st == ST_TOO_LARGE:
                raise RecordTooLargeError(
                    f"batch {f.index} at byte {f.pos}: {f.a} bytes exceeds max_message_bytes "
                    f"{max_message_bytes}",
                    batch_index=f.index, position=f.pos, size=f.a, limit=max_message_bytes)
            raise _append_error(&f)
        for i in range(nb):
            total += arr[i].count
        if c_next > INT64_MAX - (total - 1):
            raise ValueError(f"offsets from {next_offset} for {total} records overflow int64")

        # Pass 2: rewrite headers in place (CRC recomputed where needed).
        if n >= WALK_NOGIL_THRESHOLD:
            with nogil:
                _append_pass2(base, arr, nb, c_next, stamp_epoch, c_epoch, lat, c_lat)
        else:
            _append_pass2(base, arr, nb, c_next, stamp_epoch, c_epoch, lat, c_lat)

        # Totals for the log: the max timestamp and the last offset of the first batch
        # that holds it feed the time index (LogSegment.append's
        # shallowOffsetOfMaxTimestamp); the offset of the first record holding it is
        # reported too. The sequences feed producer state (ProducerStateManager).
        if LOGCORE_DEBUG:
            for i in range(nb):
                if lc_load_be32(base + arr[i].pos + HDR_CRC) != crc32c_update(
                        0, base + arr[i].pos + HDR_ATTRIBUTES,
                        <size_t>(arr[i].size - HDR_ATTRIBUTES)):
                    raise AssertionError(f"validate_for_append left batch {i} with a bad CRC")
        offset = c_next
        max_ts = arr[0].max_timestamp
        off_of_max = c_next + arr[0].max_timestamp_index
        shallow_of_max = c_next + arr[0].count - 1
        min_ts = arr[0].min_timestamp
        for i in range(nb):
            if arr[i].max_timestamp > max_ts:
                max_ts = arr[i].max_timestamp
                off_of_max = offset + arr[i].max_timestamp_index
                shallow_of_max = offset + arr[i].count - 1
            if arr[i].min_timestamp < min_ts:
                min_ts = arr[i].min_timestamp
            offset += arr[i].count
        first = base + arr[0].pos
        last = base + arr[nb - 1].pos
        info = AppendInfo.__new__(AppendInfo)
        info.first_offset = c_next
        info.last_offset = c_next + total - 1
        info.record_count = total
        if lat:
            info.max_timestamp = c_lat
            info.min_timestamp = c_lat
            info.offset_of_max_timestamp = c_next
            # Every batch holds the stamped time: the first one is the batch of the max.
            info.shallow_offset_of_max_timestamp = c_next + arr[0].count - 1
            info.timestamp_type = _LOG_APPEND
        else:
            info.max_timestamp = max_ts
            info.min_timestamp = min_ts
            info.offset_of_max_timestamp = off_of_max
            info.shallow_offset_of_max_timestamp = shallow_of_max
            info.timestamp_type = (_LOG_APPEND if be_i16(first + HDR_ATTRIBUTES)
                                   & ATTR_TIMESTAMP_TYPE else _CREATE)
        info.size_in_bytes = n
        info.batch_count = nb
        info.producer_id = be_i64(first + HDR_PRODUCER_ID)
        info.producer_epoch = be_i16(first + HDR_PRODUCER_EPOCH)
        info.first_sequence = be_i32(first + HDR_BASE_SEQUENCE)
        info.last_sequence = _last_sequence(be_i32(last + HDR_BASE_SEQUENCE),
                                            be_i32(last + HDR_LAST_OFFSET_DELTA))
        info.is_transactional = (be_i16(first + HDR_ATTRIBUTES) & ATTR_TRANSACTIONAL) != 0
        info.is_control = (be_i16(first + HDR_ATTRIBUTES) & ATTR_CONTROL) != 0
        return info
    finally:
        free(arr)
