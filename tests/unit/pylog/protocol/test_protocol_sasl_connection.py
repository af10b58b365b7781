"""``SaslServerConnection``: Kafka requests until ``raw_tokens`` is set (after a v0
SaslHandshake), then raw token frames, answered raw; any split of the bytes gives the same
events; a lying size prefix is a protocol error as for requests."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import RemoteProtocolError
from pylog.protocol.connection import NEED_DATA, ClientConnection, Request
from pylog.protocol.messages import SaslHandshakeRequest
from pylog.protocol.sasl_connection import SaslServerConnection, SaslToken


def test_requests_then_raw_tokens() -> None:
    client = ClientConnection(client_id="t")
    server = SaslServerConnection()
    server.receive_data(b"".join(client.send(SaslHandshakeRequest(mechanism="PLAIN"), 0)))
    event = server.next_event()
    assert type(event) is Request and event.body.mechanism == "PLAIN"
    server.raw_tokens = True
    token = b"\x00alice\x00secret"
    data = struct.pack(">i", len(token)) + token
    for i in range(len(data)):  # any split
        server.receive_data(data[i:i + 1])
        event = server.next_event()
        if i < len(data) - 1:
            assert event is NEED_DATA
    assert type(event) is SaslToken and event.token == token and event.size == len(token)
    assert SaslServerConnection.send_token(b"ok") == [b"\x00\x00\x00\x02ok"]
    server.receive_data(struct.pack(">i", 0))
    empty = server.next_event()
    assert type(empty) is SaslToken and empty.token == b""


def test_lying_raw_size_is_a_protocol_error() -> None:
    server = SaslServerConnection(max_frame_size=1024)
    server.raw_tokens = True
    server.receive_data(struct.pack(">i", 1 << 30))
    with pytest.raises(RemoteProtocolError):
        server.next_event()
