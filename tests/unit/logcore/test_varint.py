"""logcore varints and zig-zag: known-answer edges, round trips, and rejection of
truncated, over-long and overflowing encodings."""

from __future__ import annotations

import json
import pathlib

import pytest

import logcore

VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "vectors" / "varint.json").read_text()
)
SIGNED = VECTORS["signed"]
UNSIGNED = VECTORS["unsigned"]
INVALID = VECTORS["invalid"]

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


@pytest.mark.parametrize("vec", SIGNED, ids=[str(v["value"]) for v in SIGNED])
def test_signed_known_answers(vec) -> None:
    raw = bytes.fromhex(vec["hex"])
    assert logcore.encode_varint(vec["value"]) == raw
    assert logcore.decode_varint(raw) == (vec["value"], len(raw))


@pytest.mark.parametrize("vec", UNSIGNED, ids=[str(v["value"]) for v in UNSIGNED])
def test_unsigned_known_answers(vec) -> None:
    raw = bytes.fromhex(vec["hex"])
    assert logcore.encode_unsigned_varint(vec["value"]) == raw
    assert logcore.decode_unsigned_varint(raw) == (vec["value"], len(raw))


def test_encoding_lengths() -> None:
    # int32 extremes take 5 bytes, int64 extremes 10 (the record format's limits).
    assert len(logcore.encode_varint(2**31 - 1)) == 5
    assert len(logcore.encode_varint(-(2**31))) == 5
    assert len(logcore.encode_varint(INT64_MAX)) == 10
    assert len(logcore.encode_varint(INT64_MIN)) == 10
    assert len(logcore.encode_unsigned_varint(UINT64_MAX)) == 10


@pytest.mark.parametrize("vec", INVALID, ids=[v["name"] for v in INVALID])
def test_invalid_encodings_raise_corrupt(vec) -> None:
    raw = bytes.fromhex(vec["hex"])
    with pytest.raises(logcore.CorruptRecordError):
        logcore.decode_unsigned_varint(raw)
    with pytest.raises(logcore.CorruptRecordError):
        logcore.decode_varint(raw)


def test_decode_at_position_and_in_any_buffer() -> None:
    buf = b"\xaa\xbb" + logcore.encode_varint(-300) + logcore.encode_varint(5) + b"\xcc"
    value, pos = logcore.decode_varint(buf, 2)
    assert value == -300
    value2, pos2 = logcore.decode_varint(buf, pos)
    assert (value2, pos2) == (5, len(buf) - 1)
    for kind in (bytearray, memoryview):
        assert logcore.decode_varint(kind(buf), 2) == (-300, pos)


def test_decode_ignores_bytes_after_varint() -> None:
    assert logcore.decode_varint(b"\x02\xff\xff") == (1, 1)
    assert logcore.decode_unsigned_varint(b"\xac\x02\x80") == (300, 2)


def test_decode_past_end_raises_corrupt() -> None:
    with pytest.raises(logcore.CorruptRecordError):
        logcore.decode_varint(b"\x02", 1)
    with pytest.raises(logcore.CorruptRecordError):
        logcore.decode_varint(b"\x02", 5)


def test_non_minimal_encodings_within_10_bytes_decode() -> None:
    # Kafka's readers accept redundant continuation groups as long as they fit 10 bytes.
    assert logcore.decode_unsigned_varint(b"\x81\x80\x80\x00") == (1, 4)
    assert logcore.decode_varint(b"\x82\x00") == (1, 2)


@pytest.mark.parametrize(
    "value", [0, 1, -1, 2, -2, 2**31 - 1, -(2**31), INT64_MAX, INT64_MIN, 12345678901]
)
def test_zigzag_round_trip(value: int) -> None:
    z = logcore.zigzag_encode(value)
    assert 0 <= z <= UINT64_MAX
    assert logcore.zigzag_decode(z) == value


def test_zigzag_known_values() -> None:
    assert [logcore.zigzag_encode(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    assert logcore.zigzag_encode(INT64_MAX) == UINT64_MAX - 1
    assert logcore.zigzag_encode(INT64_MIN) == UINT64_MAX
    assert logcore.zigzag_decode(UINT64_MAX) == INT64_MIN


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, 2**80, -(2**80)])
def test_signed_encoders_reject_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        logcore.encode_varint(value)
    with pytest.raises(ValueError):
        logcore.zigzag_encode(value)


@pytest.mark.parametrize("value", [-1, UINT64_MAX + 1, 2**100])
def test_unsigned_encoder_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        logcore.encode_unsigned_varint(value)


def test_corrupt_record_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        logcore.decode_varint(b"\x80")
