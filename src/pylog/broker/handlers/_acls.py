"""Helpers shared by the ACL handlers (DescribeAcls, CreateAcls, DeleteAcls): wire fields
to bindings and filters, and the checks every one of them makes first (Kafka's
``AclApis``: SECURITY_DISABLED without an authorizer, then DESCRIBE or ALTER on the
cluster)."""

from __future__ import annotations

from typing import Any

from pylog import errors
from pylog.broker.handlers._authz import require_cluster
from pylog.broker.handlers._context import RequestContext
from pylog.security.acl import AclOperation, ResourceType
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from pylog.security.authz.service import AclService

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN: refused by the validation that follows


def service(ctx: RequestContext, op: AclOperation) -> AclService:
    """The broker's ACL service after the checks; raises SECURITY_DISABLED or
    CLUSTER_AUTHORIZATION_FAILED."""
    acls = ctx.broker.acls
    if acls is None:
        raise errors.SecurityDisabledError(NO_AUTHORIZER)
    require_cluster(ctx, op)
    return acls


def binding_from_wire(c: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(_enum(ResourceType, c.resource_type), c.resource_name,
                        _enum(PatternType, c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, _enum(AclOperation, c.operation),
                           _enum(AclPermissionType, c.permission_type)))


def filter_from_wire(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
        _enum(AclOperation, f.operation), _enum(AclPermissionType, f.permission_type))
