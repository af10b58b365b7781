"""Differential tests: the compiled codec against its pure-Python twin.

Both implementations follow one contract (logcore._protocols); logcore._ref is the oracle. For
the same input, every public operation must give the same value, or raise the same
error class (messages may differ). Inputs are arbitrary bytes, valid batches built from
random records, and valid batches with mutations (bit flips, truncation, absurd lengths
and counts, inserted bytes), with and without the CRC fixed up afterwards so that
mutations also reach the record parser.

This file compares the two explicitly, so it imports both sides directly (the only
logcore tests that may); it skips when either side is not available.
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from logcore import _protocols  # noqa: E402

for _unit in _protocols.CODEC_UNITS:
    pytest.importorskip(f"logcore._{_unit}")
C_batch = _protocols.codec_module("c")
C_crc = pytest.importorskip("logcore._crc32c")
C_varint = pytest.importorskip("logcore._varint")
R_batch = _protocols.codec_module("python")
R_crc = pytest.importorskip("logcore._ref.crc32c")
R_varint = pytest.importorskip("logcore._ref.varint")
from logcore.errors import CorruptRecordError  # noqa: E402

# CI keeps the run short (the whole suite shares 2 cores); a deeper local run:
# LOGCORE_DIFF_EXAMPLES=3000 pytest tests/property/test_differential.py
SETTINGS = settings(
    max_examples=int(os.environ.get("LOGCORE_DIFF_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COLUMN_NAMES = (
    "offsets",
    "timestamps",
    "timestamp_types",
    "key_offsets",
    "value_offsets",
    "key_data",
    "value_data",
    "key_valid",
    "value_valid",
    "header_counts",
)
HEADER_FIELDS = (
    "base_offset",
    "last_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "records_count",
    "size_in_bytes",
)
APPEND_FIELDS = (
    "first_offset",
    "last_offset",
    "record_count",
    "max_timestamp",
    "offset_of_max_timestamp",
    "shallow_offset_of_max_timestamp",
    "min_timestamp",
    "size_in_bytes",
    "batch_count",
    "producer_id",
    "producer_epoch",
    "first_sequence",
    "last_sequence",
    "is_transactional",
    "is_control",
    "timestamp_type",
)


# ---------------------------------------------------------------------------------------
# Outcomes: a value, or the class of the error raised
# ---------------------------------------------------------------------------------------


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # the class is what is compared
        return ("error", type(exc))


def assert_same(c, r, what=""):
    assert c[0] == r[0], f"{what}: compiled {c}, reference {r}"
    if c[0] == "error":
        assert c[1] is r[1], f"{what}: compiled raised {c[1]}, reference {r[1]}"
    else:
        assert c[1] == r[1], f"{what}: compiled {c[1]!r} != reference {r[1]!r}"


def record_tuple(rec):
    return (rec.offset, rec.timestamp, rec.timestamp_type, rec.key, rec.value, rec.headers)


def batch_summary(batch):
    """Everything observable about one batch view, errors included."""
    header = tuple(getattr(batch, f) for f in HEADER_FIELDS)
    records = outcome(lambda: [record_tuple(r) for r in batch])
    valid = outcome(batch.validate)
    return header, records, valid, batch.is_valid()


def decode_one(mod, data):
    return batch_summary(mod.RecordBatch(data))


def iter_all(mod, data):
    return [batch_summary(b) for b in mod.iter_batches(data)]


def columns(mod, data):
    cols = mod.decode_columns(data)
    out = {}
    for name in COLUMN_NAMES:
        arr = getattr(cols, name)
        out[name] = (str(arr.dtype), arr.tolist())
    out["num_records"] = cols.num_records
    out["len"] = len(cols)
    return out


def append(mod, data, kwargs):
    buf = bytearray(data)
    res = outcome(mod.validate_for_append, buf, **kwargs)
    if res[0] == "ok":
        info = res[1]
        return ("ok", (tuple(getattr(info, f) for f in APPEND_FIELDS), bytes(buf)))
    # on error the buffer must be untouched
    assert bytes(buf) == bytes(data), f"{mod.validate_for_append.__module__} wrote into the buffer on error"
    return res


def compare_all(data: bytes) -> None:
    """Every read-side operation on the same bytes, compiled vs reference."""
    assert_same(outcome(decode_one, C_batch, data), outcome(decode_one, R_batch, data), "RecordBatch")
    assert_same(outcome(iter_all, C_batch, data), outcome(iter_all, R_batch, data), "iter_batches")
    assert_same(outcome(columns, C_batch, data), outcome(columns, R_batch, data), "decode_columns")


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

maybe_bytes = st.none() | st.binary(max_size=40)
headers_st = st.lists(
    st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=12)), max_size=3
)
record_st = st.tuples(
    maybe_bytes,  # key
    maybe_bytes,  # value
    st.integers(min_value=-(2**40), max_value=2**41),  # timestamp
    headers_st,
)


@st.composite
def batches(draw, codecs=CODECS):
    """A valid batch built by the reference builder from random records and header fields."""
    kwargs = dict(
        compression=draw(st.sampled_from(codecs)),
        base_offset=draw(st.integers(min_value=0, max_value=2**50)),
        timestamp_type=draw(st.sampled_from(["create", "log_append"])),
        producer_id=draw(st.integers(min_value=-1, max_value=2**40)),
        producer_epoch=draw(st.integers(min_value=-1, max_value=2**15 - 1)),
        base_sequence=draw(st.sampled_from([-1, 0, 7, 2**31 - 3])),
        transactional=draw(st.booleans()),
        is_control=draw(st.booleans()),
        partition_leader_epoch=draw(st.integers(min_value=-1, max_value=1000)),
    )
    records = draw(st.lists(record_st, min_size=1, max_size=8))
    builder = R_batch.BatchBuilder(**kwargs)
    for key, value, ts, headers in records:
        builder.append(value, key=key, timestamp_ms=ts, headers=headers)
    return builder.build(), kwargs, records


def fix_crcs(buf: bytearray) -> bytearray:
    """Recompute the CRC of every batch whose framing still holds, so that a mutation of
    a record is found by the record parser rather than by the CRC check."""
    pos = 0
    while len(buf) - pos >= 61:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        size = 12 + length
        if length < 49 or pos + size > len(buf):
            break
        struct.pack_into(">I", buf, pos + 17, R_crc.crc32c(bytes(buf[pos + 21 : pos + size])))
        pos += size
    return buf


ABSURD_INTS = [0, 1, -1, -2, 5, 6, 48, 49, 127, 128, 2**31 - 1, -(2**31), 2**16, 61]


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """data with one or two mutations, CRC optionally fixed."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(min_value=1, max_value=2))):
        if not buf:
            break
        kind = draw(st.sampled_from(["flip", "byte", "truncate", "insert", "int32", "varint"]))
        i = draw(st.integers(min_value=0, max_value=len(buf) - 1))
        if kind == "flip":
            buf[i] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif kind == "byte":
            buf[i] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "truncate":
            del buf[i:]
        elif kind == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "int32" and i + 4 <= len(buf):
            struct.pack_into(">i", buf, i, draw(st.sampled_from(ABSURD_INTS)))
        elif kind == "varint":
            # a long or absurd varint in place of whatever was there
            blob = draw(
                st.sampled_from(
                    [b"\xff" * 5 + b"\x01", b"\xff" * 10 + b"\x01", b"\x80" * 4 + b"\x10", b"\x03"]
                )
            )
            buf[i : i + len(blob)] = blob
    if draw(st.booleans()):
        fix_crcs(buf)
    return bytes(buf)


# ---------------------------------------------------------------------------------------
# CRC-32C and varints
# ---------------------------------------------------------------------------------------


@SETTINGS
@given(st.binary(max_size=2000), st.integers(min_value=0, max_value=2**32 - 1))
def test_crc32c_matches(data, start) -> None:
    assert C_crc.crc32c(data) == R_crc.crc32c(data)
    assert C_crc.crc32c(data, start) == R_crc.crc32c(data, start)
    assert C_crc.crc32c(bytearray(data), start) == R_crc.crc32c(memoryview(data), start)


def _buffer_id(value) -> str:
    """A test id that is the same in every process (pytest-xdist workers compare them):
    a memoryview's repr holds its address, so describe its shape instead."""
    if isinstance(value, tuple):
        return "-".join(_buffer_id(v) for v in value)
    if isinstance(value, memoryview):
        return f"memoryview-{value.format}-{value.shape}-{value.strides}-{value.nbytes}"
    return repr(value)


def _odd_buffers():
    """Buffers of every shape the byte-buffer rules sort out (flat bytes, strided, 2-D,
    wider items, empty and one-item strided views)."""
    import array

    return [
        memoryview(b"abcdef")[::2],
        memoryview(b"abcdef")[::-1],
        memoryview(bytes(12)).cast("B", (3, 4)),
        array.array("i", [1, 2]),
        array.array("B", b"ab"),
        array.array("b", b"ab"),
        memoryview(b"abc").cast("c"),
        memoryview(b"")[::2],
        memoryview(b"a")[::2],
        memoryview(b"xyz")[1:],
        bytearray(b"xy"),
    ]


@pytest.mark.parametrize(
    "args",
    [(b"abc", -1), (b"abc", 2**32), (b"abc", 1.5), (b"abc", True), (None, 0), ("abc", 0),
     (bytearray(b"abc"), 5)] + [(b, 0) for b in _odd_buffers()],
    ids=_buffer_id,
)
def test_crc32c_arguments(args) -> None:
    assert_same(outcome(C_crc.crc32c, *args), outcome(R_crc.crc32c, *args), "crc32c arguments")


@pytest.mark.parametrize("buf", _odd_buffers(), ids=_buffer_id)
def test_builder_buffer_shapes(buf) -> None:
    def run(mod):
        b = mod.BatchBuilder()
        b.append(buf, key=buf, timestamp_ms=1, headers=[("h", buf)])
        b.append_many([buf], keys=[buf], timestamps_ms=[2])
        return b.build()

    assert_same(outcome(run, C_batch), outcome(run, R_batch), "builder buffer shapes")


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 767, 768, 769, 24575, 24576, 24577, 70001])
def test_crc32c_block_boundaries(n) -> None:
    # the interleaved hardware loop changes strategy at 3 x 256 and 3 x 8192 bytes
    data = bytes((i * 131 + 7) & 0xFF for i in range(n + 3))
    for off in (0, 1, 3):
        chunk = data[off : off + n]
        assert C_crc.crc32c(chunk) == R_crc.crc32c(chunk)
        assert C_crc.crc32c_portable(chunk) == R_crc.crc32c(chunk)


@SETTINGS
@given(st.integers(min_value=-(2**64), max_value=2**65))
def test_varint_encoders_match(n) -> None:
    for name in ("encode_varint", "encode_unsigned_varint", "zigzag_encode", "zigzag_decode"):
        assert_same(
            outcome(getattr(C_varint, name), n), outcome(getattr(R_varint, name), n), name
        )


@SETTINGS
@given(st.binary(max_size=24), st.integers(min_value=-2, max_value=26))
def test_varint_decoders_match(data, pos) -> None:
    for name in ("decode_varint", "decode_unsigned_varint"):
        assert_same(
            outcome(getattr(C_varint, name), data, pos),
            outcome(getattr(R_varint, name), data, pos),
            name,
        )


# ---------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------


@SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data) -> None:
    compare_all(data)
    args = dict(next_offset=5, max_message_bytes=10**6)
    assert_same(append(C_batch, data, args), append(R_batch, data, args), "validate_for_append")


@SETTINGS
@given(batches())
def test_valid_batches(built) -> None:
    data, kwargs, records = built
    compare_all(data)
    compare_all(data + b"\x00" * 20)  # trailing bytes: ignored / truncated batch
    # the compiled builder writes the same bytes from the same inputs
    builder = C_batch.BatchBuilder(**kwargs)
    for key, value, ts, headers in records:
        builder.append(value, key=key, timestamp_ms=ts, headers=headers)
    built_c = builder.build()
    if kwargs["compression"] == "none":
        assert built_c == data
    else:  # compressors may differ in bytes; the records may not
        assert batch_summary(C_batch.RecordBatch(built_c))[2] == batch_summary(
            R_batch.RecordBatch(data)
        )[2]


@SETTINGS
@given(st.lists(batches(), min_size=1, max_size=3), st.data())
def test_concatenated_batches(built, data) -> None:
    blob = b"".join(b for b, _, _ in built)
    cut = data.draw(st.integers(min_value=0, max_value=len(blob)))
    compare_all(blob)
    compare_all(blob[:cut])


@SETTINGS
@given(st.lists(batches(), min_size=1, max_size=3), st.data())
def test_mutated_batches(built, data) -> None:
    blob = b"".join(b for b, _, _ in built)
    bad = data.draw(mutated(blob))
    compare_all(bad)


@SETTINGS
@given(
    st.lists(batches(), min_size=1, max_size=3),
    st.integers(min_value=0, max_value=2**40),
    st.sampled_from([10**7, 300, 120]),
    st.none() | st.integers(min_value=0, max_value=2**45),
    st.none() | st.integers(min_value=-1, max_value=100),
    st.booleans(),
    st.data(),
)
def test_validate_for_append(built, next_offset, max_bytes, lat, epoch, mutate, data) -> None:
    blob = b"".join(b for b, _, _ in built)
    if mutate:
        blob = data.draw(mutated(blob))
    kwargs = dict(
        next_offset=next_offset,
        max_message_bytes=max_bytes,
        log_append_time_ms=lat,
        partition_leader_epoch=epoch,
    )
    c = append(C_batch, blob, kwargs)
    r = append(R_batch, blob, kwargs)
    assert_same(c, r, "validate_for_append")
    if c[0] == "ok":
        # the rewritten buffer is a valid record set that both sides read alike
        compare_all(c[1][1])


def test_validate_for_append_read_only_buffer() -> None:
    builder = R_batch.BatchBuilder()
    builder.append(b"v", key=b"k", timestamp_ms=1)
    blob = builder.build()
    for buf in (blob, memoryview(blob)):
        assert_same(
            outcome(C_batch.validate_for_append, buf, next_offset=0, max_message_bytes=10**6),
            outcome(R_batch.validate_for_append, buf, next_offset=0, max_message_bytes=10**6),
            "read-only buffer",
        )


@SETTINGS
@given(batches(codecs=["none"]), st.data())
def test_buffer_types_agree(built, data) -> None:
    blob, _, _ = built
    kind = data.draw(st.sampled_from(["bytes", "bytearray", "memoryview"]))
    buf = {"bytes": blob, "bytearray": bytearray(blob), "memoryview": memoryview(blob)}[kind]
    assert_same(outcome(decode_one, C_batch, buf), outcome(decode_one, R_batch, blob), kind)
    assert_same(outcome(columns, C_batch, buf), outcome(columns, R_batch, blob), kind)


# ---------------------------------------------------------------------------------------
# Builder inputs and the shared typed surface
# ---------------------------------------------------------------------------------------


odd_values = st.one_of(
    st.none(),
    st.binary(max_size=8),
    st.binary(max_size=8).map(bytearray),
    st.binary(max_size=8).map(memoryview),
    st.text(max_size=3),
    st.integers(),
    st.booleans(),
)


@SETTINGS
@given(odd_values, odd_values, st.one_of(st.none(), st.integers(), st.floats(), st.booleans()))
def test_builder_argument_checks(value, key, ts) -> None:
    def run(mod):
        b = mod.BatchBuilder()
        b.append(value, key=key, timestamp_ms=ts if ts is not None else 1000)
        return b.build()

    assert_same(outcome(run, C_batch), outcome(run, R_batch), "append arguments")


@SETTINGS
@given(
    st.lists(st.binary(max_size=30), max_size=20),
    st.booleans(),
    st.integers(min_value=0, max_value=2**41),
)
def test_append_many_matches_append(values, with_keys, ts0) -> None:
    keys = [v[:3] for v in values] if with_keys else None
    stamps = [ts0 + i for i in range(len(values))]

    def run(mod):
        b = mod.BatchBuilder()
        b.append_many(values, keys=keys, timestamps_ms=stamps)
        return len(b), b.estimated_size(), b.build()

    assert_same(outcome(run, C_batch), outcome(run, R_batch), "append_many")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"compression": "brotli"},
        {"compression": "gzip", "compression_level": 10},
        {"compression": "snappy", "compression_level": 1},
        {"timestamp_type": "wall"},
        {"producer_epoch": 2**15},
        {"base_sequence": 2**31},
        {"base_offset": True},
    ],
)
def test_builder_config_errors(kwargs) -> None:
    assert_same(
        outcome(C_batch.BatchBuilder, **kwargs), outcome(R_batch.BatchBuilder, **kwargs), "config"
    )
    assert_same(outcome(lambda: C_batch.BatchBuilder().build()),
                outcome(lambda: R_batch.BatchBuilder().build()), "empty build")


def test_both_sides_satisfy_the_protocols() -> None:
    for mod in (C_batch, R_batch):
        b = mod.BatchBuilder()
        assert isinstance(b, _protocols.BatchBuilderProtocol)
        b.append(b"v", key=b"k", timestamp_ms=5, headers=[("h", b"x")])
        data = b.build()
        batch = mod.RecordBatch(data)
        assert isinstance(batch, _protocols.RecordBatchProtocol)
        assert isinstance(next(iter(batch)), _protocols.RecordProtocol)
        assert isinstance(mod.decode_columns(data), _protocols.ColumnsProtocol)
        info = mod.validate_for_append(bytearray(data), next_offset=0, max_message_bytes=10**6)
        assert isinstance(info, _protocols.AppendInfoProtocol)


def test_corrupt_error_is_a_value_error() -> None:
    # callers catch ValueError; both sides raise the logcore class
    with pytest.raises(CorruptRecordError):
        C_batch.RecordBatch(b"\x00" * 10)
    with pytest.raises(CorruptRecordError):
        R_batch.RecordBatch(b"\x00" * 10)
    assert np.dtype(np.int64)  # numpy present for the column comparisons


@pytest.mark.parametrize("corrupt_last", [False, True])
def test_columns_past_the_unchecked_limit(corrupt_last) -> None:
    """decode_columns walks compressed sections early once 64 MiB of them wait for the
    fill pass; the answer (or the error class) must not change. Few, large records keep
    the reference side fast."""
    value = bytes(4 << 20)  # 4 MiB of zeros: zstd makes it tiny

    def batch(n):
        b = C_batch.BatchBuilder(compression="zstd")
        b.append_many([value] * n, keys=[b"k"] * n, timestamps_ms=list(range(n)))
        return b.build()

    blob = batch(12) + batch(12)  # 2 x 48 MiB decompressed: the second passes 64 MiB
    if corrupt_last:
        # a record count one too high: the second section then lacks a record
        raw = bytearray(blob[len(blob) // 2 :])
        struct.pack_into(">i", raw, 57, 13)
        struct.pack_into(">i", raw, 23, 12)
        fix_crcs(raw)
        blob = blob[: len(blob) // 2] + bytes(raw)
    c = outcome(lambda: C_batch.decode_columns(blob))
    r = outcome(lambda: R_batch.decode_columns(blob))
    assert c[0] == r[0]
    if c[0] == "error":
        assert c[1] is r[1] is CorruptRecordError
    else:
        assert c[1].num_records == r[1].num_records == 24
        assert np.array_equal(c[1].value_offsets, r[1].value_offsets)
        assert c[1].value_data.shape == r[1].value_data.shape


def test_every_compiled_unit_has_a_ref_twin_of_the_same_name() -> None:
    """Each .pyx of logcore has a _ref module of the same name, and the codec's public
    names come from the same unit on both sides (codec_module gathers them)."""
    import importlib
    import pathlib

    import logcore

    src = pathlib.Path(logcore.__file__).parent
    for pyx in sorted(src.glob("_*.pyx")):
        assert (src / "_ref" / (pyx.stem[1:] + ".py")).is_file(), f"{pyx.name} has no _ref twin"
    for unit, names in _protocols.CODEC_UNITS.items():
        compiled = importlib.import_module(f"logcore._{unit}")
        twin = importlib.import_module(f"logcore._ref.{unit}")
        for name in names:
            assert getattr(compiled, name).__name__ == getattr(twin, name).__name__ == name
            assert getattr(C_batch, name) is getattr(compiled, name)
            assert getattr(R_batch, name) is getattr(twin, name)
    with pytest.raises(ValueError, match="unknown implementation"):
        _protocols.codec_module("java")
