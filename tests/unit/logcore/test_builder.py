"""logcore.BatchBuilder: the batch a producer sends, checked field by field.

Header fields are read back with `struct`, independently of logcore's decoder; records
are read back with logcore.RecordBatch, which tests/unit/logcore/test_reader.py checks
against hand-made batches.
"""

from __future__ import annotations

import struct
import time

import crc32c as crc32c_pkg
import pytest

import logcore
from logcore import _compression

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 header, independent of logcore


def simple_batch(n: int = 3, **kw) -> bytes:
    b = logcore.BatchBuilder(**kw)
    for i in range(n):
        b.append(b"value-%d" % i, key=b"key-%d" % i, timestamp_ms=1000 + i)
    return b.build()


def header(data: bytes) -> tuple:
    return HEADER.unpack_from(data, 0)


# --------------------------------------------------------------------------- BatchBuilder


def test_builder_default_header_fields() -> None:
    b = logcore.BatchBuilder()
    assert b.append(b"a", timestamp_ms=500) == 0
    assert b.append(b"b", timestamp_ms=700) == 1
    assert b.append(b"c", timestamp_ms=600) == 2
    data = b.build()
    (
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        pid,
        pepoch,
        bseq,
        count,
    ) = header(data)
    assert base_offset == 0
    assert batch_length == len(data) - 12
    assert leader_epoch == -1
    assert magic == 2
    assert crc == crc32c_pkg.crc32c(data[21:])
    assert attributes == 0
    assert last_offset_delta == 2
    assert base_ts == 500  # first record's timestamp
    assert max_ts == 700
    assert (pid, pepoch, bseq) == (-1, -1, -1)
    assert count == 3


def test_builder_writes_given_header_fields() -> None:
    b = logcore.BatchBuilder(
        base_offset=1234567890123,
        partition_leader_epoch=17,
        producer_id=99,
        producer_epoch=4,
        base_sequence=55,
        transactional=True,
        is_control=True,
        timestamp_type="log_append",
    )
    b.append(b"x", timestamp_ms=1)
    data = b.build()
    h = header(data)
    assert h[0] == 1234567890123
    assert h[2] == 17
    assert h[5] == 0x08 | 0x10 | 0x20
    assert h[9:12] == (99, 4, 55)


@pytest.mark.parametrize(
    "spelling, bit",
    [("create", 0), ("CreateTime", 0), (0, 0), ("log_append", 8), ("LogAppendTime", 8), (1, 8)],
)
def test_builder_timestamp_type_spellings(spelling, bit) -> None:
    data = simple_batch(1, timestamp_type=spelling)
    assert header(data)[5] & 0x08 == bit
    assert logcore.RecordBatch(data).timestamp_type == ("log_append" if bit else "create")


@pytest.mark.parametrize("bad", ["append", "LOG_APPEND", 2, -1, None])
def test_builder_rejects_unknown_timestamp_type(bad) -> None:
    with pytest.raises(ValueError):
        logcore.BatchBuilder(timestamp_type=bad)


def test_builder_rejects_unknown_compression() -> None:
    with pytest.raises(ValueError):
        logcore.BatchBuilder(compression="brotli")


@pytest.mark.parametrize(
    "codec, level",
    [("gzip", 0), ("gzip", 10), ("snappy", 1), ("lz4", 0), ("lz4", 18), ("zstd", 23)],
)
def test_builder_rejects_bad_compression_level(codec, level) -> None:
    with pytest.raises(ValueError):
        logcore.BatchBuilder(compression=codec, compression_level=level)


@pytest.mark.parametrize("codec, level", [("gzip", 1), ("gzip", 9), ("lz4", 1), ("zstd", -5)])
def test_builder_accepts_valid_levels(codec, level) -> None:
    data = simple_batch(5, compression=codec, compression_level=level)
    assert logcore.RecordBatch(data).is_valid()


def test_builder_empty_build_raises() -> None:
    with pytest.raises(ValueError):
        logcore.BatchBuilder().build()


def test_builder_default_timestamp_is_now() -> None:
    before = int(time.time() * 1000)
    b = logcore.BatchBuilder()
    b.append(b"x")
    after = int(time.time() * 1000)
    (rec,) = logcore.RecordBatch(b.build())
    assert before - 5 <= rec.timestamp <= after + 5


def test_builder_accepts_bytes_like_values() -> None:
    b = logcore.BatchBuilder()
    b.append(
        bytearray(b"ba"), key=memoryview(b"mv"), timestamp_ms=1, headers=[("h", bytearray(b"hv"))]
    )
    (rec,) = logcore.RecordBatch(b.build())
    assert (rec.key, rec.value, rec.headers) == (b"mv", b"ba", [("h", b"hv")])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"value": "text"},
        {"value": 12},
        {"value": b"v", "key": "text"},
        {"value": b"v", "headers": [(b"bytes-key", b"v")]},
        {"value": b"v", "headers": [("k", "str-value")]},
    ],
)
def test_builder_rejects_wrong_types(kwargs) -> None:
    with pytest.raises(TypeError):
        logcore.BatchBuilder().append(**kwargs)


def test_append_many_matches_append() -> None:
    values = [b"v%d" % i for i in range(20)] + [None]
    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(21)]
    stamps = [10_000 + (i * 37) % 11 for i in range(21)]
    one = logcore.BatchBuilder(compression="lz4")
    for v, k, t in zip(values, keys, stamps, strict=True):
        one.append(v, key=k, timestamp_ms=t)
    many = logcore.BatchBuilder(compression="lz4")
    many.append_many(values, keys=keys, timestamps_ms=stamps)
    assert many.build() == one.build()


def test_append_many_defaults_null_keys() -> None:
    b = logcore.BatchBuilder()
    b.append_many([b"a", b"b"], timestamps_ms=[1, 2])
    assert [(r.key, r.value) for r in logcore.RecordBatch(b.build())] == [
        (None, b"a"),
        (None, b"b"),
    ]


def test_append_many_length_mismatch() -> None:
    with pytest.raises(ValueError):
        logcore.BatchBuilder().append_many([b"a", b"b"], keys=[b"k"])
    with pytest.raises(ValueError):
        logcore.BatchBuilder().append_many([b"a", b"b"], timestamps_ms=[1, 2, 3])


def test_estimated_size_bounds_uncompressed_build() -> None:
    b = logcore.BatchBuilder()
    for i in range(100):
        b.append(b"x" * i, key=b"k" * (i % 7), timestamp_ms=i * 1000, headers=[("h", b"y")])
        assert b.estimated_size() >= len(b.build())


@pytest.mark.parametrize("codec", CODECS[1:])
def test_compressed_build_is_the_uncompressed_records_compressed(codec) -> None:
    """Same inputs: the compressed batch's blob decompresses to the plain batch's records."""

    def build(c: str) -> bytes:
        b = logcore.BatchBuilder(compression=c, producer_id=7, producer_epoch=1, base_sequence=3)
        for i in range(50):
            b.append(
                b"value %d " % i * 5,
                key=b"k%d" % i,
                timestamp_ms=5000 - i,
                headers=[("i", b"%d" % i)],
            )
        return b.build()

    plain, packed = build("none"), build(codec)
    hp, hc = header(plain), header(packed)
    assert hc[5] == _compression.codec_id(codec)
    assert hc[1] == len(packed) - 12
    assert hc[4] == crc32c_pkg.crc32c(packed[21:])
    # everything but length, CRC and attributes agrees
    assert hp[:1] + hp[2:4] + hp[6:] == hc[:1] + hc[2:4] + hc[6:]
    assert _compression.decompress(_compression.codec_id(codec), packed[61:]) == plain[61:]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec) -> None:
    b = logcore.BatchBuilder(compression=codec)
    expected = []
    for i in range(30):
        key = None if i % 4 == 0 else b"key%d" % i
        value = None if i % 5 == 0 else bytes([i]) * (i * 13)
        headers = [(f"h{j}", None if j == 1 else b"v" * j) for j in range(i % 3)]
        ts = 1_600_000_000_000 + (i * 7919) % 1000 - 500
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
        expected.append((i, ts, key, value, headers))
    batch = logcore.RecordBatch(b.build())
    batch.validate()
    assert batch.compression == codec
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == expected


def test_large_batch_round_trip() -> None:
    b = logcore.BatchBuilder(compression="zstd")
    for i in range(1000):
        b.append(bytes([i % 256]) * 1024, key=b"%016d" % i, timestamp_ms=i)
    batch = logcore.RecordBatch(b.build())
    assert batch.is_valid()
    assert batch.records_count == 1000
    for i, r in enumerate(batch):
        assert r.offset == i and r.key == b"%016d" % i and r.value == bytes([i % 256]) * 1024


def test_builder_extreme_timestamps_and_negative_deltas() -> None:
    b = logcore.BatchBuilder()
    b.append(b"a", timestamp_ms=0)
    b.append(b"b", timestamp_ms=-1)  # Kafka's NO_TIMESTAMP
    b.append(b"c", timestamp_ms=2**62)
    batch = logcore.RecordBatch(b.build())
    assert [r.timestamp for r in batch] == [0, -1, 2**62]
    assert batch.base_timestamp == 0 and batch.max_timestamp == 2**62


def test_build_is_repeatable_and_sees_later_appends() -> None:
    b = logcore.BatchBuilder()
    b.append(b"a", timestamp_ms=1)
    assert b.build() == b.build()
    b.append(b"b", timestamp_ms=2)
    assert [r.value for r in logcore.RecordBatch(b.build())] == [b"a", b"b"]
