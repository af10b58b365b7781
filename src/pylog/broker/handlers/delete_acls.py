"""DeleteAcls (key 31), versions 1-3: remove every ACL each filter matches (MATCH and ANY
pattern types as Kafka's ``AclBindingFilter``), answering per filter what was removed.
Needs ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from pylog.broker.handlers._acls import filter_from_wire, service
from pylog.broker.handlers._context import RequestContext
from pylog.errors import InvalidRequestError
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DeleteAclsResponse
from pylog.security.acl import AclOperation

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DeleteAclsResponse


async def handle_delete_acls(ctx: RequestContext, request: Any) -> Any:
    acls = service(ctx, AclOperation.ALTER)
    filters = [filter_from_wire(f) for f in request.filters]
    valid = [f for f in filters if f.invalid() is None]
    matched = iter(await acls.delete(valid))
    results = []
    for f in filters:
        why = f.invalid()
        if why is not None:
            results.append(_R.DeleteAclsFilterResult(
                error_code=InvalidRequestError.code, error_message=why, matching_acls=[]))
            continue
        results.append(_R.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            _R.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=p.resource_type,
                resource_name=p.name, pattern_type=p.pattern_type, principal=e.principal,
                host=e.host, operation=e.operation, permission_type=e.permission_type)
            for p, e in next(matched)]))
    return _R(throttle_time_ms=0, filter_results=results)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, filter_results=[
        _R.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
        for _ in request.filters])
