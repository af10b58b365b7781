"""Admin calls about ACLs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), sent to any
broker (each broker serves the cluster's ACLs; in cluster mode they live in ZooKeeper).

Bindings and filters are ``pylog.security.authz.bindings``' ``AclBinding`` (a
``ResourcePattern`` and an ``AccessControlEntry``) and ``AclBindingFilter``, Kafka's shapes.
Event-loop affinity: the admin's loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pylog import errors
from pylog.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from pylog.security.acl import AclOperation, ResourceType
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)


def _error(code: int, what: str, message: str | None) -> errors.ApiError:
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(f"{what}: {cls.name}" + (f": {message}" if message else ""))


def _binding(rtype: int, name: str, ptype: int, principal: str, host: str, op: int,
             perm: int) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType(rtype), name, PatternType(ptype)),
                      AccessControlEntry(principal, host, AclOperation(op), AclPermissionType(perm)))


async def create_acls(conn: Any, bindings: Iterable[AclBinding]) -> None:
    """Store every binding; raises the first binding's error (the others are stored)."""
    bindings = list(bindings)
    R = CreateAclsRequest
    resp = await conn.send(R(creations=[
        R.AclCreation(resource_type=p.resource_type, resource_name=p.name,
                      resource_pattern_type=p.pattern_type, principal=e.principal, host=e.host,
                      operation=e.operation, permission_type=e.permission_type)
        for p, e in bindings]))
    for b, r in zip(bindings, resp.results, strict=True):
        if r.error_code:
            raise _error(r.error_code, f"create ACL {b.entry} on {b.pattern}", r.error_message)


async def describe_acls(conn: Any, flt: AclBindingFilter) -> list[AclBinding]:
    resp = await conn.send(DescribeAclsRequest(
        resource_type_filter=flt.resource_type, resource_name_filter=flt.name,
        pattern_type_filter=flt.pattern_type, principal_filter=flt.principal,
        host_filter=flt.host, operation=flt.operation, permission_type=flt.permission_type))
    if resp.error_code:
        raise _error(resp.error_code, "describe ACLs", resp.error_message)
    return [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                     a.operation, a.permission_type)
            for r in resp.resources for a in r.acls]


async def delete_acls(conn: Any, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
    """Remove what each filter matches; returns every binding removed."""
    R = DeleteAclsRequest
    resp = await conn.send(R(filters=[
        R.DeleteAclsFilter(resource_type_filter=f.resource_type, resource_name_filter=f.name,
                           pattern_type_filter=f.pattern_type, principal_filter=f.principal,
                           host_filter=f.host, operation=f.operation,
                           permission_type=f.permission_type)
        for f in filters]))
    out: list[AclBinding] = []
    for r in resp.filter_results:
        if r.error_code:
            raise _error(r.error_code, "delete ACLs", r.error_message)
        out.extend(_binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                            m.operation, m.permission_type) for m in r.matching_acls)
    return out
