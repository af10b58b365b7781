"""Hypothesis properties of the RecordBatch v2 codec (issue 2).

Round trips: arbitrary records, headers, timestamps and codecs survive BatchBuilder ->
RecordBatch iteration, decode_columns and validate_for_append.

Hostile input: truncation at every byte, bit flips, absurd lengths and counts, negative
and over-long varints and plain garbage make every entry point raise CorruptRecordError
(RecordTooLargeError where the contract says), never another exception; a tracemalloc
bound catches allocation from untrusted counts; pytest-timeout catches hangs; and
validate_for_append leaves the buffer untouched whenever it raises.

Runs against whichever implementation is loaded (compiled, or LOGCORE_PUREPYTHON=1).
Example counts are modest: the suite runs twice on a 2-core CI machine.
"""

from __future__ import annotations

import struct
import tracemalloc

import crc32c as crc32c_pkg
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import logcore
from logcore import _compression

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HEADER = struct.Struct(">qiibIhiqqqhii")
SETTINGS = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
MAX_ALLOC = 32 << 20  # generous: inputs here are kilobytes

# --------------------------------------------------------------------------- strategies

keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=3)
# Timestamps whose pairwise differences fit a varlong (as any real producer's do), plus
# the edges: 0, -1 (Kafka's NO_TIMESTAMP) and big values.
timestamps = st.integers(min_value=-(2**61), max_value=2**61) | st.sampled_from(
    [0, -1, 1, 2**61, -(2**61), 1_700_000_000_000]
)
records = st.lists(st.tuples(values, keys, timestamps, headers), min_size=1, max_size=20)


@st.composite
def batch_params(draw):
    return dict(
        compression=draw(st.sampled_from(CODECS)),
        base_offset=draw(st.integers(0, 2**62)),
        timestamp_type=draw(st.sampled_from(["create", "log_append"])),
        producer_id=draw(st.sampled_from([-1, 0, 1, 2**40])),
        producer_epoch=draw(st.sampled_from([-1, 0, 5, 2**15 - 1])),
        base_sequence=draw(st.sampled_from([-1, 0, 7, 2**31 - 1])),
        transactional=draw(st.booleans()),
        is_control=draw(st.booleans()),
        partition_leader_epoch=draw(st.sampled_from([-1, 0, 3, 2**31 - 1])),
    )


def build(recs, **params) -> bytes:
    b = logcore.BatchBuilder(**params)
    for v, k, t, h in recs:
        b.append(v, key=k, timestamp_ms=t, headers=h)
    return b.build()


def fix_crc(buf: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    end = min(len(buf), pos + 12 + max(length, 0))
    if end > pos + 21:
        struct.pack_into(">I", buf, pos + 17, crc32c_pkg.crc32c(bytes(buf[pos + 21 : end])))


# --------------------------------------------------------------------------- the oracle for hostile input

HEADER_PROPS = (
    "base_offset last_offset batch_length partition_leader_epoch magic crc attributes "
    "compression timestamp_type is_transactional is_control last_offset_delta base_timestamp "
    "max_timestamp producer_id producer_epoch base_sequence records_count size_in_bytes"
).split()


def touch_batch(batch) -> None:
    """Header properties never raise; validate/iteration raise only CorruptRecordError."""
    for name in HEADER_PROPS:
        getattr(batch, name)
    assert not hasattr(batch, "__len__")
    valid = batch.is_valid()
    assert isinstance(valid, bool)
    try:
        batch.validate()
    except logcore.CorruptRecordError:
        assert not valid
    else:
        assert valid
    # RecordBatch has no __len__ on purpose: list() would pre-size itself from the
    # untrusted records_count before iteration could object.
    seen = []
    try:
        for r in batch:
            seen.append((r.offset, r.timestamp, r.key, r.value, r.headers, r.timestamp_type))
    except logcore.CorruptRecordError:
        assert not valid, "validate() passed but iteration raised"


def exercise(buf: bytes, max_message_bytes: int = 1 << 20) -> None:
    """Run every decoder over `buf`; only the contract's errors may come out."""
    try:
        batch = logcore.RecordBatch(buf)
    except logcore.CorruptRecordError as exc:
        assert exc.position == 0
    else:
        touch_batch(batch)
        del batch
    try:
        for batch in logcore.iter_batches(buf):
            touch_batch(batch)
    except logcore.CorruptRecordError:
        pass
    batch = None
    try:
        cols = logcore.decode_columns(buf)
    except logcore.CorruptRecordError:
        pass
    else:
        assert cols.key_offsets.shape == (cols.num_records + 1,)
        assert cols.key_offsets[-1] == len(cols.key_data)
        assert cols.value_offsets[-1] == len(cols.value_data)
    mutable = bytearray(buf)
    try:
        info = logcore.validate_for_append(
            mutable, next_offset=5, max_message_bytes=max_message_bytes
        )
    except (logcore.CorruptRecordError, logcore.RecordTooLargeError) as exc:
        assert bytes(mutable) == buf, "validate_for_append modified the buffer and raised"
        assert exc.batch_index is not None and exc.position is not None
        assert 0 <= exc.position <= len(buf)
    else:
        assert info.size_in_bytes == len(buf)
        assert info.first_offset == 5
        # every rewritten batch still carries a correct CRC
        pos = 0
        while pos < len(mutable):
            (length,) = struct.unpack_from(">i", mutable, pos + 8)
            (crc,) = struct.unpack_from(">I", mutable, pos + 17)
            assert crc == crc32c_pkg.crc32c(bytes(mutable[pos + 21 : pos + 12 + length]))
            pos += 12 + length


def exercise_bounded(buf: bytes, **kw) -> None:
    tracemalloc.start()
    try:
        exercise(buf, **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    limit = MAX_ALLOC + 64 * len(buf)
    assert peak < limit, f"peak allocation {peak} bytes for {len(buf)} input bytes"


# --------------------------------------------------------------------------- round trips


@settings(max_examples=60, **SETTINGS)
@given(recs=records, params=batch_params())
def test_builder_iteration_round_trip(recs, params) -> None:
    data = build(recs, **params)
    batch = logcore.RecordBatch(data)
    batch.validate()
    assert batch.compression == params["compression"]
    assert batch.base_offset == params["base_offset"]
    assert batch.partition_leader_epoch == params["partition_leader_epoch"]
    assert batch.is_transactional == params["transactional"]
    assert batch.is_control == params["is_control"]
    assert batch.timestamp_type == params["timestamp_type"]
    assert batch.records_count == len(recs)
    assert batch.base_timestamp == recs[0][2]
    assert batch.max_timestamp == max(r[2] for r in recs)
    log_append = params["timestamp_type"] == "log_append"
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    want = [
        (
            params["base_offset"] + i,
            batch.max_timestamp if log_append else t,
            None if k is None else bytes(k),
            None if v is None else bytes(v),
            [(hk, hv) for hk, hv in h],
        )
        for i, (v, k, t, h) in enumerate(recs)
    ]
    assert got == want


@settings(max_examples=40, **SETTINGS)
@given(
    batches=st.lists(st.tuples(records, batch_params()), min_size=1, max_size=4),
    cut=st.integers(0, 80),
)
def test_decode_columns_round_trip(batches, cut) -> None:
    blobs = [build(r, **p) for r, p in batches]
    buffer = b"".join(blobs) + blobs[0][: min(cut, len(blobs[0]) - 1)]  # plus a truncated tail
    cols = logcore.decode_columns(buffer)
    want = []
    for recs, params in batches:
        if params["is_control"]:
            continue
        max_ts = max(r[2] for r in recs)
        for i, (v, k, t, h) in enumerate(recs):
            ts = max_ts if params["timestamp_type"] == "log_append" else t
            want.append((params["base_offset"] + i, ts, k, v, len(h)))
    assert cols.num_records == len(cols) == len(want)
    ko, vo = cols.key_offsets.tolist(), cols.value_offsets.tolist()
    kd, vd = cols.key_data.tobytes(), cols.value_data.tobytes()
    got = [
        (
            cols.offsets[i].item(),
            cols.timestamps[i].item(),
            kd[ko[i] : ko[i + 1]] if cols.key_valid[i] else None,
            vd[vo[i] : vo[i + 1]] if cols.value_valid[i] else None,
            cols.header_counts[i].item(),
        )
        for i in range(cols.num_records)
    ]
    assert got == want
    assert [b.size_in_bytes for b in logcore.iter_batches(buffer)] == [len(b) for b in blobs]


@settings(max_examples=40, **SETTINGS)
@given(
    batches=st.lists(st.tuples(records, batch_params()), min_size=1, max_size=4),
    next_offset=st.integers(0, 2**62),
    log_append_time=st.none() | st.integers(0, 2**50),
    epoch=st.none() | st.integers(-1, 2**31 - 1),
)
def test_validate_for_append_round_trip(batches, next_offset, log_append_time, epoch) -> None:
    blobs = [build(r, **p) for r, p in batches]
    buf = bytearray(b"".join(blobs))
    info = logcore.validate_for_append(
        buf,
        next_offset=next_offset,
        max_message_bytes=1 << 22,
        log_append_time_ms=log_append_time,
        partition_leader_epoch=epoch,
    )
    total = sum(len(r) for r, _ in batches)
    assert (info.first_offset, info.last_offset) == (next_offset, next_offset + total - 1)
    assert (info.record_count, info.batch_count, info.size_in_bytes) == (
        total,
        len(blobs),
        len(buf),
    )
    first_params, last_params = batches[0][1], batches[-1][1]
    assert info.producer_id == first_params["producer_id"]
    assert info.is_transactional == first_params["transactional"]
    assert info.is_control == first_params["is_control"]
    assert info.first_sequence == first_params["base_sequence"]
    out = list(logcore.iter_batches(buf))
    assert len(out) == len(blobs)
    offset = next_offset
    all_ts = []
    for batch, (recs, _) in zip(out, batches, strict=True):
        batch.validate()
        assert batch.base_offset == offset
        if epoch is not None:
            assert batch.partition_leader_epoch == epoch
        got = list(batch)
        assert [r.offset for r in got] == list(range(offset, offset + len(recs)))
        assert [r.value for r in got] == [v for v, _, _, _ in recs]
        if log_append_time is not None:
            assert batch.timestamp_type == "log_append"
            assert {r.timestamp for r in got} == {log_append_time}
        else:
            # the header max_timestamp agrees with the records (fixed up if needed)
            assert batch.max_timestamp == max(r.timestamp for r in got)
        all_ts += [(r.timestamp, r.offset) for r in got]
        offset += len(recs)
    if log_append_time is None:
        max_ts = max(t for t, _ in all_ts)
        assert info.max_timestamp == max_ts
        exact = min(o for t, o in all_ts if t == max_ts)
        assert info.offset_of_max_timestamp == exact
        # Kafka's shallow offset: the last offset of the batch holding that record
        assert info.shallow_offset_of_max_timestamp == next(
            b.last_offset for b in out if b.base_offset <= exact <= b.last_offset)
        assert info.min_timestamp == min(t for t, _ in all_ts)
    else:
        assert info.max_timestamp == info.min_timestamp == log_append_time
        assert info.offset_of_max_timestamp == next_offset
        assert info.shallow_offset_of_max_timestamp == out[0].last_offset
    seq, delta = last_params["base_sequence"], len(batches[-1][0]) - 1
    assert info.last_sequence == (-1 if seq == -1 else (seq + delta) % 2**31)


# --------------------------------------------------------------------------- hostile input


small_records = st.lists(st.tuples(values, keys, timestamps, headers), min_size=1, max_size=4).map(
    lambda rs: [(None if v is None else v[:40], k, t, h) for v, k, t, h in rs]
)


@settings(max_examples=15, **SETTINGS)
@given(recs=small_records, params=batch_params())
def test_truncation_at_every_byte(recs, params) -> None:
    data = build(recs, **params)
    two = data + data
    for cut in range(len(two)):
        exercise(two[:cut])


@settings(max_examples=60, **SETTINGS)
@given(
    recs=small_records,
    params=batch_params(),
    flips=st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
    fix=st.booleans(),
)
def test_bit_flips(recs, params, flips, fix) -> None:
    buf = bytearray(build(recs, **params))
    for f in flips:
        buf[(f // 8) % len(buf)] ^= 1 << (f % 8)
    if fix:  # let the corruption past the CRC to reach the record parser
        fix_crc(buf)
    exercise_bounded(bytes(buf))


FIELDS = {  # offset, struct format of the header fields worth abusing
    "batch_length": (8, ">i"),
    "magic": (16, ">b"),
    "attributes": (21, ">h"),
    "last_offset_delta": (23, ">i"),
    "records_count": (57, ">i"),
}
int32s = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([-1, 0, 1, 48, 49, 2**31 - 1, -(2**31)])


@settings(max_examples=80, **SETTINGS)
@given(
    recs=small_records,
    params=batch_params(),
    field=st.sampled_from(sorted(FIELDS)),
    value=int32s,
    max_message_bytes=st.sampled_from([1 << 20, 61, 100, 500]),
)
def test_absurd_header_fields(recs, params, field, value, max_message_bytes) -> None:
    buf = bytearray(build(recs, **params))
    off, fmt = FIELDS[field]
    lo, hi = (
        (-128, 127)
        if fmt == ">b"
        else (-(2**15), 2**15 - 1)
        if fmt == ">h"
        else (-(2**31), 2**31 - 1)
    )
    struct.pack_into(fmt, buf, off, min(max(value, lo), hi))
    fix_crc(buf)
    exercise_bounded(bytes(buf), max_message_bytes=max_message_bytes)


# Record sections assembled from varint-level tokens: negative and huge lengths,
# over-long (6..12 byte) varints, 10-byte varlongs, truncated varints, raw bytes.
def _zz(n: int) -> bytes:
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


tokens = st.one_of(
    st.integers(INT64_MIN, INT64_MAX).map(_zz),
    st.integers(-3, 40).map(_zz),
    st.sampled_from([-1, -2, -(2**31), 2**31 - 1, 2**31, 2**40, INT64_MAX, INT64_MIN]).map(_zz),
    st.integers(5, 12).map(lambda k: b"\x80" * (k - 1) + b"\x01"),  # over-long varints
    st.just(b"\xff" * 9 + b"\x7f"),  # 10 bytes, overflows 64 bits
    st.just(b"\x80"),  # truncated
    st.binary(max_size=8),
)


@st.composite
def tokenized_batches(draw):
    section = b"".join(draw(st.lists(tokens, max_size=30)))
    codec = draw(st.sampled_from([0, 0, 1, 4]))
    if codec:
        section = _compression.compress(codec, section)
    count = draw(st.integers(-2, 6) | int32s)
    last_delta = draw(st.sampled_from([max(count - 1, -(2**31)), 0, -1]) | int32s)
    attrs = codec | draw(st.sampled_from([0, 0x08, 0x10, 0x20]))
    out = bytearray(61) + section
    HEADER.pack_into(
        out, 0, 0, len(out) - 12, -1, 2, 0, attrs, last_delta, 100, 100, -1, -1, -1, count
    )
    fix_crc(out)
    return bytes(out)


@settings(max_examples=150, **SETTINGS)
@given(data=tokenized_batches())
@example(data=bytes(61))
def test_tokenized_record_sections(data) -> None:
    exercise_bounded(data)


@settings(max_examples=80, **SETTINGS)
@given(data=tokenized_batches(), tail=st.binary(max_size=100))
def test_batch_followed_by_garbage(data, tail) -> None:
    exercise_bounded(data + tail)


@settings(max_examples=100, **SETTINGS)
@given(data=st.binary(max_size=400))
def test_garbage_bytes(data) -> None:
    exercise_bounded(data)


@settings(max_examples=60, **SETTINGS)
@given(garbage=st.binary(min_size=0, max_size=200), count=int32s)
def test_garbage_after_valid_header(garbage, count) -> None:
    # A well-formed header with a correct CRC over arbitrary record bytes.
    out = bytearray(61) + garbage
    HEADER.pack_into(
        out, 0, 0, len(out) - 12, -1, 2, 0, 0, max(count, 1) - 1, 0, 0, -1, -1, -1, count
    )
    fix_crc(out)
    exercise_bounded(bytes(out))


# --------------------------------------------------------------------------- varints and CRC


@settings(max_examples=200, **SETTINGS)
@given(n=st.integers(INT64_MIN, INT64_MAX), tail=st.binary(max_size=4))
def test_varint_round_trip(n, tail) -> None:
    enc = logcore.encode_varint(n)
    assert 1 <= len(enc) <= 10
    assert enc == _zz(n)
    assert logcore.decode_varint(enc + tail) == (n, len(enc))
    assert logcore.zigzag_decode(logcore.zigzag_encode(n)) == n


@settings(max_examples=200, **SETTINGS)
@given(n=st.integers(0, 2**64 - 1), pad=st.binary(max_size=3))
def test_unsigned_varint_round_trip(n, pad) -> None:
    enc = logcore.encode_unsigned_varint(n)
    assert logcore.decode_unsigned_varint(pad + enc, len(pad)) == (n, len(pad) + len(enc))


@settings(max_examples=300, **SETTINGS)
@given(data=st.binary(max_size=14), pos=st.integers(0, 15))
def test_varint_decoders_on_arbitrary_bytes(data, pos) -> None:
    for decode in (logcore.decode_varint, logcore.decode_unsigned_varint):
        try:
            value, nxt = decode(data, pos)
        except logcore.CorruptRecordError:
            continue
        assert pos < nxt <= min(len(data), pos + 10)
        if decode is logcore.decode_varint:
            assert INT64_MIN <= value <= INT64_MAX
            assert logcore.decode_varint(logcore.encode_varint(value)) == (
                value,
                len(logcore.encode_varint(value)),
            )
        else:
            assert 0 <= value < 2**64


@settings(max_examples=100, **SETTINGS)
@given(a=st.binary(max_size=300), b=st.binary(max_size=300))
def test_crc32c_matches_package_and_continues(a, b) -> None:
    assert logcore.crc32c(a + b) == crc32c_pkg.crc32c(a + b)
    assert logcore.crc32c(b, logcore.crc32c(a)) == logcore.crc32c(a + b)
