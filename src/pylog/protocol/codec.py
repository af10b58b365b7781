"""Runtime primitives of the Kafka wire codec, shared by the generated ``_schema`` modules.

Byte layouts (https://kafka.apache.org/protocol.html, KIP-482 for the flexible forms), all
integers big-endian:

    INT8/16/32/64, UINT16/32, FLOAT64     fixed width
    BOOLEAN                               int8, 0 or 1
    UUID                                  16 bytes
    STRING / NULLABLE_STRING              int16 length N (-1 = null), N bytes of UTF-8
    BYTES / NULLABLE_BYTES / RECORDS      int32 length N (-1 = null), N bytes
    ARRAY                                 int32 count N (-1 = null), N elements
    UNSIGNED_VARINT                       7 bits per byte, least significant group first,
                                          high bit = more bytes follow (at most 5 bytes)
    COMPACT_STRING / _BYTES / _RECORDS    uvarint N+1 (0 = null), N bytes
    COMPACT_ARRAY                         uvarint N+1 (0 = null), N elements
    TAGGED_FIELDS                         uvarint count, then per field: uvarint tag,
                                          uvarint size, size bytes (unknown tags skipped)

Decoders have the shape ``read_x(buf, pos) -> (value, new_pos)`` over any buffer (``bytes``
or a ``memoryview`` of the received frame) and check every length against the bytes that
remain *before* slicing or allocating, so a hostile length costs nothing. Fixed-width reads
go through ``struct.unpack_from``, whose ``struct.error`` on a short buffer the message-level
``decode`` turns into a ``RemoteProtocolError``.

Encoders append to one ``bytearray`` (``buf``) and, for record sets, note in ``out``
where a large ``records`` value or an opaque placeholder (any object with a ``size``
attribute, e.g. logcore's ``FileRegion``) goes: ``encode_frame`` / ``split_chunks`` then cut
``buf`` into memoryview slices around those values, which pass through untouched, so the
network layer can ``sendfile`` them. See ``write_records``.

This module is sans-IO: no sockets, no asyncio, no clocks, no logcore.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, ClassVar

from pylog.errors import LocalProtocolError, RemoteProtocolError, UnsupportedVersionProtocolError

__all__ = [
    "Message",
    "ZERO_UUID",
    "RECORDS_INLINE_MAX",
    "encode_frame",
]

ZERO_UUID = uuid.UUID(int=0)

# Sentinel for "argument not given" in generated constructors whose default is mutable
# (a list or a nested struct): a fresh one is built per instance.
_D: Any = type("_DefaultType", (), {"__repr__": lambda self: "<default>", "__slots__": ()})()

# Records values at most this long are copied into the current chunk; longer ones (and
# every non-bytes placeholder) become chunks of their own, so fetch responses never copy
# record data. 16 KiB: below it, one more writev iovec costs more than the copy.
RECORDS_INLINE_MAX = 16 * 1024

_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_u16 = struct.Struct(">H")
_r_i16 = _i16.unpack_from
_r_i32 = _i32.unpack_from
_p_i16 = _i16.pack
_p_i32 = _i32.pack

_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, MemoryError)
_ENCODE_ERRORS = (struct.error, AttributeError, TypeError, ValueError, OverflowError, KeyError)

# One-byte unsigned varints, precomputed: almost every length and count in practice.
_UV1 = tuple(bytes((i,)) for i in range(128))


# --------------------------------------------------------------------------- varints


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned varint (at most 5 bytes, as Kafka's ``ByteUtils.readUnsignedVarint``)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    b2 = buf[pos + 1]  # unrolled: lengths of 128 B to 16 KiB (record sets) take 2 bytes
    if b2 < 0x80:
        return (b & 0x7F) | (b2 << 7), pos + 2
    value = (b & 0x7F) | ((b2 & 0x7F) << 7)
    shift = 14
    pos += 2
    while True:
        b = buf[pos]  # IndexError past the end -> RemoteProtocolError at message level
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise RemoteProtocolError(f"unsigned varint longer than 5 bytes at byte {pos - 5}")


def uvarint_bytes(value: int) -> bytes:
    """Encode an unsigned varint (0 <= value < 2**32)."""
    if 0 <= value < 128:
        return _UV1[value]
    if 0 <= value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if 0 <= value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value < 0 or value > 0xFFFFFFFF:
        raise LocalProtocolError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(buf: bytearray, value: int) -> None:
    buf += _UV1[value] if 0 <= value < 128 else uvarint_bytes(value)


# --------------------------------------------------------------------------- lengths


def _short(what: str, n: int, pos: int, buf: Any) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"{what} of length {n} at byte {pos} overruns the buffer ({len(buf) - pos} bytes left)"
    )


def read_count(buf: Any, pos: int, min_size: int) -> tuple[int, int]:
    """Non-nullable ARRAY count, bounded by the bytes left (each element >= min_size)."""
    (n,) = _r_i32(buf, pos)
    pos += 4
    if n < 0:
        raise RemoteProtocolError(f"non-nullable array has count {n} at byte {pos - 4}")
    if n * min_size > len(buf) - pos:
        raise _short("array", n, pos, buf)
    return n, pos


def read_ncount(buf: Any, pos: int, min_size: int) -> tuple[int, int]:
    """Nullable ARRAY count: -1 for null."""
    (n,) = _r_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return -1, pos
        raise RemoteProtocolError(f"array has negative count {n} at byte {pos - 4}")
    if n * min_size > len(buf) - pos:
        raise _short("array", n, pos, buf)
    return n, pos


def read_ccount(buf: Any, pos: int, min_size: int) -> tuple[int, int]:
    """Non-nullable COMPACT_ARRAY count."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        raise RemoteProtocolError(f"non-nullable compact array is null at byte {pos - 1}")
    if n * min_size > len(buf) - pos:
        raise _short("compact array", n, pos, buf)
    return n, pos


def read_nccount(buf: Any, pos: int, min_size: int) -> tuple[int, int]:
    """Nullable COMPACT_ARRAY count: -1 for null."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n * min_size > len(buf) - pos:
        raise _short("compact array", n, pos, buf)
    return n, pos


# --------------------------------------------------------------------------- strings


def read_string(buf: Any, pos: int) -> tuple[str, int]:
    (n,) = _r_i16(buf, pos)
    pos += 2
    if n < 0:
        raise RemoteProtocolError(f"non-nullable string has length {n} at byte {pos - 2}")
    end = pos + n
    if end > len(buf):
        raise _short("string", n, pos, buf)
    return str(buf[pos:end], "utf-8"), end


def read_nstring(buf: Any, pos: int) -> tuple[str | None, int]:
    (n,) = _r_i16(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise RemoteProtocolError(f"string has negative length {n} at byte {pos - 2}")
    end = pos + n
    if end > len(buf):
        raise _short("string", n, pos, buf)
    return str(buf[pos:end], "utf-8"), end


def read_cstring(buf: Any, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        raise RemoteProtocolError(f"non-nullable compact string is null at byte {pos - 1}")
    end = pos + n
    if end > len(buf):
        raise _short("compact string", n, pos, buf)
    return str(buf[pos:end], "utf-8"), end


def read_ncstring(buf: Any, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    if end > len(buf):
        raise _short("compact string", n, pos, buf)
    return str(buf[pos:end], "utf-8"), end


def write_string(buf: bytearray, value: str) -> None:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise LocalProtocolError(f"string of {len(data)} bytes exceeds the int16 length limit")
    buf += _p_i16(len(data))
    buf += data


def write_nstring(buf: bytearray, value: str | None) -> None:
    if value is None:
        buf += b"\xff\xff"
    else:
        write_string(buf, value)


def write_cstring(buf: bytearray, value: str) -> None:
    data = value.encode("utf-8")
    n = len(data) + 1
    buf += _UV1[n] if n < 128 else uvarint_bytes(n)
    buf += data


def write_ncstring(buf: bytearray, value: str | None) -> None:
    if value is None:
        buf += b"\x00"
    else:
        write_cstring(buf, value)


# --------------------------------------------------------------------------- bytes


def read_bytes(buf: Any, pos: int) -> tuple[bytes, int]:
    (n,) = _r_i32(buf, pos)
    pos += 4
    if n < 0:
        raise RemoteProtocolError(f"non-nullable bytes has length {n} at byte {pos - 4}")
    end = pos + n
    if end > len(buf):
        raise _short("bytes", n, pos, buf)
    return bytes(buf[pos:end]), end


def read_nbytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    (n,) = _r_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise RemoteProtocolError(f"bytes has negative length {n} at byte {pos - 4}")
    end = pos + n
    if end > len(buf):
        raise _short("bytes", n, pos, buf)
    return bytes(buf[pos:end]), end


def read_cbytes(buf: Any, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        raise RemoteProtocolError(f"non-nullable compact bytes is null at byte {pos - 1}")
    end = pos + n
    if end > len(buf):
        raise _short("compact bytes", n, pos, buf)
    return bytes(buf[pos:end]), end


def read_ncbytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    if end > len(buf):
        raise _short("compact bytes", n, pos, buf)
    return bytes(buf[pos:end]), end


def _nbytes(value: Any) -> int:
    return value.nbytes if type(value) is memoryview else len(value)


def write_bytes(buf: bytearray, value: Any) -> None:
    buf += _p_i32(_nbytes(value))
    buf += value


def write_nbytes(buf: bytearray, value: Any) -> None:
    if value is None:
        buf += b"\xff\xff\xff\xff"
    else:
        buf += _p_i32(_nbytes(value))
        buf += value


def write_cbytes(buf: bytearray, value: Any) -> None:
    write_uvarint(buf, _nbytes(value) + 1)
    buf += value


def write_ncbytes(buf: bytearray, value: Any) -> None:
    if value is None:
        buf += b"\x00"
    else:
        write_uvarint(buf, _nbytes(value) + 1)
        buf += value


# --------------------------------------------------------------------------- records


def read_records(buf: Any, pos: int) -> tuple[Any, int]:
    """RECORDS (nullable, int32 length): a zero-copy slice of ``buf`` (memoryview in, view out)."""
    (n,) = _r_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise RemoteProtocolError(f"records has negative length {n} at byte {pos - 4}")
    end = pos + n
    if end > len(buf):
        raise _short("records", n, pos, buf)
    return buf[pos:end], end


def read_crecords(buf: Any, pos: int) -> tuple[Any, int]:
    """COMPACT_RECORDS (nullable): a zero-copy slice of ``buf``."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    if end > len(buf):
        raise _short("compact records", n, pos, buf)
    return buf[pos:end], end


def records_size(value: Any) -> int:
    """Length on the wire of a records value: bytes-like, or a placeholder with ``size``."""
    t = type(value)
    if t is bytes or t is bytearray:
        return len(value)
    if t is memoryview:
        return value.nbytes
    size = getattr(value, "size", None)
    if size is None:
        try:
            return len(value)
        except TypeError:
            raise LocalProtocolError(
                f"records value of type {t.__name__} is neither bytes-like nor has a size"
            ) from None
    return int(size)


def _write_records_body(buf: bytearray, out: list, value: Any, n: int) -> None:
    t = type(value)
    if (t is bytes or t is bytearray or t is memoryview) and n <= RECORDS_INLINE_MAX:
        buf += value
        return
    # Pass the value through untouched as a chunk of its own (never copied; sendfile-able
    # if it is a region). Only the cut position is noted now: the chunks are memoryview
    # slices of ``buf`` made once at the end (``split_chunks``), so nothing is copied here.
    out.append(len(buf))
    out.append(value)


def write_records(buf: bytearray, out: list, value: Any) -> None:
    """RECORDS: int32 length (-1 null) then the value, inline or as its own chunk."""
    if value is None:
        buf += b"\xff\xff\xff\xff"
        return
    t = type(value)
    if (t is bytes or t is bytearray) and len(value) <= RECORDS_INLINE_MAX:
        buf += _p_i32(len(value))
        buf += value
        return
    n = records_size(value)
    buf += _p_i32(n)
    if n:
        _write_records_body(buf, out, value, n)


def write_crecords(buf: bytearray, out: list, value: Any) -> None:
    """COMPACT_RECORDS: uvarint length+1 (0 null) then the value, inline or as its own chunk."""
    if value is None:
        buf += b"\x00"
        return
    t = type(value)
    if (t is bytes or t is bytearray) and len(value) <= RECORDS_INLINE_MAX:
        # Fast path: small bytes records, inline (one call less per partition).
        n = len(value) + 1
        buf += _UV1[n] if n < 128 else uvarint_bytes(n)
        buf += value
        return
    n = records_size(value)
    write_uvarint(buf, n + 1)
    if n:
        _write_records_body(buf, out, value, n)


# --------------------------------------------------------------------------- uuid


def read_uuid(buf: Any, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise _short("uuid", 16, pos, buf)
    raw = bytes(buf[pos:end])
    if raw == b"\x00" * 16:
        return ZERO_UUID, end
    return uuid.UUID(bytes=raw), end


def uuid_bytes(value: Any) -> bytes:
    """UUID to its 16 wire bytes (accepts ``uuid.UUID`` or 16 raw bytes)."""
    if type(value) is uuid.UUID:
        return value.bytes
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    raise LocalProtocolError(f"uuid field needs a uuid.UUID, got {value!r}")


# --------------------------------------------------------------------------- arrays of primitives


def read_fixed_array(buf: Any, pos: int, n: int, code: str, size: int) -> tuple[list, int]:
    """``n`` fixed-width values (count already read and bounded) in one unpack."""
    if n == 0:
        return [], pos
    return list(struct.unpack_from(f">{n}{code}", buf, pos)), pos + n * size


def write_fixed_array(buf: bytearray, values: Any, code: str) -> None:
    if values:
        buf += struct.pack(f">{len(values)}{code}", *values)


# --------------------------------------------------------------------------- tagged fields


def read_tag_header(buf: Any, pos: int) -> tuple[int, int]:
    """TAGGED_FIELDS count, bounded by the bytes left (each field takes >= 2 bytes)."""
    n, pos = read_uvarint(buf, pos)
    if n * 2 > len(buf) - pos:
        raise _short("tagged fields section", n, pos, buf)
    return n, pos


def read_tag(buf: Any, pos: int) -> tuple[int, int, int]:
    """One tagged field's (tag, start, end); the caller decodes or skips [start, end)."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    end = pos + size
    if end > len(buf):
        raise _short("tagged field", size, pos, buf)
    return tag, pos, end


def check_tag_end(pos: int, end: int, tag: int) -> int:
    if pos > end:
        raise RemoteProtocolError(f"tagged field {tag} overruns its declared size by {pos - end}")
    return end


def write_tagged(buf: bytearray, tagged: list) -> None:
    """TAGGED_FIELDS from a list of (tag, encoded bytes), already in ascending tag order."""
    write_uvarint(buf, len(tagged))
    for tag, data in tagged:
        write_uvarint(buf, tag)
        write_uvarint(buf, len(data))
        buf += data


# --------------------------------------------------------------------------- messages


class Message:
    """Base of every generated message and struct class.

    Subclasses are generated from Kafka's JSON schemas (one class per message, named as in
    the spec; nested structs as attributes, e.g. ``FetchResponse.PartitionData``). Fields are
    the spec's names snake_cased; the version is data, passed to ``encode``/``decode``.

    Instances are plain mutable objects (``__slots__``) owned by whoever built them; nothing
    here is shared between threads or event loops.
    """

    __slots__ = ()

    NAME: ClassVar[str] = ""
    API_KEY: ClassVar[int | None] = None
    MESSAGE_TYPE: ClassVar[str] = "struct"  # "request" | "response" | "header" | "data" | "struct"
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, -1)
    FLEXIBLE_MIN: ClassVar[int | None] = None  # first flexible version, None if never
    # (name, spec type, (lo, hi) versions, nullable (lo, hi) | None, tagged (lo, hi) | None, tag)
    FIELDS: ClassVar[tuple] = ()
    _ENC: ClassVar[tuple] = ()
    _DEC: ClassVar[tuple] = ()

    @classmethod
    def fields_at(cls, version: int) -> list[str]:
        """Names of the fields that exist at ``version`` (the others are not on the wire)."""
        return [f[0] for f in cls.FIELDS if f[2][0] <= version <= f[2][1]]

    # ------------------------------------------------------------------ encode

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN

    @classmethod
    def _encoder(cls, version: int) -> Any:
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise LocalProtocolError(f"{cls.NAME} has no version {version} (valid {lo}-{hi})")
        return cls._ENC[version]

    def encode_into(self, version: int, buf: bytearray, out: list) -> None:
        """Append this message at ``version`` to ``buf`` (records chunks go to ``out``).

        Raises:
            LocalProtocolError: the version does not exist or a field value does not fit
                its wire type (e.g. an int16 out of range, None in a non-nullable field).
        """
        fn = self._encoder(version)
        try:
            fn(self, buf, out)
        except LocalProtocolError:
            raise
        except _ENCODE_ERRORS as exc:
            # Error path only: walk the fields to name the one that does not fit.
            detail = find_bad_field(self, version) or str(exc)
            raise LocalProtocolError(f"cannot encode {self.NAME} v{version}: {detail}") from exc

    def encode(self, version: int) -> bytes:
        """This message at ``version`` as bytes (placeholders are not allowed here)."""
        buf = bytearray()
        out: list = []
        self.encode_into(version, buf, out)
        if out:
            chunks = split_chunks(buf, out)
            for chunk in chunks:
                if not isinstance(chunk, (bytes, bytearray, memoryview)):
                    raise LocalProtocolError(
                        f"{self.NAME}.encode() cannot join a {type(chunk).__name__} placeholder;"
                        " use encode_into() or a connection's send()"
                    )
            return b"".join(chunks)
        return bytes(buf)

    # ------------------------------------------------------------------ decode

    @classmethod
    def decode_from(cls, buf: Any, pos: int, version: int) -> tuple[Any, int]:
        """Decode one message at ``version`` from ``buf[pos:]``.

        Returns:
            ``(message, end_position)``. ``records`` fields are slices of ``buf`` (zero copy
            when ``buf`` is a memoryview).

        Raises:
            UnsupportedVersionProtocolError: the schema has no such version.
            RemoteProtocolError: the bytes are truncated or malformed.
        """
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise UnsupportedVersionProtocolError(
                f"{cls.NAME} has no version {version} (valid {lo}-{hi})"
            )
        try:
            return cls._DEC[version](buf, pos)
        except RemoteProtocolError as exc:
            raise RemoteProtocolError(f"{cls.NAME} v{version}: {exc}") from None
        except struct.error:
            raise RemoteProtocolError(
                f"{cls.NAME} v{version}: truncated ({len(buf) - pos} bytes)"
            ) from None
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"{cls.NAME} v{version}: string is not UTF-8: {exc}") from None
        except _DECODE_ERRORS as exc:
            raise RemoteProtocolError(f"{cls.NAME} v{version}: malformed: {exc!r}") from None

    @classmethod
    def decode(cls, data: Any, version: int) -> Any:
        """Decode a whole buffer holding exactly one message at ``version``.

        Raises:
            RemoteProtocolError: malformed, truncated, or followed by trailing bytes.
        """
        obj, end = cls.decode_from(data, 0, version)
        if end != len(data):
            raise RemoteProtocolError(
                f"{cls.NAME} v{version}: {len(data) - end} trailing bytes after the message"
            )
        return obj

    # ------------------------------------------------------------------ object protocol

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        slots: tuple[str, ...] = self.__slots__
        return all(getattr(self, s) == getattr(other, s) for s in slots)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        slots: tuple[str, ...] = self.__slots__
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in slots)
        return f"{type(self).__qualname__}({fields})"

    def to_dict(self) -> dict:
        """Fields as a dict, nested structs as dicts (records values left as they are)."""

        def conv(v: Any) -> Any:
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        slots: tuple[str, ...] = self.__slots__
        return {s: conv(getattr(self, s)) for s in slots}


def split_chunks(buf: bytearray, out: list) -> list:
    """The chunk list of an encoding: ``buf`` cut at the positions ``write_records`` noted.

    ``out`` alternates cut positions in ``buf`` and pass-through values. The bytes parts
    are memoryview slices of ``buf`` (no copy): do not resize ``buf`` while they live.
    """
    view = memoryview(buf)
    chunks: list = []
    prev = 0
    for i in range(0, len(out), 2):
        pos = out[i]
        if pos > prev:
            chunks.append(view[prev:pos])
        chunks.append(out[i + 1])
        prev = pos
    if prev < len(buf):
        chunks.append(view[prev:])
    return chunks


def encode_frame(out: list, buf: bytearray) -> list:
    """Finish a frame whose first 4 bytes of ``buf`` were reserved for the size prefix.

    ``out`` holds what ``write_records`` noted (cut positions and pass-through values).
    Patches the int32 size prefix and returns the chunk list: bytes-like chunks and the
    untouched placeholders, in wire order.
    """
    if not out:
        struct.pack_into(">i", buf, 0, len(buf) - 4)
        return [buf]
    total = len(buf) - 4
    for i in range(1, len(out), 2):
        total += records_size(out[i])
    struct.pack_into(">i", buf, 0, total)
    return split_chunks(buf, out)


def skip_tags(buf: Any, pos: int) -> int:
    """Skip a TAGGED_FIELDS section of a struct that has no known tags at this version."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return pos
    if n * 2 > len(buf) - pos:
        raise _short("tagged fields section", n, pos, buf)
    for _ in range(n):
        _tag, _start, pos = read_tag(buf, pos)
    return pos


_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def find_bad_field(obj: Message, version: int, path: str = "") -> str | None:
    """The first field of ``obj`` (recursively) whose value cannot be encoded at ``version``.

    Used on the error path of ``encode_into`` to turn a bare ``struct.error`` into a message
    naming the field, e.g. ``responses[0].partitions[2].error_code: 70000 is out of the
    int16 range``. Returns None when every field looks encodable.
    """
    for name, typ, versions, nullable, tagged, _tag in type(obj).FIELDS:
        if not versions[0] <= version <= versions[1]:
            continue
        value = getattr(obj, name, None)
        where = f"{path}.{name}" if path else name
        ok_none = bool(nullable and nullable[0] <= version <= nullable[1]) or bool(
            tagged and tagged[0] <= version  # a tagged None is written as its default
        )
        problem = _check_value(type(obj), typ, value, ok_none, version, where)
        if problem:
            return problem
    return None


def _check_value(owner: type, typ: str, value: Any, ok_none: bool, version: int, where: str) -> str | None:
    if value is None:
        return None if ok_none else f"{where}: None in a non-nullable {typ} field"
    if typ.startswith("[]"):
        if not isinstance(value, (list, tuple)):
            return f"{where}: {typ} needs a list, got {type(value).__name__}"
        for i, elem in enumerate(value):
            problem = _check_value(owner, typ[2:], elem, False, version, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if typ in _INT_RANGES:
        lo, hi = _INT_RANGES[typ]
        if not isinstance(value, int):
            return f"{where}: {typ} needs an int, got {type(value).__name__}"
        if not lo <= value <= hi:
            return f"{where}: {value} is out of the {typ} range"
        return None
    if typ == "bool" or typ == "float64":
        return None if isinstance(value, (bool, int, float)) else f"{where}: {typ} got {type(value).__name__}"
    if typ == "string":
        if not isinstance(value, str):
            return f"{where}: string needs a str, got {type(value).__name__}"
        if len(value.encode("utf-8")) > 0x7FFF:
            return f"{where}: string longer than 32767 bytes"
        return None
    if typ == "uuid":
        ok = type(value) is uuid.UUID or (isinstance(value, (bytes, bytearray)) and len(value) == 16)
        return None if ok else f"{where}: uuid needs a uuid.UUID, got {value!r}"
    if typ == "bytes" or typ == "records":
        return None  # anything bytes-like or sized; write_* reports the rest
    struct_cls = getattr(owner, typ, None)
    if struct_cls is None or type(value) is not struct_cls:
        want = struct_cls.__qualname__ if struct_cls is not None else typ
        return f"{where}: needs a {want}, got {type(value).__name__}"
    return find_bad_field(value, version, where)
