"""SaslHandshake (key 17), versions 0-1 (KIP-43, KIP-152): pick the SASL mechanism.

On a SASL listener the connection's authenticator (``ctx.sasl``, set by
``pylog.broker.sasl_net``) decides; v0 means the tokens that follow are raw frames, v1 that
they come in SaslAuthenticate requests. On other listeners, and after the exchange, Kafka
answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import SaslHandshakeResponse

API_KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


async def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    auth = ctx.sasl
    if auth is None:
        return SaslHandshakeResponse(error_code=errors.IllegalSaslStateError.code, mechanisms=[])
    code, mechanisms = auth.on_handshake(ctx.api_version, request.mechanism)
    return SaslHandshakeResponse(error_code=code, mechanisms=mechanisms)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return SaslHandshakeResponse(error_code=code, mechanisms=[])
