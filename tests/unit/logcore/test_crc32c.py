"""logcore.crc32c: known answers (RFC 3720), running CRCs, every buffer type, and
agreement with the independent `crc32c` package on random data."""

from __future__ import annotations

import json
import mmap
import pathlib
import random

import crc32c as crc32c_pkg
import pytest

import logcore

VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "vectors" / "crc32c.json").read_text()
)


@pytest.mark.parametrize("vec", VECTORS, ids=[v["name"] for v in VECTORS])
def test_known_answers(vec) -> None:
    assert logcore.crc32c(bytes.fromhex(vec["data_hex"])) == vec["crc"]


def test_rfc3720_values_spelled_out() -> None:
    # The two the brief names, independent of the vector file.
    assert logcore.crc32c(bytes(32)) == 0x8A9136AA
    assert logcore.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 4095, 5000, 70001])
def test_matches_crc32c_package_on_random_data(size: int) -> None:
    rnd = random.Random(size)
    data = rnd.randbytes(size)
    assert logcore.crc32c(data) == crc32c_pkg.crc32c(data)


def test_matches_crc32c_package_on_large_buffer() -> None:
    # Large enough to cross any GIL-release / hardware threshold of the compiled codec.
    data = random.Random(7).randbytes(1 << 20)
    assert logcore.crc32c(data) == crc32c_pkg.crc32c(data)


@pytest.mark.parametrize("split", [0, 1, 5, 8, 13, 100])
def test_running_crc_continues(split: int) -> None:
    data = random.Random(split).randbytes(200)
    first = logcore.crc32c(data[:split])
    assert logcore.crc32c(data[split:], first) == logcore.crc32c(data)
    # Same convention as the crc32c package's crc32c(data, value).
    assert logcore.crc32c(data[split:], first) == crc32c_pkg.crc32c(data[split:], first)


def test_running_crc_keyword() -> None:
    assert logcore.crc32c(b"456789", crc=logcore.crc32c(b"123")) == 0xE3069283


def test_accepts_every_buffer_type(tmp_path) -> None:
    data = b"123456789"
    assert logcore.crc32c(bytearray(data)) == 0xE3069283
    assert logcore.crc32c(memoryview(data)) == 0xE3069283
    assert logcore.crc32c(memoryview(b"xx" + data + b"yy")[2:-2]) == 0xE3069283
    path = tmp_path / "f"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert logcore.crc32c(m) == 0xE3069283


def test_empty_input_keeps_crc() -> None:
    assert logcore.crc32c(b"") == 0
    assert logcore.crc32c(b"", 0xDEADBEEF) == 0xDEADBEEF


def test_rejects_non_buffers() -> None:
    with pytest.raises(TypeError):
        logcore.crc32c("123456789")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        logcore.crc32c(12345)  # type: ignore[arg-type]


def test_result_is_unsigned_32_bit() -> None:
    for i in range(50):
        c = logcore.crc32c(random.Random(i).randbytes(i))
        assert 0 <= c <= 0xFFFFFFFF
