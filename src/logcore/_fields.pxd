# The RecordBatch v2 header read in place, for cimport by every codec unit (a .pxd-only
# unit: these inline helpers are compiled into each module that uses them, so reading a
# header field costs one load and a byte swap, never a call across modules).
#
# Batch header, big-endian (Kafka's DefaultRecordBatch.java; the offsets are HDR_* in
# _consts.pxd):
#
#   offset  field                   type
#   0       base_offset             int64
#   8       batch_length            int32   bytes after this field (>= 49)
#   12      partition_leader_epoch  int32   outside the CRC: the broker stamps it freely
#   16      magic                   int8    = 2
#   17      crc                     uint32  CRC-32C of bytes 21 .. end of batch
#   21      attributes              int16   bits 0-2 codec, 3 timestamp type (1 = Log-
#                                           AppendTime), 4 transactional, 5 control,
#                                           6 delete horizon (KIP-534)
#   23      last_offset_delta       int32
#   27      base_timestamp          int64
#   35      max_timestamp           int64
#   43      producer_id             int64
#   51      producer_epoch          int16
#   53      base_sequence           int32
#   57      records_count           int32
#   61      records                 (one compressed blob when the codec is not none)

from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t

from logcore._includes cimport lc_load_be16, lc_load_be32, lc_load_be64


cdef inline int64_t be_i64(const unsigned char *p) noexcept nogil:
    return <int64_t>lc_load_be64(p)


cdef inline int32_t be_i32(const unsigned char *p) noexcept nogil:
    return <int32_t>lc_load_be32(p)


cdef inline int16_t be_i16(const unsigned char *p) noexcept nogil:
    return <int16_t>lc_load_be16(p)


cdef inline int64_t wrap_add(int64_t a, int64_t b) noexcept nogil:
    # Java long arithmetic wraps; so does _ref (wrap64). Unsigned addition is the
    # defined-behaviour way to get the same bits in C.
    return <int64_t>(<uint64_t>a + <uint64_t>b)
