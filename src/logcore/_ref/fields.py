"""Pure-Python twin of logcore._fields: the RecordBatch v2 header layout.

Batch header, big-endian (Kafka's DefaultRecordBatch.java, KIP-98 for the producer
fields), 61 bytes, then the records:

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

Constants for those offsets and attribute bits, the header as one ``struct``, and the
Java long arithmetic every unit of the codec shares (the compiled side has them in
_consts.pxd and _fields.pxd). The codec's pure-Python units (record, reader, columns,
append, builder) favour plain, checkable code over speed: they are the test oracle for
the compiled units of the same names.
"""

from __future__ import annotations

import struct

from .varint import INT64_MIN

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

I64 = struct.Struct(">q")
I32 = struct.Struct(">i")
I16 = struct.Struct(">h")
U32 = struct.Struct(">I")

TIMESTAMP_TYPES = ("create", "log_append")
TIMESTAMP_TYPE_NAMES = {
    "create": 0,
    "log_append": 1,
    "CreateTime": 0,
    "LogAppendTime": 1,
    0: 0,
    1: 1,
}


def wrap64(n: int) -> int:
    """Two's-complement wrap to int64, as Java long arithmetic does."""
    return ((n - INT64_MIN) & 0xFFFFFFFFFFFFFFFF) + INT64_MIN

