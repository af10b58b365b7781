"""logcore.validate_for_append: the broker's produce path.

Every error case checks that the buffer is left byte-for-byte untouched and that the
error names the batch index and byte position, in its attributes and its message.
"""

from __future__ import annotations

import mmap
import re
import struct

import crc32c as crc32c_pkg
import pytest

import logcore

HEADER = struct.Struct(">qiibIhiqqqhii")
MAX = 1 << 20


def build(n=3, *, ts=None, headers=None, **kw) -> bytes:
    b = logcore.BatchBuilder(**kw)
    for i in range(n):
        b.append(
            b"value-%d" % i,
            key=b"key-%d" % i,
            timestamp_ms=1000 + i if ts is None else ts[i],
            headers=headers,
        )
    return b.build()


def fields(buf, pos=0) -> dict:
    names = (
        "base_offset batch_length leader_epoch magic crc attributes last_offset_delta "
        "base_timestamp max_timestamp producer_id producer_epoch base_sequence records_count"
    ).split()
    return dict(zip(names, HEADER.unpack_from(bytes(buf), pos), strict=True))


def crc_ok(buf, pos=0) -> bool:
    f = fields(buf, pos)
    end = pos + 12 + f["batch_length"]
    return f["crc"] == crc32c_pkg.crc32c(bytes(buf[pos + 21 : end]))


def fix_crc(buf: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(
        ">I", buf, pos + 17, crc32c_pkg.crc32c(bytes(buf[pos + 21 : pos + 12 + length]))
    )


# --------------------------------------------------------------------------- success


def test_single_batch_offsets_and_info() -> None:
    original = build(3, producer_id=42, producer_epoch=7, base_sequence=10)
    buf = bytearray(original)
    info = logcore.validate_for_append(buf, next_offset=100, max_message_bytes=MAX)
    f = fields(buf)
    assert f["base_offset"] == 100
    assert crc_ok(buf)  # base_offset is outside the CRC
    assert buf[12:] == original[12:]  # nothing else changed (max_timestamp was right)
    assert info.first_offset == 100
    assert info.last_offset == 102
    assert info.record_count == 3
    assert info.batch_count == 1
    assert info.size_in_bytes == len(buf)
    assert info.max_timestamp == 1002
    assert info.offset_of_max_timestamp == 102
    assert info.shallow_offset_of_max_timestamp == 102
    assert info.min_timestamp == 1000
    assert info.producer_id == 42
    assert info.producer_epoch == 7
    assert info.first_sequence == 10
    assert info.last_sequence == 12
    assert info.is_transactional is False
    assert info.is_control is False
    assert info.timestamp_type == "create"
    assert [r.offset for r in logcore.RecordBatch(buf)] == [100, 101, 102]


def test_append_info_is_read_only() -> None:
    info = logcore.validate_for_append(bytearray(build(1)), next_offset=0, max_message_bytes=MAX)
    with pytest.raises(AttributeError):
        info.first_offset = 5


def test_several_batches_get_consecutive_offsets() -> None:
    parts = [build(2), build(5, compression="zstd"), build(1, compression="gzip")]
    buf = bytearray(b"".join(parts))
    info = logcore.validate_for_append(buf, next_offset=7, max_message_bytes=MAX)
    batches = list(logcore.iter_batches(buf))
    assert [b.base_offset for b in batches] == [7, 9, 14]
    assert all(b.is_valid() for b in batches)
    assert [r.offset for b in batches for r in b] == list(range(7, 15))
    assert (info.first_offset, info.last_offset, info.record_count, info.batch_count) == (
        7,
        14,
        8,
        3,
    )
    assert info.size_in_bytes == len(buf)


def test_leader_epoch_stamped_only_when_given() -> None:
    buf = bytearray(build(2))
    logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert fields(buf)["leader_epoch"] == -1
    logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX, partition_leader_epoch=9)
    assert fields(buf)["leader_epoch"] == 9
    assert crc_ok(buf)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_log_append_time(codec) -> None:
    original = build(4, ts=[50, 10, 70, 70], compression=codec)
    buf = bytearray(original)
    info = logcore.validate_for_append(
        buf, next_offset=20, max_message_bytes=MAX, log_append_time_ms=123456
    )
    f = fields(buf)
    assert f["attributes"] & 0x08
    assert f["max_timestamp"] == 123456
    assert f["base_timestamp"] == 50  # untouched
    assert crc_ok(buf)
    batch = logcore.RecordBatch(buf)
    batch.validate()
    assert batch.timestamp_type == "log_append"
    assert [(r.offset, r.timestamp) for r in batch] == [(20 + i, 123456) for i in range(4)]
    assert info.max_timestamp == 123456
    assert info.min_timestamp == 123456
    assert info.offset_of_max_timestamp == 20
    assert info.shallow_offset_of_max_timestamp == 23  # the batch's last offset (Kafka)
    assert info.timestamp_type == "log_append"
    assert buf[61:] == original[61:]  # the records are never rewritten


def test_create_time_wrong_max_timestamp_is_fixed() -> None:
    buf = bytearray(build(4, ts=[50, 10, 70, 70]))
    struct.pack_into(">q", buf, 35, 5)  # a producer that lied
    fix_crc(buf)
    info = logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert fields(buf)["max_timestamp"] == 70
    assert fields(buf)["attributes"] & 0x08 == 0
    assert crc_ok(buf)
    assert info.max_timestamp == 70
    assert info.offset_of_max_timestamp == 2  # the first record holding the max
    assert info.shallow_offset_of_max_timestamp == 3  # the last offset of its batch
    assert info.min_timestamp == 10
    assert info.timestamp_type == "create"


def test_max_timestamp_across_batches() -> None:
    buf = bytearray(build(2, ts=[5, 6]) + build(3, ts=[9, 100, 100]) + build(2, ts=[100, 1]))
    info = logcore.validate_for_append(buf, next_offset=10, max_message_bytes=MAX)
    assert info.max_timestamp == 100
    assert info.offset_of_max_timestamp == 13
    # Kafka's shallowOffsetOfMaxTimestamp: the last offset of the first batch holding it
    assert info.shallow_offset_of_max_timestamp == 14
    assert info.min_timestamp == 1


def test_log_append_time_over_several_batches_names_the_first_batch() -> None:
    buf = bytearray(build(2, ts=[5, 6]) + build(3, ts=[9, 100, 100]))
    info = logcore.validate_for_append(buf, next_offset=10, max_message_bytes=MAX,
                                       log_append_time_ms=777)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (777, 10)
    assert info.shallow_offset_of_max_timestamp == 11


def test_sequences() -> None:
    buf = bytearray(
        build(2, producer_id=1, producer_epoch=0, base_sequence=5)
        + build(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    )
    info = logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert info.first_sequence == 5
    assert info.last_sequence == 0  # (2**31 - 2) + 2 wraps past int32 max to 0
    buf = bytearray(build(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 1))
    assert logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX).last_sequence == 1
    buf = bytearray(build(3))
    info = logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert (info.first_sequence, info.last_sequence) == (-1, -1)


def test_transactional_and_control_flags_of_first_batch() -> None:
    marker = logcore.BatchBuilder(
        is_control=True, transactional=True, producer_id=3, producer_epoch=1
    )
    marker.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x01", timestamp_ms=5)
    buf = bytearray(marker.build())
    info = logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert info.is_control and info.is_transactional
    assert info.producer_id == 3


def test_batch_exactly_at_max_message_bytes_is_accepted() -> None:
    data = build(3)
    info = logcore.validate_for_append(bytearray(data), next_offset=0, max_message_bytes=len(data))
    assert info.record_count == 3


def test_writable_memoryview_and_mmap(tmp_path) -> None:
    data = build(2) + build(2)
    backing = bytearray(b"\xee" * 5 + data)
    view = memoryview(backing)[5:]
    logcore.validate_for_append(view, next_offset=40, max_message_bytes=MAX)
    view.release()
    assert backing[:5] == b"\xee" * 5
    assert [b.base_offset for b in logcore.iter_batches(bytes(backing[5:]))] == [40, 42]

    path = tmp_path / "produce.bin"
    path.write_bytes(data)
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        info = logcore.validate_for_append(m, next_offset=1, max_message_bytes=MAX)
        assert info.record_count == 4
        m.flush()
    assert [b.base_offset for b in logcore.iter_batches(path.read_bytes())] == [1, 3]


def test_read_only_buffers_raise_type_error(tmp_path) -> None:
    data = build(2)
    with pytest.raises(TypeError):
        logcore.validate_for_append(data, next_offset=0, max_message_bytes=MAX)
    with pytest.raises(TypeError):
        logcore.validate_for_append(
            memoryview(bytearray(data)).toreadonly(), next_offset=0, max_message_bytes=MAX
        )
    path = tmp_path / "ro.bin"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        with pytest.raises(TypeError):
            logcore.validate_for_append(m, next_offset=0, max_message_bytes=MAX)


# --------------------------------------------------------------------------- errors


def check_rejected(
    buf: bytearray, batch_index: int, position: int, exc=logcore.CorruptRecordError, **kw
):
    before = bytes(buf)
    kw.setdefault("max_message_bytes", MAX)
    with pytest.raises(exc) as info:
        logcore.validate_for_append(
            buf, next_offset=1000, log_append_time_ms=99, partition_leader_epoch=5, **kw
        )
    assert bytes(buf) == before, "buffer modified on error"
    err = info.value
    assert err.batch_index == batch_index
    assert err.position == position
    msg = str(err)
    assert re.search(rf"\b{position}\b", msg), msg
    assert re.search(rf"\b{batch_index}\b", msg), msg
    return err


def test_empty_buffer() -> None:
    with pytest.raises(logcore.CorruptRecordError):
        logcore.validate_for_append(bytearray(), next_offset=0, max_message_bytes=MAX)


def test_partial_trailing_batch_at_every_cut() -> None:
    first, second = build(2), build(3)
    for cut in range(1, len(second)):
        buf = bytearray(first + second[:cut])
        check_rejected(buf, 1, len(first))


def test_batch_length_below_minimum() -> None:
    first, second = build(2), bytearray(build(2))
    struct.pack_into(">i", second, 8, 48)
    check_rejected(bytearray(first + bytes(second)), 1, len(first))


def test_too_large() -> None:
    first, second = build(1), build(50)
    err = check_rejected(
        bytearray(first + second),
        1,
        len(first),
        logcore.RecordTooLargeError,
        max_message_bytes=len(second) - 1,
    )
    assert isinstance(err, ValueError)


def test_too_large_is_checked_before_magic_and_crc() -> None:
    bad = bytearray(build(50))
    bad[16] = 1
    bad[30] ^= 1
    check_rejected(bad, 0, 0, logcore.RecordTooLargeError, max_message_bytes=100)


def test_bad_magic() -> None:
    first, second = build(2), bytearray(build(2))
    second[16] = 1
    check_rejected(bytearray(first + bytes(second)), 1, len(first))


def test_crc_mismatch() -> None:
    first, second = build(2), bytearray(build(2))
    second[-2] ^= 0x10
    check_rejected(bytearray(first + bytes(second)), 1, len(first))


def test_crc_mismatch_in_first_batch() -> None:
    bad = bytearray(build(2))
    bad[21] ^= 0x40  # attributes
    check_rejected(bad + build(1), 0, 0)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id) -> None:
    bad = bytearray(build(2))
    struct.pack_into(">h", bad, 21, codec_id)
    fix_crc(bad)
    check_rejected(bad, 0, 0)


def test_zero_records() -> None:
    bad = bytearray(build(1))[:61]
    struct.pack_into(">i", bad, 8, 49)
    struct.pack_into(">i", bad, 57, 0)
    struct.pack_into(">i", bad, 23, -1)
    fix_crc(bad)
    check_rejected(bad, 0, 0)


def test_last_offset_delta_mismatch() -> None:
    bad = bytearray(build(3))
    struct.pack_into(">i", bad, 23, 3)
    fix_crc(bad)
    check_rejected(bytearray(build(1)) + bad, 1, len(build(1)))


def _records_section(*deltas: int) -> bytes:
    out = b""
    for d in deltas:
        one = logcore.BatchBuilder()
        one.append(b"v", timestamp_ms=1000)
        rec = one.build()[61:]  # one record with offset_delta 0
        body = rec[1:]  # 1-byte length prefix
        body = body[:2] + logcore.encode_varint(d) + body[3:]
        out += logcore.encode_varint(len(body)) + body
    return out


def _batch_around(
    section: bytes, count: int, last_offset_delta: int, attributes: int = 0
) -> bytearray:
    out = bytearray(61) + section
    HEADER.pack_into(
        out,
        0,
        0,
        len(out) - 12,
        -1,
        2,
        0,
        attributes,
        last_offset_delta,
        1000,
        1000,
        -1,
        -1,
        -1,
        count,
    )
    fix_crc(out)
    return out


def test_offset_delta_not_matching_index() -> None:
    check_rejected(_batch_around(_records_section(0, 2), count=2, last_offset_delta=1), 0, 0)


def test_fewer_records_than_count() -> None:
    buf = _batch_around(_records_section(0, 1), count=3, last_offset_delta=2)
    before = bytes(buf)
    with pytest.raises(logcore.CorruptRecordError) as err:
        logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert bytes(buf) == before
    assert err.value.batch_index == 0


def test_more_records_than_count() -> None:
    buf = _batch_around(_records_section(0, 1, 2), count=2, last_offset_delta=1)
    before = bytes(buf)
    with pytest.raises(logcore.CorruptRecordError) as err:
        logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert bytes(buf) == before
    assert err.value.batch_index == 0


def test_compressed_count_mismatch_found_by_decompressing() -> None:
    from logcore import _compression

    section = _compression.compress(4, _records_section(0, 1))
    buf = _batch_around(section, count=3, last_offset_delta=2, attributes=4)
    before = bytes(buf)
    with pytest.raises(logcore.CorruptRecordError):
        logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert bytes(buf) == before


def test_corrupt_compressed_data() -> None:
    bad = bytearray(build(30, compression="lz4"))
    bad[70] ^= 0xFF
    fix_crc(bad)
    first = build(2)
    buf = bytearray(first) + bad
    before = bytes(buf)
    with pytest.raises(logcore.CorruptRecordError) as err:
        logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert bytes(buf) == before
    assert err.value.batch_index == 1


def test_corrupt_record_structure_uncompressed() -> None:
    good = build(3)
    bad = bytearray(good)
    bad[61] = 0x7F  # first record's length varint: -64, invalid
    fix_crc(bad)
    buf = bytearray(good) + bad
    before = bytes(buf)
    with pytest.raises(logcore.CorruptRecordError) as err:
        logcore.validate_for_append(buf, next_offset=0, max_message_bytes=MAX)
    assert bytes(buf) == before
    assert err.value.batch_index == 1
    assert err.value.position >= len(good)


def test_error_in_last_batch_leaves_earlier_batches_untouched() -> None:
    parts = [build(2), build(2, compression="snappy"), build(2)]
    bad = bytearray(parts[2])
    bad[-1] ^= 1
    buf = bytearray(parts[0] + parts[1]) + bad
    check_rejected(buf, 2, len(parts[0]) + len(parts[1]))


@pytest.mark.parametrize("n", [1, 64, 65, 300])
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_refuse_keyless_names_the_first_keyless_record_on_both_paths(n, codec) -> None:
    """Small batches are walked, larger ones go through decode_columns: same answers."""
    from logcore.append import KEYLESS_WALK_MAX_RECORDS, refuse_keyless

    assert KEYLESS_WALK_MAX_RECORDS == 64  # the parameters straddle it
    keyed = logcore.BatchBuilder(compression=codec)
    mixed = logcore.BatchBuilder(compression=codec)
    for i in range(n):
        keyed.append(b"v", key=b"k%d" % i, timestamp_ms=1000)
        mixed.append(b"v", key=None if i >= n // 2 else b"k%d" % i, timestamp_ms=1000)
    refuse_keyless(bytearray(keyed.build()))
    with pytest.raises(logcore.InvalidRecordError) as err:
        refuse_keyless(bytearray(mixed.build()))
    assert err.value.record_index == n // 2
    assert f"(record {n // 2})" in str(err.value)
    two = bytearray(keyed.build()) + bytearray(mixed.build())  # two batches: decode_columns
    with pytest.raises(logcore.InvalidRecordError) as err:
        refuse_keyless(two)
    assert err.value.record_index == n + n // 2
