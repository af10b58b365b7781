"""pylog.protocol.connection: server and client state machines, wired in memory (STYLE 7)."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import LocalProtocolError, RemoteProtocolError
from pylog.protocol import (
    ADVERTISED,
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    ConnectionState,
    Request,
    RequestError,
    Response,
    ServerConnection,
    error_response,
)
from pylog.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    DescribeClusterRequest,
    DescribeClusterResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)


class FakeRegion:
    """A FileRegion stand-in: the pair resolves it to its bytes, as sendfile would."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)


def wire(chunks: list) -> bytes:
    """What the network layer writes: bytes-likes as they are, placeholders via 'sendfile'."""
    return b"".join(c.data if isinstance(c, FakeRegion) else bytes(c) for c in chunks)


class ConnectionPair:
    """A client and a broker connection joined in memory (after h11's tests/helpers.py)."""

    def __init__(self, **server_kwargs) -> None:
        self.client = ClientConnection(client_id="pair")
        self.server = ServerConnection(**server_kwargs)

    def request(self, body, version: int):
        self.server.receive_data(wire(self.client.send(body, version)))
        return self.server.next_event()

    def respond(self, event, body) -> Response:
        self.client.receive_data(wire(self.server.send(event, body)))
        return self.client.next_event()


def produce(acks: int = 1, records=b"batch-bytes") -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[
        T(name="t", partition_data=[T.PartitionProduceData(index=0, records=records)])])


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_round_trip(version: int) -> None:
    pair = ConnectionPair()
    ev = pair.request(ApiVersionsRequest(client_software_name="x", client_software_version="1"), version)
    assert isinstance(ev, Request) and ev.api_key == 18 and ev.api_version == version
    assert ev.client_id == "pair" and ev.correlation_id == 0 and ev.expects_response
    resp = pair.respond(ev, error_response(18, version, 0))
    assert isinstance(resp, Response) and resp.correlation_id == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.body.api_keys] == sorted(
        (int(k), lo, hi) for k, (lo, hi) in ADVERTISED.items())


def test_headers_on_the_wire() -> None:
    client = ClientConnection(client_id="ab")
    data = wire(client.send(ApiVersionsRequest(), 3, correlation_id=5))
    # size | key 18 | version 3 | corr 5 | client id int16 "ab" (even in header v2) | tags 0 | body
    assert data[4:16] == b"\x00\x12\x00\x03\x00\x00\x00\x05\x00\x02ab"
    assert data[16] == 0
    server = ServerConnection()
    server.receive_data(data)
    ev = server.next_event()
    # ApiVersionsResponse keeps header v0: no tagged-fields byte after the correlation id.
    out = wire(server.send(ev, ApiVersionsResponse()))
    assert out[4:8] == b"\x00\x00\x00\x05" and out[8:10] == b"\x00\x00"
    # Other flexible responses use header v1 (one tagged-fields byte).
    server.receive_data(wire(client.send(MetadataRequest(topics=None), 9, correlation_id=6)))
    ev = server.next_event()
    out = wire(server.send(ev, MetadataResponse()))
    assert out[4:9] == b"\x00\x00\x00\x06\x00"
    # Non-flexible requests use header v1 (no tagged fields).
    data = wire(client.send(MetadataRequest(topics=None), 8, correlation_id=7))
    assert data[4:16] == b"\x00\x03\x00\x08\x00\x00\x00\x07\x00\x02ab"
    assert data[16:] == b"\xff\xff\xff\xff" + b"\x01\x00\x00"


def test_produce_records_are_views_and_acks_zero_gets_no_response() -> None:
    pair = ConnectionPair()
    ev = pair.request(produce(acks=1, records=b"x" * 50), 9)
    rec = ev.body.topic_data[0].partition_data[0].records
    assert type(rec) is memoryview and rec == b"x" * 50
    R = ProduceResponse.TopicProduceResponse
    resp = pair.respond(ev, ProduceResponse(responses=[R(name="t", partition_responses=[
        R.PartitionProduceResponse(index=0, base_offset=7)])]))
    assert resp.body.responses[0].partition_responses[0].base_offset == 7
    assert resp.request.acks == 1
    ev0 = pair.request(produce(acks=0), 9)
    assert isinstance(ev0, Request) and not ev0.expects_response
    assert pair.client.in_flight == 0


def test_fetch_response_passes_regions_through_to_the_wire() -> None:
    pair = ConnectionPair()
    ev = pair.request(FetchRequest(max_wait_ms=0, topics=[]), 12)
    region = FakeRegion(b"R" * 70000)
    P = FetchResponse.PartitionData
    body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        P(partition_index=0, high_watermark=5, records=region),
        P(partition_index=1, high_watermark=6, records=b"inline")])])
    chunks = pair.server.send(ev, body)
    assert any(c is region for c in chunks)
    assert struct.unpack(">i", bytes(chunks[0][:4]))[0] == len(wire(chunks)) - 4
    pair.client.receive_data(wire(chunks))
    resp = pair.client.next_event()
    parts = resp.body.responses[0].partitions
    assert parts[0].records == region.data and parts[1].records == b"inline"


def test_pipelined_requests_in_one_read_and_byte_by_byte() -> None:
    client = ClientConnection()
    stream = b"".join(wire(client.send(b, v)) for b, v in [
        (ApiVersionsRequest(), 3), (MetadataRequest(topics=None), 12), (produce(), 9)])
    for step in (len(stream), 1, 3):
        server = ServerConnection()
        events = []
        for i in range(0, len(stream), step):
            server.receive_data(stream[i : i + step])
            while (ev := server.next_event()) is not NEED_DATA:
                events.append(ev)
        assert [(e.api_key, e.correlation_id) for e in events] == [(18, 0), (3, 1), (0, 2)]
        server.receive_data(b"")
        assert server.next_event() == ConnectionClosed()
        assert server.state is ConnectionState.CLOSED


def test_bad_body_is_invalid_request_and_the_connection_stays_open() -> None:
    server = ServerConnection()
    header = struct.pack(">hhih", 60, 0, 9, 1) + b"c" + b"\x00"  # v0 is flexible: header v2
    server.receive_data(struct.pack(">i", len(header)) + header)  # body missing
    ev = server.next_event()
    assert isinstance(ev, RequestError) and ev.error_code == 42 and ev.can_respond
    assert "DescribeCluster" in ev.reason and ev.client_id == "c"
    out = wire(server.send_error(ev))
    assert DescribeClusterResponse.decode(out[9:], 0).error_code == 42  # header v1: tags byte
    assert server.state is ConnectionState.OPEN
    pair = ConnectionPair()
    assert isinstance(pair.request(DescribeClusterRequest(), 0), Request)


def test_trailing_bytes_after_the_request_body_are_ignored_as_kafka_does() -> None:
    # Captured from confluent-kafka 2.x (librdkafka): Metadata v12 for all topics, whose
    # body carries 3 stray bytes after its tagged fields. Kafka serves it; so must we.
    frame = bytes.fromhex("000000190003000c00000003000772646b61666b610000000000010000")
    server = ServerConnection()
    server.receive_data(frame)
    ev = server.next_event()
    assert isinstance(ev, Request) and ev.api_key == 3 and ev.api_version == 12
    assert ev.client_id == "rdkafka" and ev.body.topics is None
    # The client side stays strict: a broker never pads responses.
    client = ClientConnection()
    client.send(DescribeClusterRequest(), 0, correlation_id=0)
    body = DescribeClusterResponse().encode(0)
    client.receive_data(struct.pack(">ib", 4 + 1 + len(body) + 1, 0)[:4] + b"\x00\x00\x00\x00\x00" + body + b"\x00")
    with pytest.raises(RemoteProtocolError, match="trailing"):
        client.next_event()


def test_api_versions_at_an_unknown_version_gets_the_kip511_v0_answer() -> None:
    server = ServerConnection()
    header = struct.pack(">hhih", 18, 77, 3, 2) + b"ab" + b"\x00"
    body = b"\x05hello\x021\x00"  # whatever a future version carries: never decoded
    server.receive_data(struct.pack(">i", len(header) + len(body)) + header + body)
    ev = server.next_event()
    assert isinstance(ev, RequestError) and ev.error_code == 35 and ev.response_version == 0
    out = wire(server.send_error(ev))
    assert out[4:8] == b"\x00\x00\x00\x03"
    resp = ApiVersionsResponse.decode(out[8:], 0)
    assert resp.error_code == 35
    assert {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys} == {
        (int(k), lo, hi) for k, (lo, hi) in ADVERTISED.items()}
    # A client that sent v3 reads that answer in the v0 layout.
    client = ClientConnection()
    client.send(ApiVersionsRequest(), 3, correlation_id=3)
    client.receive_data(out)
    got = client.next_event()
    assert got.api_version == 0 and got.body.error_code == 35 and len(got.body.api_keys) == len(ADVERTISED)


def test_unserved_versions_are_unsupported_version_with_the_body() -> None:
    pair = ConnectionPair()
    ev = pair.request(produce(), 2)  # advertised for old librdkafka, refused on use
    assert isinstance(ev, RequestError) and ev.error_code == 35 and ev.can_respond
    assert ev.body.topic_data[0].name == "t"
    pair.client.receive_data(wire(pair.server.send_error(ev)))
    assert isinstance(pair.client.next_event().body, ProduceResponse)
    ev = pair.request(FetchRequest(), 3)  # in the schema, below what we serve
    assert isinstance(ev, RequestError) and ev.error_code == 35 and "served: 4-12" in ev.reason
    ev = pair.request(CreateTopicsRequest(), 0)
    assert isinstance(ev, RequestError) and ev.error_code == 35
    all_versions = ConnectionPair(serve_all=True)
    assert isinstance(all_versions.request(FetchRequest(), 3), Request)


def test_unknown_api_key_and_version_outside_schema_cannot_be_answered() -> None:
    server = ServerConnection()
    for key, version in ((999, 0), (1, 99)):
        header = struct.pack(">hhih", key, version, 1, -1)
        server.receive_data(struct.pack(">i", len(header)) + header)
        ev = server.next_event()
        assert isinstance(ev, RequestError) and ev.error_code == 35 and not ev.can_respond
        with pytest.raises(LocalProtocolError, match="close the connection"):
            server.send_error(ev)
    assert server.state is ConnectionState.OPEN


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (struct.pack(">i", -5), "negative"),
        (struct.pack(">i", 200 * 1024 * 1024), "exceeds"),
        (struct.pack(">i", 3) + b"abc", "too short"),
        (struct.pack(">ihhih", 10, 3, 0, 1, 50) + b"ab", "header"),  # client id overruns
    ],
)
def test_broken_framing_puts_the_connection_in_error(data: bytes, match: str) -> None:
    server = ServerConnection()
    server.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=match):
        server.next_event()
    assert server.state is ConnectionState.ERROR
    with pytest.raises(RemoteProtocolError, match="ERROR"):
        server.next_event()
    with pytest.raises(LocalProtocolError):
        server.send(Request(18, 0, 0, None, ApiVersionsRequest(), 0), ApiVersionsResponse())
    with pytest.raises(LocalProtocolError, match="ERROR"):
        server.receive_data(b"\x00")
    server.close()
    assert server.state is ConnectionState.CLOSED


def test_eof_mid_frame_is_an_error_and_clean_eof_closes() -> None:
    server = ServerConnection()
    server.receive_data(b"\x00\x00\x00\x10abc")
    server.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="mid-frame"):
        server.next_event()
    server = ServerConnection()
    server.receive_data(b"")
    assert isinstance(server.next_event(), ConnectionClosed)
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"more")


def test_send_checks_the_response_class_and_state() -> None:
    pair = ConnectionPair()
    ev = pair.request(ApiVersionsRequest(), 0)
    with pytest.raises(LocalProtocolError, match="not the response"):
        pair.server.send(ev, MetadataResponse())
    with pytest.raises(LocalProtocolError, match="needs an error_code"):
        pair.server.send_error(ev)
    out = wire(pair.server.send_error(ev, 42))
    assert ApiVersionsResponse.decode(out[8:], 0).error_code == 42
    pair.server.close()
    with pytest.raises(LocalProtocolError, match="CLOSED"):
        pair.server.send(ev, ApiVersionsResponse())
    pair.server.close()  # idempotent


def test_client_rejects_unknown_correlation_ids_and_bad_sends() -> None:
    client = ClientConnection()
    with pytest.raises(LocalProtocolError, match="not a request"):
        client.send(MetadataResponse(), 0)
    with pytest.raises(LocalProtocolError, match="no version"):
        client.send(MetadataRequest(), 99)
    client.send(MetadataRequest(), 1, correlation_id=1)
    with pytest.raises(LocalProtocolError, match="already in flight"):
        client.send(MetadataRequest(), 1, correlation_id=1)
    client.receive_data(struct.pack(">ii", 4, 42))
    with pytest.raises(RemoteProtocolError, match="unknown correlation id 42"):
        client.next_event()
    assert client.state is ConnectionState.ERROR


def test_client_rejects_a_malformed_response() -> None:
    client = ClientConnection()
    client.send(MetadataRequest(), 1, correlation_id=0)
    client.receive_data(struct.pack(">ii", 6, 0) + b"\x00\x01")
    with pytest.raises(RemoteProtocolError, match="MetadataResponse"):
        client.next_event()
    assert client.state is ConnectionState.ERROR


def test_request_repr_names_the_api() -> None:
    pair = ConnectionPair()
    ev = pair.request(FetchRequest(), 12)
    assert "Fetch v12" in repr(ev)


def test_client_falls_back_to_v0_for_an_api_versions_answer_it_cannot_parse() -> None:
    # An old broker answering ApiVersions v3 in the v0 layout with another error code.
    body = ApiVersionsResponse(error_code=42, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]).encode(0)
    client = ClientConnection()
    client.send(ApiVersionsRequest(), 3, correlation_id=0)
    client.receive_data(struct.pack(">ii", 4 + len(body), 0) + body)
    ev = client.next_event()
    assert ev.api_version == 0 and ev.body.error_code == 42 and ev.body.api_keys[0].max_version == 2


@pytest.mark.parametrize("version", [3, 9, 11])
def test_large_produce_received_in_place_has_writable_records(version: int) -> None:
    """receive_buffer/received_into, as the broker reads: the records view is writable,
    so Log.append assigns offsets in the frame itself (no copy)."""
    records = bytes(range(256)) * 2000
    client = ClientConnection(client_id="pair")
    server = ServerConnection()
    data = wire(client.send(produce(records=records), version))
    pos = 0
    while True:
        view = server.receive_buffer()
        if view is None:
            server.receive_data(data[pos : pos + 1000])
            pos += 1000
        else:
            with view:
                n = min(len(view), 100_000)
                view[:n] = data[pos : pos + n]
            server.received_into(n)
            pos += n
        ev = server.next_event()
        if ev is not NEED_DATA:
            break
    assert isinstance(ev, Request) and pos == len(data)
    rec = ev.body.topic_data[0].partition_data[0].records
    assert rec == records and not rec.readonly
    server.receive_data(b"")
    assert server.receive_buffer() is None
    with pytest.raises(LocalProtocolError):
        server.received_into(1)


_LOOKUP_FROM_THREADS = r"""
import sys, threading
from pylog.protocol import _records, _schema, connection

names = sorted(_schema.MESSAGES)
record_names = sorted(_records.MESSAGES)
keys = sorted(set(_schema.REQUESTS) | set(_schema.RESPONSES)) + [9999]
barrier = threading.Barrier(8)
seen = [None] * 8

def work(t):
    barrier.wait()
    got = {}
    for k in keys[t % 3:] + keys[: t % 3]:
        got["req", k] = connection.request_class(k)
        got["resp", k] = connection.response_class(k)
    for n in names[::-1] if t % 2 else names:
        got["schema", n] = _schema.load(n)
    for n in record_names:
        got["record", n] = _records.load(n)
    seen[t] = got

threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
for th in threads:
    th.start()
for th in threads:
    th.join()
first = seen[0]
assert first is not None and all(s is not None and s.keys() == first.keys() for s in seen)
for key, cls in first.items():
    assert all(s[key] is cls for s in seen), key
assert first["req", 9999] is None
print("same classes", len(first))
"""


def test_lazy_class_lookups_give_one_class_to_many_threads_at_once() -> None:
    # request_class / response_class and the generated packages' load() fill module-level
    # caches on first use; racing first uses from many threads (the broker's loop, client
    # threads, Spark readers) must all get the same class. A fresh interpreter starts with
    # empty caches.
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _LOOKUP_FROM_THREADS], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("same classes ")
