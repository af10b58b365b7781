"""DescribeAcls (key 29), versions 1-3 (v0 was removed in Kafka 4, KIP-896): the ACLs a
filter matches, grouped by resource pattern. Needs DESCRIBE on the cluster."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._acls import filter_from_wire, service
from pylog.broker.handlers._context import RequestContext
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeAclsResponse
from pylog.security.acl import AclOperation

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeAclsResponse


async def handle_describe_acls(ctx: RequestContext, request: Any) -> Any:
    acls = service(ctx, AclOperation.DESCRIBE)
    flt = filter_from_wire(request)
    why = flt.invalid()
    if why is not None:
        raise errors.InvalidRequestError(why)
    grouped: dict[Any, list[Any]] = {}
    for pattern, entry in acls.describe(flt):
        grouped.setdefault(pattern, []).append(entry)
    return _R(
        throttle_time_ms=0, error_code=0, error_message=None,
        resources=[
            _R.DescribeAclsResource(
                resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                acls=[_R.AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                                        permission_type=e.permission_type) for e in entries])
            for p, entries in grouped.items()
        ],
    )


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
