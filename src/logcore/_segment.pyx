# Batch-header scans over segment files (compiled; twin: logcore/_ref/segment.py).
#
# The only places the storage layer looks inside a .log file. They read just the header
# fields they need (RecordBatch v2, big-endian; Kafka's DefaultRecordBatch.java):
#
#   0 base_offset int64 | 8 batch_length int32 | 12 partition_leader_epoch int32 |
#   16 magic int8 | 17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 |
#   23 last_offset_delta int32 | 27 base_timestamp int64 | 35 max_timestamp int64 | ...
#
# A batch occupies 12 + batch_length bytes; batch_length >= 49 (the 61-byte header).
#
# - search_for_offset: Kafka's FileRecords.searchForOffsetWithSize: from a batch boundary
#   (an offset-index entry) walk headers to the first batch whose last offset >= target.
# - scan_region: extend a read over whole batches within max_bytes, below max_offset.
# - txn_batches: the transactional and control batches of a region (base, last, producer
#   id, is_control): what a share group's read must leave out (markers, aborted data).
# - recover_scan: LogSegment.recover: check each batch (length bounds, magic, CRC,
#   increasing offsets within the segment's int32 range), rebuild the indexes, report
#   where the valid prefix ends.
#
# The header walks use pread(2) into a small stack buffer, never mmap: a replica truncation
# of a mapped file under a reader would be SIGBUS, a short pread is just the end. They
# hold the GIL: each pread is a few hundred nanoseconds, less than a GIL round trip.
# recover_scan works on a mapping of a file nobody else uses yet (the log is opening) and
# releases the GIL around the CRC of batches of RECOVER_NOGIL_BYTES or more.

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from posix.unistd cimport pread

from logcore._includes cimport lc_crc32c, lc_crc32c_init, lc_load_be32, lc_load_be64
from logcore._consts cimport ATTR_CONTROL, ATTR_TRANSACTIONAL
from logcore._index cimport OffsetIndex, TimeIndex

from logcore.errors import CorruptRecordError

lc_crc32c_init()

cdef enum:
    SEG_HEADER = 61
    SEG_MIN_BATCH_LENGTH = 49
    SEG_LOG_OVERHEAD = 12
    SEG_PEEK = 27          # bytes of header a walk needs (through last_offset_delta)
    SEG_CHUNK = 4096       # largest pread of a header walk
    # First pread of a walk: most walks start at an index entry right at (or one batch
    # before) the batch they want, and copying 4 KiB of cold page cache costs more than
    # the syscall; later preads double up to SEG_CHUNK for walks over many small batches.
    SEG_FIRST_CHUNK = 256
    # CRC of a batch at least this big runs without the GIL (a GIL round trip costs about
    # as much as the CRC of 4 KiB with SSE4.2; 16 KiB leaves a clear margin).
    RECOVER_NOGIL_BYTES = 16384

cdef int64_t I32_MAX = 2147483647


cdef struct _Walker:
    int fd
    Py_ssize_t chunk
    int64_t end
    int64_t buf_pos
    Py_ssize_t buf_len
    unsigned char buf[SEG_CHUNK]


cdef inline void _walker_init(_Walker *w, int fd, int64_t end) noexcept:
    w.fd = fd
    w.end = end
    w.buf_pos = -1
    w.buf_len = 0
    w.chunk = SEG_FIRST_CHUNK


cdef const unsigned char *_peek(_Walker *w, int64_t pos, Py_ssize_t need) except? NULL:
    """The first ``need`` bytes of the batch at pos inside the walker's buffer (reading a
    chunk there when they are not, chunks doubling up to SEG_CHUNK), or NULL if they do
    not lie wholly before end. Raises CorruptRecordError on a bad length or magic."""
    cdef int64_t rel = pos - w.buf_pos
    cdef Py_ssize_t want, got
    cdef int32_t length
    cdef const unsigned char *p
    if pos + need > w.end:
        return NULL
    if rel < 0 or rel + need > w.buf_len:
        want = w.chunk if w.end - pos > w.chunk else <Py_ssize_t>(w.end - pos)
        if w.chunk < SEG_CHUNK:
            w.chunk *= 2
        got = pread(w.fd, w.buf, <size_t>want, pos)
        if got < 0:
            raise OSError(f"pread failed at position {pos}")
        w.buf_pos = pos
        w.buf_len = got
        rel = 0
        if got < need:
            return NULL
    p = w.buf + rel
    length = <int32_t>lc_load_be32(p + 8)
    if length < SEG_MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} has batch_length {length} < {SEG_MIN_BATCH_LENGTH}",
            position=pos)
    if p[16] != 2:
        raise CorruptRecordError(f"batch at position {pos} has magic {<int>p[16]}", position=pos)
    return p


cdef int _header(_Walker *w, int64_t pos, int64_t *base, int64_t *size, int64_t *last) except -1:
    """Fill base/size/last of the batch at pos: 1 on success, 0 if no whole header lies
    before end. Raises CorruptRecordError on a bad length or magic."""
    cdef const unsigned char *p = _peek(w, pos, SEG_PEEK)
    if p == NULL:
        return 0
    base[0] = <int64_t>lc_load_be64(p)
    size[0] = SEG_LOG_OVERHEAD + <int64_t><int32_t>lc_load_be32(p + 8)
    last[0] = base[0] + <int32_t>lc_load_be32(p + 23)
    return 1


cdef inline const unsigned char *_full_header(_Walker *w, int64_t pos) except? NULL:
    """The whole 61-byte header of the batch at pos (see _peek), or NULL."""
    return _peek(w, pos, SEG_HEADER)


def txn_batches(int fd, int64_t start, int64_t end):
    """The transactional and control batches among the whole batches in [start, end).

    Args:
        fd: the ``.log`` file; start: a batch boundary; end: the end of the region.

    Returns:
        [(base_offset, last_offset, producer_id, is_control)] of each batch whose
        attributes have the transactional (0x10) or control (0x20) bit, in file order.

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    cdef _Walker w
    cdef int64_t pos = start, base, size
    cdef const unsigned char *p
    cdef unsigned int attributes
    cdef list out = []
    _walker_init(&w, fd, end)
    while True:
        p = _full_header(&w, pos)
        if p == NULL:
            break
        size = SEG_LOG_OVERHEAD + <int32_t>lc_load_be32(p + 8)
        if pos + size > end:
            break
        if size > SEG_CHUNK:
            # The next header is beyond this buffer whatever its size: read a small chunk
            # there instead of copying 4 KiB of record bytes for 61 of header.
            w.chunk = SEG_FIRST_CHUNK
        attributes = (<unsigned int>p[21] << 8) | p[22]
        if attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
            base = <int64_t>lc_load_be64(p)
            out.append((base, base + <int32_t>lc_load_be32(p + 23),
                        <int64_t>lc_load_be64(p + 43), bool(attributes & ATTR_CONTROL)))
        pos += size
    return out


def batch_bounds(int fd, int64_t start, int64_t end):
    """The (base_offset, last_offset) of every whole batch in [start, end).

    Args:
        fd: the ``.log`` file; start: a batch boundary; end: the end of the region.

    Returns:
        [(base_offset, last_offset)] in file order (a share fetch's batch boundaries).

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    cdef _Walker w
    cdef int64_t pos = start, base, size, last
    cdef list out = []
    _walker_init(&w, fd, end)
    while _header(&w, pos, &base, &size, &last):
        if pos + size > end:
            break
        if size > SEG_CHUNK:
            w.chunk = SEG_FIRST_CHUNK  # the next header is beyond this buffer anyway
        out.append((base, last))
        pos += size
    return out


def search_for_offset(int fd, int64_t start, int64_t end, int64_t target):
    """First batch in [start, end) whose last offset >= target.

    Args:
        fd: the ``.log`` file; start: a batch boundary; end: the segment's size.

    Returns:
        (position, size, base_offset, last_offset) or None if no whole batch qualifies.

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    cdef _Walker w
    cdef int64_t pos = start, base, size, last
    _walker_init(&w, fd, end)
    while True:
        if not _header(&w, pos, &base, &size, &last):
            return None
        if pos + size > end:
            return None
        if last >= target:
            return pos, size, base, last
        pos += size


def scan_region(int fd, int64_t start, int64_t end, int64_t max_bytes, int64_t max_offset,
                bint min_one_batch, int64_t walk_from=-1):
    """Extent of a read that starts at the batch boundary ``start``.

    Takes whole batches while the total stays <= max_bytes and each batch's last offset
    is < max_offset; with min_one_batch the first batch is taken even when it alone
    exceeds max_bytes. walk_from (a batch boundary from OffsetIndex.walk_start) lets the
    walk skip batches already known to qualify.

    Returns:
        (size, last_offset); last_offset is -1 when size is 0.
    """
    cdef _Walker w
    cdef int64_t pos = walk_from if walk_from > start else start
    cdef int64_t base, size, last, last_offset = -1
    _walker_init(&w, fd, end)
    while True:
        if not _header(&w, pos, &base, &size, &last):
            break
        if pos + size > end or last >= max_offset:
            break
        if pos + size - start > max_bytes and not (min_one_batch and pos == start):
            break
        last_offset = last
        pos += size
    if pos > start and last_offset < 0:
        raise CorruptRecordError(f"walk from position {walk_from} (an index entry) skipped past the region that starts at {start}", position=walk_from)
    return pos - start, last_offset


def locate(int fd, int64_t end, OffsetIndex index, int64_t target, int64_t max_bytes,
           int64_t max_offset, bint min_one_batch, bint use_index=True):
    """The whole read path of one segment in one call (Log.read's hot path).

    Offset-index lookup for ``target``, header walk to the first batch whose last offset
    >= target, then the region's extent (whole batches within ``max_bytes``, each below
    the exclusive ``max_offset``, at least one with ``min_one_batch``) using
    ``index.walk_start`` to skip batches known to qualify. One ``pread`` serves both walks
    when they fall in the same 4 KiB.

    Args:
        use_index: False walks from position 0 (the fallback when an index entry turns out
            not to point at a batch).

    Returns:
        None if no batch in the segment reaches ``target``; else (position, size,
        first_base_offset, last_offset): size 0 (last_offset = -1) when the first batch
        is already at or past ``max_offset``, or does not fit and min_one_batch is off.

    Raises:
        CorruptRecordError: a header with a bad length or magic (position set).
    """
    cdef _Walker w
    cdef int64_t pos = 0, base, size, last, first_base, walk, start, last_offset = -1
    cdef Py_ssize_t slot
    cdef int64_t rel
    _walker_init(&w, fd, end)
    if use_index:
        rel = target - index.base_offset
        if rel > I32_MAX:
            rel = I32_MAX
        if rel >= 0:
            slot = index._search(rel)
            if slot >= 0:
                pos = index._pos(slot)
    # 1. the batch holding target
    while True:
        if not _header(&w, pos, &base, &size, &last):
            return None
        if pos + size > end:
            return None
        if last >= target:
            break
        pos += size
    start = pos
    first_base = base
    if last >= max_offset or (size > max_bytes and not min_one_batch):
        return start, 0, first_base, -1
    # 2. the extent: the first batch is in; skip ahead with the index, then walk
    last_offset = last
    pos += size
    if pos - start + SEG_MIN_BATCH_LENGTH + SEG_LOG_OVERHEAD > max_bytes:
        return start, pos - start, first_base, last_offset
    walk = index.walk_start(start + max_bytes, max_offset) if use_index else 0
    if walk > pos:
        pos = walk
        last_offset = -2  # set by the walk (it always takes the batch at walk)
    while True:
        if not _header(&w, pos, &base, &size, &last):
            break
        if pos + size > end or last >= max_offset or pos + size - start > max_bytes:
            break
        last_offset = last
        pos += size
    if last_offset == -2:
        raise CorruptRecordError(
            f"walk from position {walk} (an index entry) skipped past the region that starts "
            f"at {start}", position=walk)
    return start, pos - start, first_base, last_offset


def recover_scan(const unsigned char[::1] buf, Py_ssize_t end, int64_t base_offset,
                 int64_t index_interval_bytes, offset_index, time_index, crc32c=None):
    """Validate batches from position 0 of buf and rebuild both (empty) indexes.

    Args:
        buf: the segment bytes (a read-only mmap); end: how many bytes to scan.
        base_offset: the segment's base offset; every batch must lie in
            [base_offset, base_offset + 2**31 - 1] with offsets increasing.
        index_interval_bytes: index cadence (as on append).
        offset_index, time_index: truncated indexes to append to.
        crc32c: unused here (the compiled scan calls the C CRC directly); kept so that
            both implementations share one signature.

    Returns:
        (valid_bytes, batch_count, next_offset, max_timestamp,
        shallow_offset_of_max_timestamp, error): the shallow offset is the last offset of the
        first batch holding max_timestamp (what the time index entries name, as Kafka's
        LogSegment.recover); error says why the scan stopped before end (None if it did not).
    """
    cdef OffsetIndex oi = <OffsetIndex?>offset_index
    cdef TimeIndex ti = <TimeIndex?>time_index
    cdef const unsigned char *data = &buf[0] if buf.shape[0] > 0 else NULL
    cdef Py_ssize_t pos = 0, count = 0
    cdef int64_t next_offset = base_offset, max_ts = -1, off_max = base_offset
    cdef int64_t since_index = 0, base, last, max_t, size
    cdef int32_t length, lod
    cdef uint32_t stored, actual
    cdef const unsigned char *p
    error = None
    if end > buf.shape[0]:
        raise ValueError(f"end {end} is past the buffer ({buf.shape[0]} bytes)")
    while pos < end:
        p = data + pos
        if end - pos < SEG_HEADER:
            error = f"truncated batch header at position {pos} ({end - pos} bytes left)"
            break
        base = <int64_t>lc_load_be64(p)
        length = <int32_t>lc_load_be32(p + 8)
        if length < SEG_MIN_BATCH_LENGTH:
            error = f"batch_length {length} < {SEG_MIN_BATCH_LENGTH} at position {pos}"
            break
        size = SEG_LOG_OVERHEAD + <int64_t>length
        if size > end - pos:
            error = f"batch at position {pos} declares {size} bytes, {end - pos} left"
            break
        if p[16] != 2:
            error = f"magic {<int>p[16]} at position {pos}"
            break
        stored = lc_load_be32(p + 17)
        if size >= RECOVER_NOGIL_BYTES:
            with nogil:
                actual = lc_crc32c(0, p + 21, <size_t>(size - 21))
        else:
            actual = lc_crc32c(0, p + 21, <size_t>(size - 21))
        if actual != stored:
            error = (f"CRC mismatch at position {pos}: stored {stored:#010x}, "
                     f"computed {actual:#010x}")
            break
        lod = <int32_t>lc_load_be32(p + 23)
        last = base + lod
        if lod < 0 or base < next_offset or last - base_offset > I32_MAX:
            error = (f"batch at position {pos} has offsets [{base}, {last}], expected them "
                     f"increasing from {next_offset} and within 2**31-1 of {base_offset}")
            break
        max_t = <int64_t>lc_load_be64(p + 35)
        if max_t > max_ts:
            max_ts = max_t
            off_max = last
        if since_index > index_interval_bytes:
            if oi._entries < oi._max_entries:
                oi.c_append(last, pos)
            if ti._entries + 1 < ti._max_entries:
                ti.c_append(max_ts, off_max, False)
            since_index = 0
        since_index += size
        next_offset = last + 1
        pos += size
        count += 1
    return pos, count, next_offset, max_ts, off_max, error
