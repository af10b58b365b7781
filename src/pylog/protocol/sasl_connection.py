"""The server connection of a SASL listener: Kafka requests, or raw SASL tokens after a v0
SaslHandshake (KIP-43's original framing, before SaslAuthenticate existed)::

    token frame   int32 size | token bytes      (no Kafka request header)
    answer        int32 size | challenge bytes  (no Kafka response header)

The broker's authenticator sets ``raw_tokens`` after a v0 handshake and clears it once the
exchange completes; meanwhile every frame becomes a ``SaslToken`` event. A subclass, so that
connections of other listeners pay nothing for it. Not thread-safe (one loop owns it).
"""

from __future__ import annotations

import struct
from typing import Any

from pylog.protocol.connection import ServerConnection

_I32 = struct.Struct(">i")


class SaslToken:
    """A raw SASL token frame (``api_key`` -1: no Kafka request)."""

    __slots__ = ("token", "size")
    api_key = -1
    api_version = 0
    correlation_id = -1
    client_id = None
    expects_response = True

    def __init__(self, token: bytes, size: int) -> None:
        self.token = token
        self.size = size

    def __repr__(self) -> str:
        return f"SaslToken({self.size} bytes)"


class SaslServerConnection(ServerConnection):
    """``ServerConnection`` plus raw token frames (see the module docstring)."""

    __slots__ = ("raw_tokens",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.raw_tokens = False

    def next_event(self) -> Any:
        if not self.raw_tokens:
            return super().next_event()
        frame = self._next_frame()
        if type(frame) is not memoryview:
            return frame
        return SaslToken(bytes(frame), len(frame))

    @staticmethod
    def send_token(token: bytes) -> list[bytes]:
        """The chunks answering a raw token."""
        return [_I32.pack(len(token)) + bytes(token)]
