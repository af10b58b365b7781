"""pylog.protocol: the Kafka wire protocol, sans-IO (bytes in, objects out, no sockets).

Generated from Kafka's own JSON message specs (``tools/kafka-protocol/message``) by
``tools/generate_protocol.py`` into ``pylog.protocol._schema``: every message and every
version in the specs, flexible versions included (compact strings/arrays/bytes, unsigned
varints, tagged fields; tagged fields equal to their defaults are not written).

Public API
==========

Messages (``pylog.protocol.messages`` or ``from pylog.protocol import FetchRequest``):
    One class per spec message, named as in the spec: ``ProduceRequest``, ``FetchResponse``,
    ``ApiVersionsRequest``, ``RequestHeader``... Fields are the spec's names snake_cased
    (``base_offset``, ``high_watermark``); nested structs are class attributes named as in
    the spec (``FetchResponse.FetchableTopicResponse``, ``FetchResponse.PartitionData``,
    ``MetadataResponse.MetadataResponseTopic``). Construct with keywords; every field has
    the spec's default (lists default to ``[]``)::

        P = FetchResponse.PartitionData
        resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
            topic="t", partitions=[P(partition_index=0, high_watermark=10, records=region)])])

    ``msg.encode(version) -> bytes``; ``Cls.decode(buf, version)``; ``Cls.decode_from(buf,
    pos, version) -> (msg, end)``; ``msg.encode_into(version, buf, out)``; ``msg.to_dict()``;
    ``==`` compares fields. Class attributes: ``API_KEY``, ``VALID_VERSIONS`` (lo, hi),
    ``FLEXIBLE_MIN``. Version is data: one class serves every version; fields absent at a
    version are ignored on encode and take their default on decode.

Records:
    ``records`` fields decode to a ``memoryview`` slice of the received frame (zero copy;
    valid as long as you keep it). On encode they take ``bytes``/``bytearray``/
    ``memoryview``, ``None``, or any placeholder object with a ``size`` attribute (logcore's
    ``FileRegion``): such an object is never read; it is passed through as its own chunk in
    the chunk list, after a length prefix computed from ``size``. Bytes-like values over
    ``codec.RECORDS_INLINE_MAX`` (16 KiB) are passed through as their own chunk too.

Broker side (``ServerConnection``, h11 style)::

    conn = ServerConnection()                # max_frame_size=100 MiB, supported=apis.SUPPORTED
    conn.receive_data(data)                  # b"" = EOF
    event = conn.next_event()
    #   Request        .api_key .api_version .correlation_id .client_id .body .size
    #                  .expects_response (False for Produce acks=0: send nothing)
    #   RequestError   same header fields + .error_code (42 bad body / 35 unsupported)
    #                  .reason .body (decoded if possible) .can_respond
    #   NEED_DATA      feed more bytes
    #   ConnectionClosed()  peer EOF after complete frames
    #   raises RemoteProtocolError on broken framing: conn.state is ERROR, close the socket
    chunks = conn.send(event, response_body)   # list: bytes-likes + untouched placeholders
    chunks = conn.send_error(request_error)    # INVALID_REQUEST / UNSUPPORTED_VERSION answer;
                                               # ApiVersions at an unknown version -> v0
                                               # layout listing apis.ADVERTISED (KIP-511)
    conn.close()

    Bytes after a request body are ignored, as Kafka ignores them (librdkafka 2.x pads its
    all-topics Metadata v12 request). A RequestError with ``can_respond`` False (unknown
    API key, version outside the schema) should close the connection, as Kafka does.

    Write the chunks in order; the first carries the int32 size prefix. For a chunk that is
    not bytes-like (a placeholder), send ``chunk.size`` bytes from it (``os.sendfile``).
    Responses must be written in request order (Kafka clients match by order).

Client side (``ClientConnection``)::

    conn = ClientConnection(client_id="pylog")
    chunks = conn.send(MetadataRequest(topics=None), 12)   # correlation ids assigned
    conn.receive_data(data); ev = conn.next_event()       # Response(.body .request ...)

Tables (``pylog.protocol.apis``): ``ApiKey`` (IntEnum), ``ADVERTISED`` and ``SUPPORTED``
({api_key: (min, max)}; Produce 0-11 advertised, 3-11 served), ``api_versions_keys()``
(the ApiVersionsResponse ``api_keys`` list), ``is_supported()``, ``api_name()``.

Framing (``pylog.protocol.framing``): ``FrameReader`` (``feed``/``next_frame``),
``MAX_FRAME_SIZE``, ``frame(payload)``. Errors (``pylog.errors``): ``RemoteProtocolError``
(peer sent garbage; ``.error_code``), ``LocalProtocolError`` (we built something illegal),
``FrameTooLargeError``.

Never imports asyncio, socket, time or logcore (``tests/unit/test_layering.py``).
"""

from __future__ import annotations

from typing import Any

from pylog.errors import FrameTooLargeError, LocalProtocolError, RemoteProtocolError
from pylog.protocol import _schema, apis
from pylog.protocol.apis import ADVERTISED, SUPPORTED, ApiKey
from pylog.protocol.codec import Message
from pylog.protocol.connection import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    ConnectionState,
    Request,
    RequestError,
    Response,
    ServerConnection,
    error_response,
    request_class,
    response_class,
)
from pylog.protocol.framing import MAX_FRAME_SIZE, FrameReader

__all__ = [
    "ADVERTISED",
    "SUPPORTED",
    "ApiKey",
    "ClientConnection",
    "ConnectionClosed",
    "ConnectionState",
    "FrameReader",
    "FrameTooLargeError",
    "LocalProtocolError",
    "MAX_FRAME_SIZE",
    "Message",
    "NEED_DATA",
    "RemoteProtocolError",
    "Request",
    "RequestError",
    "Response",
    "ServerConnection",
    "apis",
    "error_response",
    "request_class",
    "response_class",
]


def __getattr__(name: str) -> Any:
    # Message classes load lazily: ``from pylog.protocol import FetchRequest``.
    if name in _schema.MESSAGES:
        return _schema.load(name)
    raise AttributeError(f"module 'pylog.protocol' has no attribute {name!r}")
