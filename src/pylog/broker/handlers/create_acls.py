"""CreateAcls (key 30), versions 1-3: store ACL bindings, each validated on its own
(INVALID_REQUEST for one that cannot be stored). Needs ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._acls import binding_from_wire, service
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import CreateAclsResponse
from pylog.security.acl import AclOperation

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = CreateAclsResponse


async def handle_create_acls(ctx: RequestContext, request: Any) -> Any:
    acls = service(ctx, AclOperation.ALTER)
    results = await acls.create([binding_from_wire(c) for c in request.creations])
    return _R(throttle_time_ms=0, results=[
        _R.AclCreationResult(error_code=code, error_message=message) for code, message in results])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, results=[
        _R.AclCreationResult(error_code=code, error_message=message) for _ in request.creations])
