"""pylog.protocol.codec: primitive readers/writers, bounds, records pass-through, frames."""

from __future__ import annotations

import struct
import uuid

import pytest

from pylog.errors import LocalProtocolError, RemoteProtocolError
from pylog.protocol import codec


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_known_answers(value: int, encoded: bytes) -> None:
    assert codec.uvarint_bytes(value) == encoded
    buf = bytearray()
    codec.write_uvarint(buf, value)
    assert bytes(buf) == encoded
    assert codec.read_uvarint(encoded + b"\xee", 0) == (value, len(encoded))
    assert codec.read_uvarint(memoryview(b"\x00" + encoded), 1) == (value, 1 + len(encoded))


def test_uvarint_bounds() -> None:
    with pytest.raises(RemoteProtocolError, match="longer than 5 bytes"):
        codec.read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(IndexError):  # turned into RemoteProtocolError by Message.decode_from
        codec.read_uvarint(b"\x80\x80", 0)
    for bad in (-1, 1 << 32):
        with pytest.raises(LocalProtocolError):
            codec.uvarint_bytes(bad)


def test_strings_both_forms_and_null() -> None:
    for write, read, null in (
        (codec.write_nstring, codec.read_nstring, b"\xff\xff"),
        (codec.write_ncstring, codec.read_ncstring, b"\x00"),
    ):
        buf = bytearray()
        write(buf, "héllo")
        write(buf, None)
        write(buf, "")
        view = memoryview(bytes(buf))
        s, p = read(view, 0)
        assert s == "héllo"
        n, p = read(view, p)
        assert n is None
        e, p = read(view, p)
        assert e == "" and p == len(buf)
        assert null in bytes(buf)
    buf = bytearray()
    codec.write_string(buf, "ab")
    assert bytes(buf) == b"\x00\x02ab"
    buf = bytearray()
    codec.write_cstring(buf, "ab")
    assert bytes(buf) == b"\x03ab"


def test_non_nullable_strings_refuse_null_and_lengths_are_bounded() -> None:
    with pytest.raises(RemoteProtocolError, match="non-nullable string"):
        codec.read_string(b"\xff\xff", 0)
    with pytest.raises(RemoteProtocolError, match="non-nullable compact string"):
        codec.read_cstring(b"\x00", 0)
    with pytest.raises(RemoteProtocolError, match="negative length -2"):
        codec.read_nstring(b"\xff\xfe", 0)
    with pytest.raises(RemoteProtocolError, match="overruns"):
        codec.read_string(b"\x00\x05abc", 0)
    with pytest.raises(RemoteProtocolError, match="overruns"):
        codec.read_cstring(b"\x06abc", 0)
    with pytest.raises(LocalProtocolError, match="int16 length"):
        codec.write_string(bytearray(), "x" * 40000)


def test_bytes_forms() -> None:
    buf = bytearray()
    codec.write_nbytes(buf, b"\x01\x02")
    codec.write_nbytes(buf, None)
    codec.write_ncbytes(buf, memoryview(b"xyz"))
    codec.write_ncbytes(buf, None)
    data = bytes(buf)
    v, p = codec.read_nbytes(data, 0)
    assert v == b"\x01\x02" and type(v) is bytes
    v, p = codec.read_nbytes(data, p)
    assert v is None
    v, p = codec.read_ncbytes(data, p)
    assert v == b"xyz"
    v, p = codec.read_ncbytes(data, p)
    assert v is None and p == len(data)
    with pytest.raises(RemoteProtocolError):
        codec.read_bytes(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(RemoteProtocolError):
        codec.read_bytes(b"\xff\xff\xff\xff", 0)


def test_array_counts_are_bounded_before_allocation() -> None:
    # 2**31-1 elements announced with 4 bytes left: refused at once, nothing allocated.
    with pytest.raises(RemoteProtocolError, match="array of length 2147483647"):
        codec.read_count(b"\x7f\xff\xff\xff\x00\x00\x00\x00", 0, 1)
    with pytest.raises(RemoteProtocolError):
        codec.read_count(b"\x00\x00\x00\x03" + b"\x00" * 11, 0, 4)  # needs 12
    assert codec.read_count(b"\x00\x00\x00\x03" + b"\x00" * 12, 0, 4) == (3, 4)
    assert codec.read_ncount(b"\xff\xff\xff\xff", 0, 1) == (-1, 4)
    with pytest.raises(RemoteProtocolError):
        codec.read_ncount(b"\xff\xff\xff\xfe", 0, 1)
    with pytest.raises(RemoteProtocolError, match="null"):
        codec.read_ccount(b"\x00", 0, 1)
    assert codec.read_nccount(b"\x00", 0, 1) == (-1, 1)
    with pytest.raises(RemoteProtocolError):
        codec.read_ccount(b"\xff\xff\xff\xff\x07", 0, 1)


def test_records_decode_is_a_view_of_the_input() -> None:
    frame = memoryview(b"\x00\x00\x00\x03abc\x04xyz")
    rec, p = codec.read_records(frame, 0)
    assert type(rec) is memoryview and rec.obj is frame.obj and rec == b"abc"
    rec, p = codec.read_crecords(frame, p)
    assert rec == b"xyz" and p == len(frame)
    assert codec.read_records(b"\xff\xff\xff\xff", 0) == (None, 4)
    assert codec.read_crecords(b"\x00", 0) == (None, 1)


class Region:
    """Stands in for logcore's FileRegion: only ``size`` may be read."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __getattr__(self, name: str):
        raise AssertionError(f"the codec touched {name}")


def test_records_placeholder_passes_through_as_its_own_chunk() -> None:
    buf = bytearray(b"head")
    out: list = []
    region = Region(1000)
    codec.write_records(buf, out, region)
    codec.write_crecords(buf, out, b"small")
    assert out == [8, region]  # cut after "head" + int32 length; the region untouched
    chunks = codec.split_chunks(buf, out)
    assert bytes(chunks[0]) == b"head" + struct.pack(">i", 1000)
    assert chunks[1] is region
    assert bytes(chunks[2]) == b"\x06small"
    assert all(type(c) is memoryview and c.obj is buf for c in (chunks[0], chunks[2]))


def test_large_bytes_records_are_not_copied() -> None:
    big = memoryview(b"x" * (codec.RECORDS_INLINE_MAX + 1))
    buf = bytearray()
    out: list = []
    codec.write_records(buf, out, big)
    assert out[1] is big and len(buf) == 4
    assert codec.split_chunks(buf, out)[1] is big
    small = b"y" * codec.RECORDS_INLINE_MAX
    out2: list = []
    buf2 = bytearray()
    codec.write_records(buf2, out2, small)
    assert out2 == [] and bytes(buf2).endswith(small)


def test_records_size_of_unknown_objects() -> None:
    assert codec.records_size(bytearray(3)) == 3
    assert codec.records_size(memoryview(b"abcd")[1:]) == 3
    assert codec.records_size(Region(7)) == 7
    with pytest.raises(LocalProtocolError, match="neither bytes-like"):
        codec.records_size(object())


def test_encode_frame_patches_the_size_prefix() -> None:
    buf = bytearray(4) + b"abc"
    (only,) = codec.encode_frame([], buf)
    assert bytes(only) == b"\x00\x00\x00\x03abc"
    buf = bytearray(4) + b"ab"
    out: list = []
    region = Region(10)
    codec.write_records(buf, out, region)
    buf += b"tail"
    chunks = codec.encode_frame(out, buf)
    assert chunks[1] is region
    assert struct.unpack(">i", bytes(chunks[0][:4]))[0] == 2 + 4 + 10 + 4
    assert bytes(chunks[2]) == b"tail"
    # Two regions back to back: no empty chunk between them.
    buf = bytearray(4)
    out = []
    r1, r2 = Region(3), Region(5)
    codec.write_records(buf, out, r1)
    codec.write_records(buf, out, r2)
    chunks = codec.encode_frame(out, buf)
    assert [type(c) for c in chunks] == [memoryview, Region, memoryview, Region]
    assert struct.unpack(">i", bytes(chunks[0][:4]))[0] == 4 + 3 + 4 + 5


def test_uuid() -> None:
    u = uuid.uuid4()
    assert codec.uuid_bytes(u) == u.bytes
    assert codec.uuid_bytes(u.bytes) == u.bytes
    assert codec.read_uuid(u.bytes, 0) == (u, 16)
    assert codec.read_uuid(bytes(16), 0)[0] is codec.ZERO_UUID
    with pytest.raises(LocalProtocolError):
        codec.uuid_bytes("not-a-uuid")
    with pytest.raises(RemoteProtocolError):
        codec.read_uuid(b"\x00" * 15, 0)


def test_tagged_fields_helpers() -> None:
    buf = bytearray()
    codec.write_tagged(buf, [(0, b"\x01"), (5, b"abc")])
    data = bytes(buf)
    assert data == b"\x02\x00\x01\x01\x05\x03abc"
    assert codec.skip_tags(data, 0) == len(data)
    n, p = codec.read_tag_header(data, 0)
    assert n == 2
    tag, start, end = codec.read_tag(data, p)
    assert (tag, end - start) == (0, 1)
    with pytest.raises(RemoteProtocolError, match="overruns its declared size"):
        codec.check_tag_end(end + 1, end, 0)
    with pytest.raises(RemoteProtocolError):
        codec.skip_tags(b"\x7f\x00", 0)  # 127 fields announced, 1 byte left
    with pytest.raises(RemoteProtocolError):
        codec.read_tag(b"\x00\x09ab", 0)


def test_fixed_arrays() -> None:
    buf = bytearray()
    codec.write_fixed_array(buf, [1, -2, 3], "i")
    assert codec.read_fixed_array(bytes(buf), 0, 3, "i", 4) == ([1, -2, 3], 12)
    assert codec.read_fixed_array(b"", 0, 0, "q", 8) == ([], 0)
