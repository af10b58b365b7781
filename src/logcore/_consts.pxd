# Constants of the RecordBatch v2 format and of logcore's C code, as `cdef enum`
# (no DEF/IF: both are deprecated in Cython 3). Values from DefaultRecordBatch.java,
# DefaultRecord.java and Records.java in apache/kafka clients/.../common/record/.

# Byte offsets of the batch header fields (big-endian), 61 bytes in all:
#   base_offset i64 @0 | batch_length i32 @8 | partition_leader_epoch i32 @12 |
#   magic i8 @16 | crc u32 @17 | attributes i16 @21 | last_offset_delta i32 @23 |
#   base_timestamp i64 @27 | max_timestamp i64 @35 | producer_id i64 @43 |
#   producer_epoch i16 @51 | base_sequence i32 @53 | records_count i32 @57 | records @61
cdef enum:
    HDR_BASE_OFFSET = 0
    HDR_BATCH_LENGTH = 8
    HDR_PARTITION_LEADER_EPOCH = 12
    HDR_MAGIC = 16
    HDR_CRC = 17
    HDR_ATTRIBUTES = 21          # the CRC covers everything from here to the batch end
    HDR_LAST_OFFSET_DELTA = 23
    HDR_BASE_TIMESTAMP = 27
    HDR_MAX_TIMESTAMP = 35
    HDR_PRODUCER_ID = 43
    HDR_PRODUCER_EPOCH = 51
    HDR_BASE_SEQUENCE = 53
    HDR_RECORDS_COUNT = 57
    HDR_SIZE = 61                # RECORD_BATCH_OVERHEAD
    HDR_LOG_OVERHEAD = 12        # base_offset + batch_length: not counted in batch_length
    HDR_PROBE_SIZE = 17          # bytes needed to read batch_length and magic
    HDR_MIN_BATCH_LENGTH = 49    # HDR_SIZE - HDR_LOG_OVERHEAD
    MAGIC_V2 = 2

# Batch attribute bits (int16 at HDR_ATTRIBUTES).
cdef enum:
    ATTR_CODEC_MASK = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08   # 1 = LogAppendTime
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40   # KIP-534

# Compression codec ids (the low three attribute bits).
cdef enum:
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4
    CODEC_MAX = 4

# Record sizes. The smallest record is 7 bytes: length, attributes, timestamp delta,
# offset delta, key length, value length, header count, one byte each. Counts read from
# the wire are bounded by (bytes present) / RECORD_MIN_SIZE before anything is
# allocated from them.
cdef enum:
    RECORD_MIN_SIZE = 7
    RECORD_MIN_BODY = 6          # the same without the length varint
    VARINT32_MAX_BYTES = 5
    VARINT64_MAX_BYTES = 10
    # worst-case framing of one record without its key, value and headers:
    # length (5) + attributes (1) + timestamp delta (10) + offset delta (5) +
    # key length (5) + value length (5) + header count (5)
    RECORD_MAX_OVERHEAD = 36

# Status codes of the nogil decoders (0 = ok). The GIL-holding caller turns them into
# CorruptRecordError with a message (see _record.pyx, walk_error()).
cdef enum:
    ST_OK = 0
    ST_TRUNCATED = -1            # a field runs past the end of its bounds
    ST_VARINT_TOO_LONG = -2      # varint over 5 bytes, varlong over 10 bytes
    ST_VARINT_OVERFLOW = -3      # the last varint byte carries bits past 32/64
    ST_BAD_RECORD_LENGTH = -4    # record length < 6 (cannot hold its fields)
    ST_BAD_KEY_LENGTH = -5       # key length < -1
    ST_BAD_VALUE_LENGTH = -6     # value length < -1
    ST_BAD_HEADER_COUNT = -7     # header count < 0
    ST_BAD_HEADER_KEY_LENGTH = -8  # header key length < 0 (a header key cannot be null)
    ST_BAD_HEADER_VALUE_LENGTH = -9
    ST_RECORD_SIZE_MISMATCH = -10  # record does not end at its declared length
    ST_RECORD_PAST_END = -11     # record's declared length runs past the records section
    ST_TRAILING_BYTES = -12      # bytes left after records_count records
    ST_BAD_OFFSET_DELTA = -13    # offset delta != index (validate_for_append)
    ST_NO_MEMORY = -14
    ST_FIELD_PAST_RECORD = -15   # a field runs past the record's declared length
    ST_MISSING_RECORDS = -16     # the section ends before records_count records
    ST_BAD_RECORDS_COUNT = -17   # records_count < 0 (< 1 for a produced batch)
    ST_BAD_HEADER_KEY_UTF8 = -18 # a header key that is not UTF-8 (validate() only)
    # batch-level problems (validate_for_append's pass 1 runs without the GIL)
    ST_PARTIAL_HEADER = -20      # fewer than 61 bytes left for a batch header
    ST_BAD_BATCH_LENGTH = -21    # batch_length < 49
    ST_PARTIAL_BATCH = -22       # the batch runs past the end of the buffer
    ST_TOO_LARGE = -23           # 12 + batch_length > max_message_bytes
    ST_BAD_MAGIC = -24
    ST_CRC_MISMATCH = -25
    ST_UNKNOWN_CODEC = -26
    ST_BAD_LAST_OFFSET_DELTA = -27

# Thresholds for releasing the GIL (only around work that touches no Python object). Releasing and
# re-taking the GIL costs about 0.1-0.3 us uncontended and much more when another thread
# waits; CRC-32C runs at ~20 GB/s here, so below 32 KiB (~1.6 us of work) keeping the
# GIL is cheaper. Measured with benchmarks/micro/bench_crc32c.py (see RESULTS.md).
cdef enum:
    CRC32C_NOGIL_THRESHOLD = 32768
    WALK_NOGIL_THRESHOLD = 32768

# decode_columns keeps decompressed sections for its fill pass; at most this many bytes
# of them are kept before their records have been checked (see _columns.pyx).
cdef enum:
    COLUMNS_UNCHECKED_LIMIT = 67108864      # 64 MiB
