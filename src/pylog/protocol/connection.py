"""Kafka connection state machines, sans-IO (after h11's ``_connection.py``).

Bytes in, events out; objects in, chunks out. No sockets, no event loop, no clocks:
the broker's ``net.py`` (or a test) feeds ``receive_data()``, drains ``next_event()`` and
writes the chunk lists that ``send()`` returns.

Frame layouts (https://kafka.apache.org/protocol.html#protocol_messages)::

    request   int32 size | int16 api_key | int16 api_version | int32 correlation_id
              | int16-length nullable client_id (header v1+, never compact)
              | TAGGED_FIELDS (header v2, when the request version is flexible) | body
    response  int32 size | int32 correlation_id
              | TAGGED_FIELDS (header v1, when the response version is flexible,
                except ApiVersionsResponse: always header v0) | body

States (one table, one ``_set_state``)::

    OPEN --remote_error--> ERROR --close--> CLOSED
    OPEN --peer_closed---> CLOSED
    OPEN --close---------> CLOSED

``ERROR`` is entered on broken framing (bad size prefix, undecodable header, an
unexpected correlation id on the client side); from there ``next_event()`` raises again and
``send()`` refuses: only ``close()`` is legal. A request whose header decodes but whose body
does not, or whose version is not served, is *not* a framing error: the broker gets a
``RequestError`` event and may answer it (``INVALID_REQUEST`` 42, ``UNSUPPORTED_VERSION``
35), and the connection stays ``OPEN``.

Connections are not thread-safe: each is owned by one task on one event loop.
"""

from __future__ import annotations

import enum
import struct
from typing import Any

from pylog.errors import LocalProtocolError, RemoteProtocolError
from pylog.protocol import _schema
from pylog.protocol.apis import ADVERTISED, SUPPORTED, ApiKey, api_name, api_versions_keys
from pylog.protocol.codec import Message, encode_frame, skip_tags
from pylog.protocol.framing import MAX_FRAME_SIZE, FrameReader

__all__ = [
    "ConnectionState",
    "NEED_DATA",
    "Request",
    "RequestError",
    "Response",
    "ConnectionClosed",
    "ServerConnection",
    "ClientConnection",
    "request_class",
    "response_class",
    "error_response",
]

INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35

#: Spare frame buffers a client connection keeps for reuse (FrameReader ``spares``).
CLIENT_SPARES = 4

_hhi = struct.Struct(">hhi")
_i32 = struct.Struct(">i")
_i16 = struct.Struct(">h")


class ConnectionState(enum.Enum):
    OPEN = "OPEN"
    ERROR = "ERROR"
    CLOSED = "CLOSED"


OPEN, ERROR, CLOSED = ConnectionState.OPEN, ConnectionState.ERROR, ConnectionState.CLOSED

# (state, trigger) -> next state. Anything missing is illegal (LocalProtocolError).
_TRANSITIONS: dict[tuple[ConnectionState, str], ConnectionState] = {
    (OPEN, "remote_error"): ERROR,
    (OPEN, "peer_closed"): CLOSED,
    (OPEN, "close"): CLOSED,
    (ERROR, "remote_error"): ERROR,
    (ERROR, "close"): CLOSED,
    (CLOSED, "close"): CLOSED,
}


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Any = _NeedData()
"""Returned by ``next_event()`` when no complete frame is buffered."""


class ConnectionClosed:
    """The peer closed its side and every complete frame before that was returned."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ConnectionClosed()"

    def __eq__(self, other: object) -> bool:
        return type(other) is ConnectionClosed

    __hash__ = object.__hash__


class Request:
    """A decoded request (broker side).

    Attributes:
        api_key, api_version, correlation_id, client_id: from the request header.
        body: the generated request object (e.g. ``FetchRequest``); its ``records`` fields
            are memoryview slices of the received frame (zero copy; writable when the
            frame was large enough to be received in place, see ``receive_buffer``).
        size: the frame's size in bytes (without the 4-byte prefix).
        expects_response: False only for Produce with ``acks == 0``, which Kafka never
            answers (``send`` must not be called for it).
    """

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "body", "size",
                 "expects_response")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None, body: Any, size: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body = body
        self.size = size
        self.expects_response = not (api_key == 0 and getattr(body, "acks", 1) == 0)

    def __repr__(self) -> str:
        return (f"Request({api_name(self.api_key)} v{self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


class RequestError:
    """A request whose header decoded but which cannot be served as sent (broker side).

    Attributes:
        api_key, api_version, correlation_id, client_id: from the request header.
        error_code: ``UNSUPPORTED_VERSION`` (35) for an unknown API key or a version not
            served, ``INVALID_REQUEST`` (42) for a body that does not decode.
        reason: why, for the broker's log line.
        body: the decoded body when the version is decodable but not served (so a handler
            can build per-partition errors), else None.
        can_respond: whether ``ServerConnection.send_error`` can encode an answer. False for
            an unknown API key and for a version outside the schema (except ApiVersions,
            answered in the v0 layout per KIP-511): the broker should close the connection,
            as Kafka does.
        response_version: the version an error response is encoded at.
    """

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "error_code",
                 "reason", "body", "can_respond", "response_version", "size")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None, error_code: int, reason: str, *, body: Any = None,
                 can_respond: bool = True, response_version: int | None = None,
                 size: int = 0) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.error_code = error_code
        self.reason = reason
        self.body = body
        self.can_respond = can_respond
        self.response_version = api_version if response_version is None else response_version
        self.size = size

    expects_response = True

    def __repr__(self) -> str:
        return (f"RequestError({api_name(self.api_key)} v{self.api_version}, "
                f"correlation_id={self.correlation_id}, error_code={self.error_code}, "
                f"reason={self.reason!r})")


class Response:
    """A decoded response (client side). ``request`` is the body that was sent."""

    __slots__ = ("api_key", "api_version", "correlation_id", "body", "request")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, body: Any,
                 request: Any) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.body = body
        self.request = request

    def __repr__(self) -> str:
        return (f"Response({api_name(self.api_key)} v{self.api_version}, "
                f"correlation_id={self.correlation_id})")


# --------------------------------------------------------------------------- class lookup

_REQ: dict[int, type[Message] | None] = {}
_RESP: dict[int, type[Message] | None] = {}


def request_class(api_key: int) -> Any:
    """The generated request class for an API key, or None if the specs have none."""
    try:
        return _REQ[api_key]
    except KeyError:
        name = _schema.REQUESTS.get(api_key)
        cls = _REQ[api_key] = _schema.load(name) if name else None
        return cls


def response_class(api_key: int) -> Any:
    """The generated response class for an API key, or None if the specs have none."""
    try:
        return _RESP[api_key]
    except KeyError:
        name = _schema.RESPONSES.get(api_key)
        cls = _RESP[api_key] = _schema.load(name) if name else None
        return cls


def _request_header_version(cls: Any, api_key: int, version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if cls.is_flexible(version) else 1


def _response_header_version(cls: Any, api_key: int, version: int) -> int:
    # ApiVersionsResponse keeps header v0 in every version so that a client can always
    # read the correlation id and error code, whatever version the broker answered with.
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if cls.is_flexible(version) else 0


_RequestHeader: Any = _schema.load("RequestHeader")


def error_response(api_key: int, version: int, error_code: int,
                   advertised: dict[int, tuple[int, int]] | None = None) -> Any:
    """A response for ``api_key`` carrying ``error_code`` at the top level.

    Every field keeps its default; a top-level ``error_code`` field, where the response
    has one, gets the code. An ApiVersionsResponse also lists ``advertised`` (KIP-511: a
    client that sent too new a version retries with the highest one listed). Responses
    without a top-level error code (Produce, Fetch < 7, Metadata) come out empty: handlers
    that can name the partitions should build per-partition errors instead.
    """
    cls = response_class(api_key)
    if cls is None:
        raise LocalProtocolError(f"no response message for API key {api_key}")
    obj = cls()
    if "error_code" in cls.__slots__:
        obj.error_code = error_code
    if api_key == ApiKey.API_VERSIONS:
        obj.api_keys = api_versions_keys(ADVERTISED if advertised is None else advertised)
    return obj


# --------------------------------------------------------------------------- connections


class _Connection:
    __slots__ = ("_state", "_reader", "_eof")

    def __init__(self, max_frame_size: int, admission: bool = False, spares: int = 1) -> None:
        self._state = OPEN
        self._reader = FrameReader(max_frame_size, admission=admission, spares=spares)
        self._eof = False

    @property
    def state(self) -> ConnectionState:
        return self._state

    def _set_state(self, trigger: str) -> None:
        nxt = _TRANSITIONS.get((self._state, trigger))
        if nxt is None:
            raise LocalProtocolError(f"cannot {trigger} a connection in state {self._state.name}")
        self._state = nxt

    @property
    def buffered(self) -> int:
        """Bytes received and not yet turned into events."""
        return self._reader.buffered

    def receive_data(self, data: Any) -> None:
        """Feed bytes read from the peer; ``b""`` means the peer closed (EOF).

        Raises:
            LocalProtocolError: data after EOF, or on a connection in ERROR or CLOSED
                (after a protocol error only ``close()`` is legal).
        """
        if self._state is not OPEN:
            raise LocalProtocolError(f"receive_data on a connection in state {self._state.name}")
        if self._eof:
            raise LocalProtocolError("receive_data after EOF")
        if data:
            self._reader.feed(data)
        else:
            self._eof = True

    @property
    def awaiting_admission(self) -> int:
        """Size of the next frame when it waits to be admitted (``admission=True``), else
        -1. Reserve that much memory, then ``admit_frame()``; read nothing meanwhile.
        See ``framing.FrameReader.awaiting_admission``."""
        if self._state is not OPEN:
            return -1
        return self._reader.awaiting_admission

    def admit_frame(self) -> None:
        """Admit the frame ``awaiting_admission`` names.

        Raises:
            LocalProtocolError: no frame awaits admission.
        """
        try:
            self._reader.admit()
        except ValueError as exc:
            raise LocalProtocolError(str(exc)) from None

    @property
    def spare_bytes(self) -> int:
        """Bytes of the receive buffer kept for reuse (``FrameReader.spare_bytes``)."""
        return self._reader.spare_bytes

    def drop_spare(self) -> None:
        """Forget the receive buffer kept for reuse (``FrameReader.drop_spare``)."""
        self._reader.drop_spare()

    def receive_buffer(self) -> memoryview | None:
        """A writable view to ``recv_into`` while a large frame is incomplete, else None
        (then read into a new buffer and ``receive_data`` it). After filling it, release
        the view and call ``received_into(n)``; ``n == 0`` (EOF) goes to
        ``receive_data(b"")`` instead. See ``framing.FrameReader.receive_buffer``.
        """
        if self._state is not OPEN or self._eof:
            return None
        return self._reader.receive_buffer()

    def received_into(self, n: int) -> None:
        """Record ``n`` bytes written into the last ``receive_buffer()`` view.

        Raises:
            LocalProtocolError: not OPEN, after EOF, or ``n`` does not fit that view.
        """
        if self._state is not OPEN:
            raise LocalProtocolError(f"received_into on a connection in state {self._state.name}")
        if self._eof:
            raise LocalProtocolError("received_into after EOF")
        try:
            self._reader.received_into(n)
        except ValueError as exc:
            raise LocalProtocolError(str(exc)) from None

    def close(self) -> None:
        """Mark the connection closed (legal in every state; the caller closes the socket)."""
        self._set_state("close")

    def _next_frame(self) -> Any:
        """A frame memoryview, NEED_DATA, or a ConnectionClosed event."""
        if self._state is ERROR:
            raise RemoteProtocolError("connection is in ERROR after a protocol error; close it")
        if self._state is CLOSED:
            return ConnectionClosed()
        try:
            frame = self._reader.next_frame()
        except RemoteProtocolError:
            self._set_state("remote_error")
            raise
        if frame is None:
            if self._reader.awaiting_admission >= 0:
                return NEED_DATA  # the caller admits the frame first, even after EOF
            if self._eof:
                if self._reader.buffered:
                    self._set_state("remote_error")
                    raise RemoteProtocolError(
                        f"peer closed the connection mid-frame ({self._reader.buffered} bytes"
                        " of an incomplete frame)"
                    )
                self._set_state("peer_closed")
                return ConnectionClosed()
            return NEED_DATA
        return frame

    def _fail(self, message: str) -> RemoteProtocolError:
        self._set_state("remote_error")
        return RemoteProtocolError(message)


class ServerConnection(_Connection):
    """The broker side of one client connection.

    Usage::

        conn = ServerConnection()
        conn.receive_data(data)                  # bytes from the socket (b"" at EOF)
        while True:
            event = conn.next_event()            # Request | RequestError | NEED_DATA | ConnectionClosed
            if event is NEED_DATA: break
            if isinstance(event, Request):
                chunks = conn.send(event, FetchResponse(...))   # when the answer is ready
            elif isinstance(event, RequestError):
                if event.can_respond: chunks = conn.send_error(event)
                else: close the socket
        # write chunks in order: bytes-like chunks, and placeholders (FileRegion) via sendfile

    Args:
        max_frame_size: largest request accepted (``socket.request.max.bytes``).
        supported: {api_key: (min, max)} served on use (default ``apis.SUPPORTED``); requests
            outside it become ``RequestError(UNSUPPORTED_VERSION)`` with the decoded body.
        serve_all: ignore ``supported`` and serve every version the codec knows (tests).
        advertised: {api_key: (min, max)} listed in ApiVersions error answers (KIP-511).
        admission: hold each frame until ``admit_frame()`` (the broker's memory pool; see
            ``awaiting_admission``).

    Not thread-safe: one event loop owns it.
    """

    __slots__ = ("_supported", "_advertised", "_serve_all", "requests_received",
                 "responses_sent")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE, *,
                 supported: dict[int, tuple[int, int]] | None = None,
                 advertised: dict[int, tuple[int, int]] | None = None,
                 serve_all: bool = False, admission: bool = False) -> None:
        super().__init__(max_frame_size, admission)
        self._supported = SUPPORTED if supported is None else supported
        self._advertised = ADVERTISED if advertised is None else advertised
        self._serve_all = serve_all
        self.requests_received = 0
        self.responses_sent = 0

    def next_event(self) -> Any:
        """The next event from the bytes received so far.

        Returns:
            ``Request``, ``RequestError``, ``NEED_DATA`` (feed more bytes) or
            ``ConnectionClosed`` (EOF after whole frames).

        Raises:
            RemoteProtocolError: broken framing (size prefix negative or over the limit,
                frame too short for a header, undecodable header, EOF mid-frame). The
                connection is then in ``ERROR``: close it.
        """
        frame = self._next_frame()
        if type(frame) is not memoryview:
            return frame
        self.requests_received += 1
        return self._parse_request(frame)

    def _parse_request(self, frame: memoryview) -> Any:
        size = len(frame)
        if size < 8:
            raise self._fail(f"request frame of {size} bytes is too short for a header")
        api_key, version, correlation_id = _hhi.unpack_from(frame, 0)
        cls = request_class(api_key)
        if cls is None:
            # Unknown API: read the client id for the log line, then give up on the request.
            client_id = self._client_id_v1(frame)
            return RequestError(api_key, version, correlation_id, client_id,
                                UNSUPPORTED_VERSION, f"unknown API key {api_key}",
                                can_respond=False, size=size)
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            # The body will not be decoded: only the client id (header v1 part) is needed.
            client_id = self._client_id_v1(frame)
            if api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer in the v0 layout, listing what we support.
                return RequestError(api_key, version, correlation_id, client_id,
                                    UNSUPPORTED_VERSION,
                                    f"ApiVersions v{version} is newer than this broker knows",
                                    response_version=0, size=size)
            return RequestError(api_key, version, correlation_id, client_id,
                                UNSUPPORTED_VERSION,
                                f"{api_name(api_key)} v{version} is outside the schema ({lo}-{hi})",
                                can_respond=False, size=size)
        hv = _request_header_version(cls, api_key, version)
        try:
            header, pos = _RequestHeader.decode_from(frame, 0, hv)
        except RemoteProtocolError as exc:
            raise self._fail(f"undecodable request header: {exc}") from None
        client_id = header.client_id
        try:
            # Bytes after the body are ignored, as Kafka's broker ignores them: librdkafka
            # 2.x sends Metadata v12 "all topics" requests with 3 stray bytes (its reserved
            # array-count space is not erased for a null array), and Kafka serves them.
            body, _end = cls.decode_from(frame, pos, version)
        except RemoteProtocolError as exc:
            return RequestError(api_key, version, correlation_id, client_id, INVALID_REQUEST,
                                f"malformed {api_name(api_key)} v{version} request: {exc}",
                                size=size)
        if not self._serve_all:
            rng = self._supported.get(api_key)
            if rng is None or not rng[0] <= version <= rng[1]:
                return RequestError(api_key, version, correlation_id, client_id,
                                    UNSUPPORTED_VERSION,
                                    f"{api_name(api_key)} v{version} is not served"
                                    + (f" (served: {rng[0]}-{rng[1]})" if rng else ""),
                                    body=body, size=size)
        return Request(api_key, version, correlation_id, client_id, body, size)

    @staticmethod
    def _client_id_v1(frame: memoryview) -> str | None:
        try:
            header, _ = _RequestHeader.decode_from(frame, 0, 1)
            return header.client_id
        except RemoteProtocolError:
            return None

    def send(self, request: Any, response: Any) -> list:
        """Encode ``response`` as the answer to ``request`` (a ``Request`` or ``RequestError``).

        Returns:
            The frame as a list of chunks, in order: bytes-like objects and, for record
            data, the very objects put in ``records`` fields (e.g. a ``FileRegion``, to be
            sent with ``os.sendfile``). The first chunk carries the size prefix.

        Raises:
            LocalProtocolError: the connection is not OPEN, ``response`` is not the
                request's response class, or a field does not fit its wire type.
        """
        if self._state is not OPEN:
            raise LocalProtocolError(f"send on a connection in state {self._state.name}")
        api_key = request.api_key
        cls = response_class(api_key)
        if type(response) is not cls:
            raise LocalProtocolError(
                f"{type(response).__name__} is not the response to {api_name(api_key)}"
            )
        version = request.response_version if type(request) is RequestError else request.api_version
        buf = bytearray(4)
        buf += _i32.pack(request.correlation_id)
        if _response_header_version(cls, api_key, version):
            buf += b"\x00"
        out: list = []
        response.encode_into(version, buf, out)
        self.responses_sent += 1
        return encode_frame(out, buf)

    def send_error(self, request: Any, error_code: int | None = None) -> list:
        """Encode an error answer (``error_response``) to a ``RequestError`` or ``Request``.

        Args:
            request: the event being answered.
            error_code: defaults to the ``RequestError``'s code.

        Raises:
            LocalProtocolError: the event cannot be answered (``can_respond`` is False).
        """
        if type(request) is RequestError:
            if not request.can_respond:
                raise LocalProtocolError(f"cannot answer {request!r}: close the connection")
            code = request.error_code if error_code is None else error_code
            version = request.response_version
        else:
            if error_code is None:
                raise LocalProtocolError("send_error on a Request needs an error_code")
            code = error_code
            version = request.api_version
        body = error_response(request.api_key, version, code, self._advertised)
        return self.send(request, body)


class ClientConnection(_Connection):
    """The client side: encode requests, decode responses (pylog's CLI, client and tests).

    Usage::

        conn = ClientConnection(client_id="pylog")
        chunks = conn.send(MetadataRequest(topics=None), version=12)
        ... write chunks, then feed what comes back ...
        conn.receive_data(data)
        event = conn.next_event()   # Response | NEED_DATA | ConnectionClosed

    Correlation ids count up from 0 (or pass ``correlation_id``). Produce with
    ``acks == 0`` registers nothing: Kafka sends no response to it. An ApiVersions answer
    with UNSUPPORTED_VERSION is decoded in the v0 layout whatever version was sent (KIP-511).

    Not thread-safe.
    """

    __slots__ = ("client_id", "_next_id", "_pending")

    def __init__(self, client_id: str | None = "pylog", max_frame_size: int = MAX_FRAME_SIZE,
                 spares: int = CLIENT_SPARES) -> None:
        # Several spare frame buffers (FrameReader): a consumer holds one fetch's data
        # while the next arrives, and columns may point into a response.
        super().__init__(max_frame_size, spares=spares)
        self.client_id = client_id
        self._next_id = 0
        self._pending: dict[int, tuple[int, int, Any]] = {}

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    def send(self, body: Any, version: int, *, correlation_id: int | None = None) -> list:
        """Encode a request frame (chunks, the first with the size prefix).

        Raises:
            LocalProtocolError: not OPEN, not a request message, unknown version, a
                correlation id already in flight, or a field that does not fit.
        """
        if self._state is not OPEN:
            raise LocalProtocolError(f"send on a connection in state {self._state.name}")
        cls = type(body)
        if getattr(cls, "MESSAGE_TYPE", None) != "request":
            raise LocalProtocolError(f"{cls.__name__} is not a request message")
        api_key = cls.API_KEY
        lo, hi = cls.VALID_VERSIONS
        if not lo <= version <= hi:
            raise LocalProtocolError(f"{cls.NAME} has no version {version} (valid {lo}-{hi})")
        if correlation_id is None:
            correlation_id = self._next_id
            self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        if correlation_id in self._pending:
            raise LocalProtocolError(f"correlation id {correlation_id} is already in flight")
        hv = _request_header_version(cls, api_key, version)
        header = _RequestHeader(request_api_key=api_key, request_api_version=version,
                                correlation_id=correlation_id, client_id=self.client_id)
        buf = bytearray(4)
        out: list = []
        header.encode_into(hv, buf, out)
        body.encode_into(version, buf, out)
        if not (api_key == ApiKey.PRODUCE and body.acks == 0):
            self._pending[correlation_id] = (api_key, version, body)
        return encode_frame(out, buf)

    def next_event(self) -> Any:
        """The next ``Response``, ``NEED_DATA`` or ``ConnectionClosed``.

        Raises:
            RemoteProtocolError: broken framing, an unknown correlation id, or a response
                that does not decode; the connection is then in ``ERROR``.
        """
        frame = self._next_frame()
        if type(frame) is not memoryview:
            return frame
        if len(frame) < 4:
            raise self._fail(f"response frame of {len(frame)} bytes is too short for a header")
        (correlation_id,) = _i32.unpack_from(frame, 0)
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            raise self._fail(f"response with unknown correlation id {correlation_id}")
        api_key, version, request = pending
        cls = response_class(api_key)
        try:
            pos = 4
            if _response_header_version(cls, api_key, version):
                pos = skip_tags(frame, 4)
            if (api_key == ApiKey.API_VERSIONS and version > 0 and len(frame) >= pos + 2
                    and _i16.unpack_from(frame, pos)[0] == UNSUPPORTED_VERSION):
                version = 0  # KIP-511: the broker answered in the v0 layout
            try:
                body, end = cls.decode_from(frame, pos, version)
                if end != len(frame):
                    raise RemoteProtocolError(f"{len(frame) - end} trailing bytes after the body")
            except RemoteProtocolError:
                if api_key != ApiKey.API_VERSIONS or version == 0:
                    raise
                # As Kafka's ApiVersionsResponse.parse: an older broker may answer any
                # ApiVersions version in the v0 layout; retry with it before giving up.
                version = 0
                body, end = cls.decode_from(frame, pos, 0)
                if end != len(frame):
                    raise RemoteProtocolError(
                        f"{len(frame) - end} trailing bytes after the body") from None
        except RemoteProtocolError as exc:
            raise self._fail(f"malformed {cls.NAME} v{version}: {exc}") from None
        except Exception as exc:  # struct.error etc. from the header
            raise self._fail(f"malformed {cls.NAME} v{version}: {exc!r}") from None
        return Response(api_key, version, correlation_id, body, request)
