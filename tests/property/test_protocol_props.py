"""Hypothesis properties of pylog.protocol (STYLE 7).

- Every message at every version round-trips random field values (strategies built from
  the generated classes' field metadata).
- Any split of a byte stream into receive_data() chunks yields the same events.
- Garbage (random bytes, random bodies behind valid headers, bit flips of valid messages)
  raises only RemoteProtocolError-family errors or yields error events: never another
  exception, never a hang.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pylog.errors import RemoteProtocolError
from pylog.protocol import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    Request,
    RequestError,
    ServerConnection,
    _schema,
)
from pylog.protocol.codec import ZERO_UUID, Message

PROPS = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def _within(r, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def type_strategy(top: type[Message], typ: str, version: int, nullable: bool, depth: int):
    if typ.startswith("[]"):
        elem = type_strategy(top, typ[2:], version, False, depth + 1)
        s = st.lists(elem, max_size=3 if depth < 2 else 1)
    elif typ == "bool":
        s = st.booleans()
    elif typ in INTS:
        lo, hi = INTS[typ]
        s = st.integers(lo, hi)
    elif typ == "float64":
        s = st.floats(allow_nan=False)
    elif typ == "string":
        s = st.text(max_size=8)
    elif typ == "bytes":
        s = st.binary(max_size=8)
    elif typ == "records":
        s = st.binary(max_size=24)
    elif typ == "uuid":
        s = st.one_of(st.just(ZERO_UUID), st.uuids())
    else:
        s = message_strategy(top, getattr(top, typ), version, depth + 1)
    return st.one_of(st.none(), s) if nullable else s


def message_strategy(top: type[Message], cls: type[Message], version: int, depth: int = 0):
    kwargs = {}
    for name, typ, versions, nullable, _tagged, _tag in cls.FIELDS:
        if _within(versions, version):
            kwargs[name] = type_strategy(top, typ, version, _within(nullable, version), depth)
    return st.builds(cls, **kwargs)


def versioned(name: str):
    cls = _schema.load(name)
    lo, hi = cls.VALID_VERSIONS
    return st.integers(lo, hi).flatmap(
        lambda v: st.tuples(st.just(v), message_strategy(cls, cls, v))
    )


@pytest.mark.parametrize("name", sorted(_schema.MESSAGES))
@PROPS
@given(data=st.data())
def test_every_message_round_trips_at_every_version(name: str, data) -> None:
    cls = _schema.load(name)
    version, obj = data.draw(versioned(name))
    encoded = obj.encode(version)
    assert cls.decode(memoryview(encoded), version) == obj
    assert cls.decode(encoded, version).encode(version) == encoded


# --------------------------------------------------------------------------- streams

REQUEST_NAMES = [
    "ApiVersionsRequest", "MetadataRequest", "ProduceRequest", "FetchRequest",
    "ListOffsetsRequest", "CreateTopicsRequest", "DescribeConfigsRequest",
]


@st.composite
def request_stream(draw):
    client = ClientConnection(client_id=draw(st.one_of(st.none(), st.text(max_size=5))))
    sent = []
    chunks = []
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(REQUEST_NAMES))
        version, body = draw(versioned(name))
        chunks += client.send(body, version)
        sent.append((body.API_KEY, version, body))
    return sent, b"".join(bytes(c) for c in chunks)


def drain(server: ServerConnection) -> list:
    events = []
    while True:
        ev = server.next_event()
        if ev is NEED_DATA or isinstance(ev, ConnectionClosed):
            return events
        events.append(ev)


def summary(ev):
    if isinstance(ev, Request):
        return ("req", ev.api_key, ev.api_version, ev.correlation_id, ev.client_id, ev.body)
    return ("err", ev.api_key, ev.api_version, ev.correlation_id, ev.error_code)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(stream=request_stream(), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_of_the_stream_yields_the_same_events(stream, cuts) -> None:
    sent, data = stream
    whole = ServerConnection(serve_all=True)
    whole.receive_data(data)
    expected = [summary(e) for e in drain(whole)]
    assert [(k, v) for k, v, _ in sent] == [(e[1], e[2]) for e in expected]
    for (_, _, body), ev in zip(sent, expected, strict=True):
        assert ev[0] == "req" and ev[5] == body
    points = sorted({c % (len(data) + 1) for c in cuts})
    split = ServerConnection(serve_all=True)
    got = []
    prev = 0
    for p in points + [len(data)]:
        if p == prev:
            continue  # b"" would mean EOF
        split.receive_data(data[prev:p])
        got += [summary(e) for e in drain(split)]
        prev = p
    assert got == expected


# --------------------------------------------------------------------------- garbage


def feed_garbage(data: bytes) -> None:
    server = ServerConnection()
    if data:
        server.receive_data(data)
    server.receive_data(b"")
    for _ in range(len(data) + 2):  # each event consumes >= 4 bytes: this bounds the loop
        try:
            ev = server.next_event()
        except RemoteProtocolError:
            return
        if isinstance(ev, ConnectionClosed):
            return
        assert isinstance(ev, (Request, RequestError)), ev
        if isinstance(ev, RequestError) and ev.can_respond:
            server.send_error(ev)
    raise AssertionError("next_event did not terminate")


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_remote_protocol_errors(data: bytes) -> None:
    feed_garbage(data)


@settings(max_examples=200, deadline=None)
@given(
    api_key=st.sampled_from(sorted(_schema.REQUESTS) + [500, -1]),
    version=st.integers(-2, 20),
    client_id=st.one_of(st.none(), st.text(max_size=4)),
    tags=st.booleans(),
    body=st.binary(max_size=120),
)
def test_random_bodies_behind_valid_headers(api_key, version, client_id, tags, body) -> None:
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    payload = struct.pack(">hhi", api_key, version, 7) + cid + (b"\x00" if tags else b"") + body
    feed_garbage(struct.pack(">i", len(payload)) + payload)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_bit_flips_of_valid_messages_decode_or_raise_remote_protocol_error(data) -> None:
    name = data.draw(st.sampled_from(sorted(_schema.MESSAGES)))
    cls = _schema.load(name)
    version, obj = data.draw(versioned(name))
    encoded = bytearray(obj.encode(version))
    if encoded:
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(encoded) - 1))
            encoded[i] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.integers(0, len(encoded)))
    for blob in (bytes(encoded), bytes(encoded[:cut])):
        try:
            cls.decode(memoryview(blob), version)
        except RemoteProtocolError:
            pass
