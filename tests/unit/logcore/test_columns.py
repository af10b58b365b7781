"""logcore.decode_columns: Arrow-style numpy columns over every record of every batch."""

from __future__ import annotations

import mmap
import struct
import tracemalloc

import crc32c as crc32c_pkg
import numpy as np
import pytest

import logcore

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def build(records, **kw) -> bytes:
    b = logcore.BatchBuilder(**kw)
    for value, key, ts, headers in records:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    return b.build()


def mixed_records(n: int, seed: int = 0):
    out = []
    for i in range(n):
        key = None if (i + seed) % 4 == 0 else b"key-%d" % i
        value = None if (i + seed) % 7 == 3 else bytes([(i + seed) % 256]) * ((i * 31) % 90)
        headers = [("h", b"x")] * ((i + seed) % 3)
        out.append((value, key, 10_000 + (i * 17) % 50, headers))
    return out


def assert_columns_match_iteration(cols, buffer) -> None:
    records = [r for b in logcore.iter_batches(buffer) if not b.is_control for r in b]
    headers = [len(r.headers) for r in records]
    n = len(records)
    assert cols.num_records == len(cols) == n
    assert cols.offsets.tolist() == [r.offset for r in records]
    assert cols.timestamps.tolist() == [r.timestamp for r in records]
    assert cols.timestamp_types.tolist() == [int(r.timestamp_type == "log_append") for r in records]
    assert cols.header_counts.tolist() == headers
    assert cols.key_valid.tolist() == [r.key is not None for r in records]
    assert cols.value_valid.tolist() == [r.value is not None for r in records]
    ko, vo = cols.key_offsets, cols.value_offsets
    kd, vd = cols.key_data.tobytes(), cols.value_data.tobytes()
    assert ko[0] == 0 and vo[0] == 0
    assert ko[-1] == len(kd) and vo[-1] == len(vd)
    for i, r in enumerate(records):
        key = kd[ko[i] : ko[i + 1]]
        value = vd[vo[i] : vo[i + 1]]
        assert key == (r.key or b"")
        assert value == (r.value or b"")


def test_dtypes_and_shapes() -> None:
    data = build(mixed_records(10))
    cols = logcore.decode_columns(data)
    expected = {
        "offsets": (np.int64, 10),
        "timestamps": (np.int64, 10),
        "timestamp_types": (np.int8, 10),
        "key_offsets": (np.int32, 11),
        "value_offsets": (np.int32, 11),
        "key_valid": (np.bool_, 10),
        "value_valid": (np.bool_, 10),
        "header_counts": (np.int32, 10),
    }
    for name, (dtype, length) in expected.items():
        arr = getattr(cols, name)
        assert isinstance(arr, np.ndarray), name
        assert arr.dtype == dtype, name
        assert arr.shape == (length,), name
    for name in ("key_data", "value_data"):
        arr = getattr(cols, name)
        assert arr.dtype == np.uint8 and arr.ndim == 1, name
        assert arr.flags["C_CONTIGUOUS"], name
    assert cols.num_records == len(cols) == 10


def test_values_of_a_simple_batch() -> None:
    data = build(
        [
            (b"v0", b"k0", 100, []),
            (None, None, 99, [("a", b"1"), ("b", None)]),
            (b"", b"", 105, []),
            (b"value-3", None, 101, [("c", b"")]),
        ],
        base_offset=50,
    )
    cols = logcore.decode_columns(data)
    assert cols.offsets.tolist() == [50, 51, 52, 53]
    assert cols.timestamps.tolist() == [100, 99, 105, 101]
    assert cols.timestamp_types.tolist() == [0, 0, 0, 0]
    assert cols.key_offsets.tolist() == [0, 2, 2, 2, 2]
    assert cols.key_data.tobytes() == b"k0"
    assert cols.key_valid.tolist() == [True, False, True, False]
    assert cols.value_offsets.tolist() == [0, 2, 2, 2, 9]
    assert cols.value_data.tobytes() == b"v0value-3"
    assert cols.value_valid.tolist() == [True, False, True, True]
    assert cols.header_counts.tolist() == [0, 2, 0, 1]


@pytest.mark.parametrize("codec", CODECS)
def test_matches_iteration_for_every_codec(codec) -> None:
    data = build(mixed_records(200, seed=3), compression=codec, base_offset=1000)
    cols = logcore.decode_columns(data)
    assert cols.num_records == 200
    assert_columns_match_iteration(cols, data)


def test_many_batches_control_skipped_truncated_tail_skipped() -> None:
    parts = [
        build(mixed_records(5, 1), base_offset=0),
        build(
            [(b"\x00\x00\x00\x00\x00\x01", b"\x00\x00\x00\x01", 7, [])],
            base_offset=5,
            is_control=True,
            transactional=True,
        ),
        build(mixed_records(7, 2), base_offset=6, compression="zstd"),
        build(mixed_records(3, 4), base_offset=13, timestamp_type="log_append"),
    ]
    tail = build(mixed_records(4), base_offset=16)[:-3]
    buffer = b"".join(parts) + tail
    cols = logcore.decode_columns(buffer)
    assert cols.offsets.tolist() == [0, 1, 2, 3, 4] + list(range(6, 16))
    assert_columns_match_iteration(cols, buffer)


def test_log_append_time_columns() -> None:
    data = bytearray(build(mixed_records(4), base_offset=0))
    logcore.validate_for_append(
        data, next_offset=0, max_message_bytes=1 << 20, log_append_time_ms=777
    )
    cols = logcore.decode_columns(data)
    assert cols.timestamps.tolist() == [777] * 4
    assert cols.timestamp_types.tolist() == [1] * 4


def test_empty_buffer_and_only_control() -> None:
    for buffer in (
        b"",
        build([(b"\x00\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00", 1, [])], is_control=True),
    ):
        cols = logcore.decode_columns(buffer)
        assert cols.num_records == len(cols) == 0
        assert cols.offsets.shape == (0,)
        assert cols.key_offsets.tolist() == [0]
        assert cols.value_offsets.tolist() == [0]
        assert cols.key_data.shape == (0,)


def test_crc_is_checked() -> None:
    first = build(mixed_records(3))
    second = bytearray(build(mixed_records(3), base_offset=3))
    second[-1] ^= 0x55
    with pytest.raises(logcore.CorruptRecordError) as info:
        logcore.decode_columns(first + bytes(second))
    assert info.value.batch_index == 1
    assert info.value.position == len(first)


def test_bad_batch_header_raises_with_position() -> None:
    first = build(mixed_records(3))
    bad = bytearray(first)
    bad[16] = 0  # magic
    with pytest.raises(logcore.CorruptRecordError) as info:
        logcore.decode_columns(first + bytes(bad))
    assert info.value.position == len(first)


def test_absurd_records_count_does_not_allocate() -> None:
    # A tiny batch that claims 2**31 - 1 records, with a valid CRC: must raise quickly
    # without sizing any column from the claimed count.
    good = bytearray(build([(b"v", b"k", 1, [])]))
    struct.pack_into(">i", good, 57, 2**31 - 1)
    struct.pack_into(">i", good, 23, 2**31 - 2)
    struct.pack_into(">I", good, 17, crc32c_pkg.crc32c(bytes(good[21:])))
    tracemalloc.start()
    try:
        with pytest.raises(logcore.CorruptRecordError):
            logcore.decode_columns(good)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_columns_over_mmap(tmp_path) -> None:
    data = build(mixed_records(20), compression="lz4")
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        cols = logcore.decode_columns(m)
        assert cols.num_records == 20
    # the columns own their memory: still readable after the mmap closed
    assert_columns_match_iteration(cols, data)


def test_columns_own_their_memory() -> None:
    buf = bytearray(build(mixed_records(10)))
    cols = logcore.decode_columns(buf)
    before = (cols.key_data.tobytes(), cols.value_data.tobytes())
    buf[:] = bytes(len(buf))
    assert (cols.key_data.tobytes(), cols.value_data.tobytes()) == before


def _views_values(cols) -> list:
    data = cols.value_data.tobytes()
    return [data[s : s + n] if ok else None
            for s, n, ok in zip(cols.value_starts.tolist(), cols.value_lengths.tolist(),
                                cols.value_valid.tolist(), strict=True)]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_copy_values_false_locates_the_values_without_copying_them(codec) -> None:
    """copy_values=False: uncompressed values stay in the input (value_data is the input,
    read-only, kept alive by the columns); a compressed batch has its values copied and
    located the same way; every other column is as with copies."""
    data = b"".join(build(mixed_records(30, seed), base_offset=30 * seed, compression=codec)
                    for seed in range(3))
    buf = bytearray(data)
    copied = logcore.decode_columns(buf)
    views = logcore.decode_columns(memoryview(buf), copy_values=False)
    assert copied.value_starts is None and copied.value_lengths is None
    assert views.value_offsets is None
    assert views.value_starts.dtype == np.int64 and views.value_lengths.dtype == np.int32
    records = [r for b in logcore.iter_batches(data) for r in b]
    assert _views_values(views) == [r.value for r in records]
    for name in ("offsets", "timestamps", "timestamp_types", "key_offsets", "key_valid",
                 "value_valid", "header_counts"):
        assert getattr(views, name).tolist() == getattr(copied, name).tolist(), name
    assert views.key_data.tobytes() == copied.key_data.tobytes()
    if codec == "none":
        assert not views.value_data.flags.writeable
        assert views.value_data.nbytes == len(buf)  # the input itself: no copy
        with pytest.raises(BufferError):
            buf.extend(b"x")  # exported to the columns: the owner cannot resize it
        del views
        buf.extend(b"x")  # released with the columns
    else:
        assert views.value_data.nbytes == copied.value_data.nbytes


def test_copy_values_false_with_no_records() -> None:
    cols = logcore.decode_columns(b"", copy_values=False)
    assert cols.num_records == 0 and cols.value_offsets is None
    assert len(cols.value_starts) == 0 and len(cols.value_lengths) == 0
