"""logcore.RecordBatch, Record and iter_batches: reading batches.

Hand-made batches in this file are assembled field by field with `struct` and the
independent `crc32c` package, so that a mistake shared by logcore's encoder and decoder
cannot hide.
"""

from __future__ import annotations

import mmap
import re
import struct

import crc32c as crc32c_pkg
import pytest

import logcore
from logcore import _compression

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 header, independent of logcore


# --------------------------------------------------------------------------- helpers


def zz(n: int) -> bytes:
    """Zig-zag varint, written out independently of logcore."""
    z = (n << 1) ^ (n >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record_bytes(
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers=(),
    attributes: int = 0,
) -> bytes:
    body = bytes([attributes]) + zz(timestamp_delta) + zz(offset_delta)
    body += zz(-1) if key is None else zz(len(key)) + key
    body += zz(-1) if value is None else zz(len(value)) + value
    body += zz(len(headers))
    for hk, hv in headers:
        body += zz(len(hk)) + hk
        body += zz(-1) if hv is None else zz(len(hv)) + hv
    return zz(len(body)) + body


def batch_bytes(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_offset: int = 0,
    leader_epoch: int = -1,
    base_timestamp: int = 1000,
    max_timestamp: int = 1000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
    crc: int | None = None,
) -> bytes:
    """A v2 batch around a ready record section, with a correct CRC unless given."""
    if last_offset_delta is None:
        last_offset_delta = count - 1
    out = bytearray(HEADER.size) + records
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - 12,
        leader_epoch,
        magic,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    struct.pack_into(">I", out, 17, crc32c_pkg.crc32c(bytes(out[21:])) if crc is None else crc)
    return bytes(out)


def simple_batch(n: int = 3, **kw) -> bytes:
    b = logcore.BatchBuilder(**kw)
    for i in range(n):
        b.append(b"value-%d" % i, key=b"key-%d" % i, timestamp_ms=1000 + i)
    return b.build()


def header(data: bytes) -> tuple:
    return HEADER.unpack_from(data, 0)


# --------------------------------------------------------------------------- RecordBatch


def test_record_batch_properties() -> None:
    data = simple_batch(
        4,
        base_offset=100,
        partition_leader_epoch=3,
        producer_id=12,
        producer_epoch=2,
        base_sequence=40,
        transactional=True,
    )
    batch = logcore.RecordBatch(data)
    assert batch.base_offset == 100
    assert batch.last_offset == 103
    assert batch.last_offset_delta == 3
    assert batch.batch_length == len(data) - 12
    assert batch.size_in_bytes == len(data)
    assert batch.partition_leader_epoch == 3
    assert batch.magic == 2
    assert batch.crc == crc32c_pkg.crc32c(data[21:])
    assert batch.attributes == 0x10
    assert batch.compression == "none"
    assert batch.timestamp_type == "create"
    assert batch.is_transactional is True
    assert batch.is_control is False
    assert batch.base_timestamp == 1000
    assert batch.max_timestamp == 1003
    assert batch.producer_id == 12
    assert batch.producer_epoch == 2
    assert batch.base_sequence == 40
    assert batch.records_count == 4
    assert batch.records_count == 4


@pytest.mark.parametrize("codec", CODECS)
def test_compression_property(codec) -> None:
    assert logcore.RecordBatch(simple_batch(2, compression=codec)).compression == codec


def test_record_fields_and_types() -> None:
    b = logcore.BatchBuilder()
    b.append(b"v0", key=b"k0", timestamp_ms=2000, headers=[("a", b"1"), ("ü-ß", None)])
    b.append(None, key=None, timestamp_ms=1990)
    b.append(b"", key=b"", timestamp_ms=2010, headers=[("", b"")])
    r0, r1, r2 = logcore.RecordBatch(b.build())
    assert (r0.offset, r0.timestamp, r0.key, r0.value) == (0, 2000, b"k0", b"v0")
    assert r0.headers == [("a", b"1"), ("ü-ß", None)]
    assert r0.timestamp_type == "create"
    assert type(r0.key) is bytes and type(r0.value) is bytes and type(r0.headers[0][1]) is bytes
    assert (r1.offset, r1.timestamp, r1.key, r1.value, r1.headers) == (1, 1990, None, None, [])
    assert (r2.key, r2.value, r2.headers) == (b"", b"", [("", b"")])
    # headers_or_none: the same list, or None (no empty list made) for a record without.
    assert r0.headers_or_none == r0.headers and r2.headers_or_none == [("", b"")]
    r3, r4 = logcore.RecordBatch(simple_batch(2))
    assert r3.headers_or_none is None
    assert r4.headers == [] and r4.headers_or_none is None


def test_records_outlive_their_buffer() -> None:
    buf = bytearray(simple_batch(2))
    batch = logcore.RecordBatch(buf)
    records = list(batch)
    del batch
    buf[:] = bytes(len(buf))
    assert [r.value for r in records] == [b"value-0", b"value-1"]


def test_log_append_time_records_take_max_timestamp() -> None:
    recs = record_bytes(offset_delta=0, timestamp_delta=0) + record_bytes(
        offset_delta=1, timestamp_delta=50
    )
    data = batch_bytes(recs, count=2, attributes=0x08, base_timestamp=10, max_timestamp=9999)
    batch = logcore.RecordBatch(data)
    assert batch.timestamp_type == "log_append"
    assert [(r.timestamp, r.timestamp_type) for r in batch] == [(9999, "log_append")] * 2


def test_offsets_and_timestamps_are_base_plus_delta() -> None:
    recs = record_bytes(offset_delta=0, timestamp_delta=-7) + record_bytes(
        offset_delta=5, timestamp_delta=2**40
    )
    data = batch_bytes(recs, count=2, last_offset_delta=5, base_offset=1000, base_timestamp=10**12)
    assert [(r.offset, r.timestamp) for r in logcore.RecordBatch(data)] == [
        (1000, 10**12 - 7),
        (1005, 10**12 + 2**40),
    ]


def test_control_batch_iterates_its_records() -> None:
    key = struct.pack(">hh", 0, 1)  # COMMIT marker
    value = struct.pack(">hi", 0, 3)
    data = batch_bytes(record_bytes(key=key, value=value), count=1, attributes=0x30, producer_id=5)
    batch = logcore.RecordBatch(data)
    assert batch.is_control and batch.is_transactional
    batch.validate()
    (rec,) = batch
    assert (rec.key, rec.value) == (key, value)


def test_trailing_bytes_after_batch_are_ignored() -> None:
    data = simple_batch(2)
    batch = logcore.RecordBatch(data + b"garbage after the batch")
    assert batch.size_in_bytes == len(data)
    batch.validate()
    assert [r.value for r in batch] == [b"value-0", b"value-1"]


def test_every_buffer_type(tmp_path) -> None:
    data = simple_batch(3)
    for buf in (data, bytearray(data), memoryview(data), memoryview(b"\x00" + data)[1:]):
        batch = logcore.RecordBatch(buf)
        assert batch.is_valid()
        assert [r.offset for r in batch] == [0, 1, 2]
        del batch
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        batch = logcore.RecordBatch(m)
        assert batch.is_valid()
        assert [r.key for r in batch] == [b"key-0", b"key-1", b"key-2"]
        del batch  # release the view before the mmap closes


def test_constructor_checks_header() -> None:
    data = simple_batch(1)
    cases = {
        "short header": data[:60],
        "empty": b"",
        "batch_length below 49": data[:8] + struct.pack(">i", 48) + data[12:],
        "negative batch_length": data[:8] + struct.pack(">i", -1) + data[12:],
        "runs past end": data[:-1],
        "magic 1": data[:16] + b"\x01" + data[17:],
        "magic 3": data[:16] + b"\x03" + data[17:],
    }
    for name, buf in cases.items():
        with pytest.raises(logcore.CorruptRecordError) as info:
            logcore.RecordBatch(buf)
        assert info.value.position == 0, name


def test_minimal_header_only_batch_constructs() -> None:
    # batch_length 49 and records_count 0: a compacted-away batch; valid and empty.
    data = batch_bytes(b"", count=0, last_offset_delta=5, base_sequence=10, producer_id=1)
    batch = logcore.RecordBatch(data)
    assert batch.batch_length == 49
    assert list(batch) == []
    batch.validate()


def test_crc_mismatch() -> None:
    data = bytearray(simple_batch(3))
    data[70] ^= 0x01  # a byte inside a record
    batch = logcore.RecordBatch(bytes(data))
    assert not batch.is_valid()
    with pytest.raises(logcore.CorruptRecordError) as info:
        batch.validate()
    stored, computed = batch.crc, crc32c_pkg.crc32c(bytes(data[21:]))
    msg = str(info.value).lower()
    for v in (stored, computed):
        forms = {str(v), f"{v:x}", f"{v:08x}"}
        assert any(re.search(rf"\b(0x)?{f}\b", msg) for f in forms), (msg, v)
    # iteration does not check the CRC
    assert len(list(batch)) == 3


def test_leader_epoch_is_outside_the_crc() -> None:
    data = bytearray(simple_batch(2))
    struct.pack_into(">i", data, 12, 12345)
    batch = logcore.RecordBatch(data)
    assert batch.partition_leader_epoch == 12345
    batch.validate()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id) -> None:
    data = batch_bytes(record_bytes(), count=1, attributes=codec_id)
    batch = logcore.RecordBatch(data)
    assert batch.compression not in CODECS  # a property never raises
    assert not batch.is_valid()
    with pytest.raises(logcore.CorruptRecordError):
        batch.validate()
    with pytest.raises(logcore.CorruptRecordError):
        list(batch)


def test_corrupt_compressed_blob() -> None:
    data = bytearray(simple_batch(20, compression="lz4"))
    data[-5] ^= 0xFF
    struct.pack_into(">I", data, 17, crc32c_pkg.crc32c(bytes(data[21:])))
    batch = logcore.RecordBatch(bytes(data))
    with pytest.raises(logcore.CorruptRecordError):
        batch.validate()
    with pytest.raises(logcore.CorruptRecordError):
        list(batch)


def _corrupt_record_sections():
    good = record_bytes(key=b"k", value=b"v", headers=[(b"h", b"x")])
    body = good[1:]  # good's length prefix is one byte
    yield "record runs past the records", zz(len(body) + 1) + body, 1
    yield "record shorter than its fields", zz(len(body) - 1) + body[:-1], 1
    yield "bytes after the last header", zz(len(body) + 1) + body + b"\x00", 1
    yield "negative record length", zz(-5) + body, 1

    def rec(body: bytes) -> bytes:
        return zz(len(body)) + body

    yield "key length -2", rec(b"\x00\x00\x00" + zz(-2) + b"\x02\x00"), 1
    yield "value length -3", rec(b"\x00\x00\x00" + zz(-1) + zz(-3) + b"\x00"), 1
    yield "negative header count", rec(b"\x00\x00\x00\x01\x01" + zz(-1)), 1
    yield "header key length -1", rec(b"\x00\x00\x00\x01\x01\x02" + zz(-1) + b"\x01"), 1
    yield "header value length -2", rec(b"\x00\x00\x00\x01\x01\x02\x00" + zz(-2)), 1
    yield "absurd header count", rec(b"\x00\x00\x00\x01\x01" + zz(2**31 - 1)), 1
    yield "absurd key length", rec(b"\x00\x00\x00" + zz(2**31 - 1) + b"\x01\x00\x00"), 1
    yield "int32 varint overflow", rec(b"\x00\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x01\x00"), 1
    # 6-byte varint for the int32 offset_delta; 11-byte varlong for timestamp_delta
    six = b"\x80\x80\x80\x80\x80\x00"
    yield "6-byte offset_delta", rec(b"\x00\x00" + six + b"\x01\x01\x00"), 1
    yield "11-byte timestamp_delta", rec(b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00\x01\x01\x00"), 1
    yield "truncated varint at end", b"\x80", 1
    yield "records_count larger than records", good, 2
    yield "records_count smaller than records", good + record_bytes(offset_delta=1), 1
    yield "empty section with count 1", b"", 1
    yield "invalid utf-8 header key", record_bytes(headers=[(b"\xff\xfe", b"x")]), 1


@pytest.mark.parametrize(
    "section, count",
    [(s, c) for _, s, c in _corrupt_record_sections()],
    ids=[n for n, _, _ in _corrupt_record_sections()],
)
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_corrupt_records_raise(section, count, codec) -> None:
    cid = _compression.codec_id(codec)
    blob = section if cid == 0 else _compression.compress(cid, section)
    data = batch_bytes(blob, count=count, attributes=cid)
    batch = logcore.RecordBatch(data)  # the header is fine
    with pytest.raises(logcore.CorruptRecordError):
        list(batch)
    with pytest.raises(logcore.CorruptRecordError):
        batch.validate()
    assert batch.is_valid() is False


def test_negative_records_count() -> None:
    data = batch_bytes(record_bytes(), count=-1, last_offset_delta=0)
    batch = logcore.RecordBatch(data)
    assert batch.records_count == -1  # header properties never raise
    with pytest.raises(logcore.CorruptRecordError):
        batch.validate()
    with pytest.raises(logcore.CorruptRecordError):
        list(batch)


def test_sane_5_byte_and_10_byte_varints_in_records_are_accepted() -> None:
    # Non-minimal but in-range encodings: 5 bytes for an int32 field, 10 for a varlong.
    body = b"\x00" + b"\x80" * 9 + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x01\x01\x00"
    data = batch_bytes(zz(len(body)) + body, count=1)
    (rec,) = logcore.RecordBatch(data)
    assert (rec.offset, rec.timestamp, rec.key, rec.value) == (0, 1000, None, None)


# --------------------------------------------------------------------------- iter_batches


def three_batches() -> list[bytes]:
    return [
        simple_batch(2, base_offset=0),
        simple_batch(3, base_offset=2, compression="gzip"),
        simple_batch(1, base_offset=5, is_control=True),
    ]


def test_iter_batches_walks_concatenated_batches() -> None:
    parts = three_batches()
    batches = list(logcore.iter_batches(b"".join(parts)))
    assert [b.base_offset for b in batches] == [0, 2, 5]
    assert [b.size_in_bytes for b in batches] == [len(p) for p in parts]
    assert [b.compression for b in batches] == ["none", "gzip", "none"]
    assert [r.offset for b in batches for r in b] == [0, 1, 2, 3, 4, 5]
    assert all(b.is_valid() for b in batches)


def test_iter_batches_skips_truncated_trailing_batch_at_every_cut() -> None:
    parts = three_batches()
    head = b"".join(parts[:2])
    for cut in range(len(parts[2])):
        batches = list(logcore.iter_batches(head + parts[2][:cut]))
        assert [b.base_offset for b in batches] == [0, 2], cut


def test_iter_batches_empty_and_tiny_buffers() -> None:
    assert list(logcore.iter_batches(b"")) == []
    assert list(logcore.iter_batches(b"\x00" * 16)) == []


def test_iter_batches_bad_length_raises_with_position() -> None:
    parts = three_batches()
    bad = bytearray(parts[1])
    struct.pack_into(">i", bad, 8, 48)
    with pytest.raises(logcore.CorruptRecordError) as info:
        list(logcore.iter_batches(parts[0] + bytes(bad) + parts[2]))
    assert info.value.position == len(parts[0])
    assert info.value.batch_index == 1


def test_iter_batches_bad_magic_raises_with_position() -> None:
    parts = three_batches()
    bad = bytearray(parts[2])
    bad[16] = 1
    it = logcore.iter_batches(parts[0] + parts[1] + bytes(bad))
    assert next(it).base_offset == 0
    assert next(it).base_offset == 2
    with pytest.raises(logcore.CorruptRecordError) as info:
        next(it)
    assert info.value.position == len(parts[0]) + len(parts[1])
    assert str(len(parts[0]) + len(parts[1])) in str(info.value)


def test_iter_batches_does_not_check_crc() -> None:
    data = bytearray(simple_batch(2))
    data[17] ^= 0xFF
    (batch,) = logcore.iter_batches(bytes(data))
    assert not batch.is_valid()


def test_iter_batches_views_are_zero_copy() -> None:
    # A view holds an export of the bytearray: it cannot be resized while views live.
    buf = bytearray(b"".join(three_batches()))
    batches = list(logcore.iter_batches(buf))
    with pytest.raises(BufferError):
        buf.extend(b"x")
    del batches
    buf.extend(b"x")


def test_iter_batches_over_mmap(tmp_path) -> None:
    parts = three_batches()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(parts) + parts[0][:30])
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        offsets = [r.offset for b in logcore.iter_batches(m) for r in b]
    assert offsets == [0, 1, 2, 3, 4, 5]


# --------------------------------------------------------------------------- API surface


def test_views_and_records_are_read_only() -> None:
    batch = logcore.RecordBatch(simple_batch(2))
    for name in ("base_offset", "records_count", "crc", "compression"):
        with pytest.raises(AttributeError):
            setattr(batch, name, 5)
    rec = next(iter(batch))
    for name in ("offset", "timestamp", "key", "value", "headers"):
        with pytest.raises(AttributeError):
            setattr(rec, name, 5)
    cols = logcore.decode_columns(simple_batch(2))
    for name in ("offsets", "num_records"):
        with pytest.raises(AttributeError):
            setattr(cols, name, 5)


def test_non_byte_buffers_are_refused() -> None:
    import array

    data = simple_batch(1)
    for fn in (
        logcore.RecordBatch,
        logcore.decode_columns,
        lambda b: list(logcore.iter_batches(b)),
    ):
        with pytest.raises(TypeError):
            fn("not a buffer" * 10)
        with pytest.raises(ValueError):  # 4-byte items, not bytes
            fn(array.array("I", data[: len(data) // 4 * 4]))
        with pytest.raises(ValueError):  # two-dimensional
            fn(memoryview(bytes(64)).cast("B", (8, 8)))


def test_iterating_twice_gives_the_same_records() -> None:
    batch = logcore.RecordBatch(simple_batch(3, compression="zstd"))
    first = [(r.offset, r.key, r.value) for r in batch]
    assert [(r.offset, r.key, r.value) for r in batch] == first
    assert len(first) == 3


def test_offset_and_timestamp_arithmetic_wraps_as_java_longs() -> None:
    # base + delta past int64 wraps (Java long arithmetic), in iteration and columns alike.
    int64_max = 2**63 - 1
    recs = record_bytes(offset_delta=0, timestamp_delta=0) + record_bytes(
        offset_delta=1, timestamp_delta=2
    )
    data = batch_bytes(recs, count=2, base_offset=int64_max, base_timestamp=int64_max - 1)
    got = [(r.offset, r.timestamp) for r in logcore.RecordBatch(data)]
    assert got == [(int64_max, int64_max - 1), (-(2**63), -(2**63))]
    assert logcore.RecordBatch(data).last_offset == -(2**63)
    cols = logcore.decode_columns(data)
    assert cols.offsets.tolist() == [int64_max, -(2**63)]
    assert cols.timestamps.tolist() == [int64_max - 1, -(2**63)]
