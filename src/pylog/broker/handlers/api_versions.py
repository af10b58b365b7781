"""ApiVersions (key 18), versions 0-4: the API ranges this broker implements.

The list is ``pylog.protocol.apis.ADVERTISED``, the one version table: every handler's
``VERSIONS`` is read from it (a test checks the two that the net work owns, produce and fetch).

A request at a version we do not know is answered by the connection layer in the v0 layout
with UNSUPPORTED_VERSION and the full list (KIP-511), so the client retries with a version
we support; this handler sees only supported versions.
"""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey, api_versions_keys
from pylog.protocol.messages import ApiVersionsResponse

API_KEY = ApiKey.API_VERSIONS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


def api_keys(table: dict[int, tuple[int, int]] | None = None) -> list[Any]:
    return api_versions_keys(table or ADVERTISED)


async def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    return ApiVersionsResponse(error_code=0, api_keys=api_keys(getattr(ctx.broker, "api_advertised", None)),
                               throttle_time_ms=0)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return ApiVersionsResponse(error_code=code, api_keys=api_keys(getattr(ctx.broker, "api_advertised", None)),
                               throttle_time_ms=0)
