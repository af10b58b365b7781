"""Connections of SASL listeners (SASL_PLAINTEXT, SASL_SSL): ``net.Connection`` plus the
authenticator (``pylog.security.sasl.authenticator``), so that PLAINTEXT and SSL connections
run the unchanged, check-free request path.

Per request: the authenticator says whether it may be handled (before authentication only
ApiVersions, SaslHandshake and SaslAuthenticate; after an expired session only a
re-authentication); anything else closes the connection with one log line. SaslHandshake and
SaslAuthenticate go through the dispatcher like every request, with ``ctx.sasl`` set to this
connection's authenticator (their handlers: ``handlers/sasl_*.py``). After a v0 handshake
tokens arrive as raw frames (``SaslToken``) and are answered raw.

A failed authentication is answered after ``connection.failed.authentication.delay.ms``
and the connection is then closed (one attempt per connection, as Kafka); the reason (naming
the user) is logged at INFO on ``pylog.security.authentication``, the client sees only the
mechanism's fixed sentence. Frames over ``sasl.server.max.receive.size`` before
authentication close the connection before their memory is reserved.

Event-loop affinity: the broker's loop.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Any

from pylog.broker import handlers
from pylog.broker.net import Connection, auth_log
from pylog.protocol.connection import Request
from pylog.protocol.sasl_connection import SaslServerConnection, SaslToken

if TYPE_CHECKING:
    import ssl

    from pylog.broker.server import Broker
    from pylog.security.sasl.listener import ListenerSasl

SASL_APIS = frozenset({17, 36})


class SaslConnection(Connection):
    """A SASL listener's connection (see the module docstring)."""

    def __init__(self, broker: Broker, sock: socket.socket, addr: Any, listener: str,
                 tls: ssl.SSLContext | None, sasl: ListenerSasl) -> None:
        super().__init__(broker, sock, addr, listener, tls, None)
        self.conn: SaslServerConnection = SaslServerConnection(broker.config["socket.request.max.bytes"], admission=True,
                                         supported=broker.api_supported,
                                         advertised=broker.api_advertised)
        self._listener_sasl = sasl
        self.sasl = sasl.authenticator()
        self._reauths = 0

    # The authenticator refuses frames in _admit, which awaits: the reader is a task.
    _read_by_callback = False

    async def _admit(self, size: int) -> None:
        if not self.sasl.authenticated and size > self._listener_sasl.max_receive_size:
            auth_log.warning("connection %s (listener %s): closing: a %d-byte frame before "
                             "authentication (sasl.server.max.receive.size %d)", self.peer,
                             self.listener, size, self._listener_sasl.max_receive_size)
            self._abort()
            raise asyncio.CancelledError
        await super()._admit(size)

    async def _handle(self, event: Any) -> list[Any] | None:
        auth = self.sasl
        if type(event) is SaslToken:
            outcome = auth.on_token(event.token, raw=True)
            if auth.failed:
                await self._failed()
                self._close_requested = True
                return None  # v0 framing has no way to carry an error: close
            self._after_exchange()
            return SaslServerConnection.send_token(outcome.token)
        reason = auth.admits(event.api_key)
        if reason is not None:
            auth_log.warning("connection %s (listener %s, %s): closing: %s", self.peer,
                             self.listener, auth.principal or "not authenticated", reason)
            self._close_requested = True
            return None
        if event.api_key not in SASL_APIS or type(event) is not Request:
            return await super()._handle(event)
        ctx = handlers.RequestContext(self.broker, event.api_key, event.api_version,
                                      event.correlation_id, event.client_id, self.peer,
                                      listener=self.listener, principal=self.principal)
        ctx.sasl = auth
        response = await handlers.dispatch(ctx, event.body)
        if auth.failed:
            await self._failed()
            if response is not None:
                await self._write(self.conn.send(event, response))
            self._closing = True
            raise ConnectionAbortedError("SASL authentication failed")
        self._after_exchange()
        if response is None or self._peer_closed:
            return None
        return self.conn.send(event, response)

    def _after_exchange(self) -> None:
        auth = self.sasl
        self.conn.raw_tokens = auth.raw
        if auth.reauthentications != self._reauths:
            self._reauths = auth.reauthentications
            auth_log.info("connection %s (listener %s): %s re-authenticated (%s)", self.peer,
                          self.listener, auth.principal, auth.mechanism)
        principal = auth.principal
        if principal is not None and auth.authenticated and principal != self.principal:
            self.principal = principal
            self.user = principal.split(":", 1)[1]
            auth_log.info("connection %s (listener %s): authenticated as %s (%s)", self.peer,
                          self.listener, self.principal, auth.mechanism)

    async def _failed(self) -> None:
        auth_log.info("connection %s (listener %s): authentication failed: %s", self.peer,
                      self.listener, self.sasl.failure)
        delay = self._listener_sasl.failed_delay_ms
        if delay > 0:
            await self.broker.clock.sleep(delay / 1000.0)


__all__ = ["SaslConnection"]
