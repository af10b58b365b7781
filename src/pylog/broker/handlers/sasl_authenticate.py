"""SaslAuthenticate (key 36), versions 0-2 (KIP-152; v1 adds ``session_lifetime_ms``,
KIP-368): one SASL token each way, through the connection's authenticator (``ctx.sasl``).
A failure answers SASL_AUTHENTICATION_FAILED with the mechanism's fixed sentence and the
connection is closed after it (``pylog.broker.sasl_net``). Without a SASL exchange in
progress: ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import SaslAuthenticateResponse

API_KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


async def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    auth = ctx.sasl
    if auth is None:
        return SaslAuthenticateResponse(error_code=errors.IllegalSaslStateError.code,
                                        error_message="SaslAuthenticate on a listener without "
                                        "SASL", auth_bytes=b"")
    outcome = auth.on_token(bytes(request.auth_bytes))
    return SaslAuthenticateResponse(error_code=outcome.error_code,
                                    error_message=outcome.error_message,
                                    auth_bytes=outcome.token,
                                    session_lifetime_ms=outcome.session_lifetime_ms)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=b"")
