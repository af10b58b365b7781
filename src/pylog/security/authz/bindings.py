"""ACL bindings and filters: Kafka's ``ResourcePattern``, ``AccessControlEntry``,
``AclBinding`` and their filters (``org.apache.kafka.common.acl``, ``.resource``).

A binding is (resource pattern, entry): ``(TOPIC, "orders", LITERAL)`` with
``("User:alice", "*", READ, ALLOW)``. Filters are what DescribeAcls and DeleteAcls send:
each field may be ANY (or None for strings), and the pattern type MATCH selects every
pattern that would apply to the named resource (the literal name, the ``*`` wildcard and
every prefix of it), Kafka's ``ResourcePatternFilter.matches``.

The names (``Topic``, ``Read``, ``IdempotentWrite``, ``Allow``) are Kafka's
``SecurityUtils`` Pascal-case names, the ones its ZooKeeper ACL nodes hold; the wire codes
are the enums' values. Immutable values; safe to share between threads.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from pylog.security.acl import AclOperation, ResourceType

__all__ = ["CLUSTER_NAME", "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE",
           "AccessControlEntry", "AclBinding", "AclBindingFilter", "AclPermissionType",
           "PatternType", "ResourcePattern", "operation_name", "parse_operation",
           "parse_permission", "parse_resource_type", "pascal", "validate_binding"]

#: The one cluster resource's name.
CLUSTER_NAME = "kafka-cluster"
#: The literal resource name that matches every resource of its type.
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def pascal(name: str) -> str:
    """Kafka's ``SecurityUtils.toPascalCase``: ``IDEMPOTENT_WRITE`` -> ``IdempotentWrite``."""
    return "".join(part.capitalize() for part in name.split("_"))


def operation_name(op: AclOperation) -> str:
    return pascal(op.name)


def _parser(enum_cls: type[enum.IntEnum]) -> dict[str, int]:
    out: dict[str, int] = {}
    for member in enum_cls:
        out[member.name] = member
        out[pascal(member.name).upper()] = member
    return out


_OPS, _PERMS, _TYPES, _PATTERNS = (_parser(AclOperation), _parser(AclPermissionType),
                                   _parser(ResourceType), _parser(PatternType))


def _parse(table: dict[str, int], enum_cls: type[enum.IntEnum], what: str, text: str) -> int:
    try:
        return enum_cls(table[text.replace("-", "_").upper()])
    except KeyError:
        raise ValueError(f"{text!r} is not an ACL {what}") from None


def parse_operation(text: str) -> AclOperation:
    """``Read``, ``READ``, ``IdempotentWrite``, ``idempotent_write`` ... -> the operation."""
    return AclOperation(_parse(_OPS, AclOperation, "operation", text))


def parse_permission(text: str) -> AclPermissionType:
    return AclPermissionType(_parse(_PERMS, AclPermissionType, "permission type", text))


def parse_resource_type(text: str) -> ResourceType:
    return ResourceType(_parse(_TYPES, ResourceType, "resource type", text))


def parse_pattern_type(text: str) -> PatternType:
    return PatternType(_parse(_PATTERNS, PatternType, "pattern type", text))


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:  # Kafka's ResourcePattern.toString, as its logs print it
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses ``binding`` (Kafka's ``AclControlManager.validateNewAcl`` and
    ``AuthorizerUtils``), or None when it may be stored."""
    p, e = binding
    if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "Invalid resourceType " + p.resource_type.name
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + p.pattern_type.name
    if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return "Invalid operation " + e.operation.name
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return "Invalid permissionType " + e.permission_type.name
    if not p.name:
        return "Resource name should not be empty"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if p.pattern_type == PatternType.PREFIXED and p.name == WILDCARD_RESOURCE:
        return "The wildcard name '*' is only valid with the LITERAL pattern type"
    if ":" not in e.principal or not e.principal.split(":", 1)[1]:
        return f"Could not parse principal from `{e.principal}` (no colon is present " \
               "separating the principal type from the principal name)"
    if not e.host:
        return "Host should not be empty"
    from pylog.security.acl import SUPPORTED_OPERATIONS
    if e.operation != AclOperation.ALL and e.operation not in SUPPORTED_OPERATIONS[p.resource_type]:
        return (f"ACL operation {e.operation.name} is not valid for resource type "
                f"{p.resource_type.name}")
    return None


class AclBindingFilter(NamedTuple):
    """A DescribeAcls / DeleteAcls filter (Kafka's ``AclBindingFilter``): None strings and
    the ANY enum values match everything; ``pattern_type`` MATCH matches every pattern that
    applies to ``name``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def invalid(self) -> str | None:
        """Why the filter is not usable (Kafka's ``findIndefiniteField``), else None."""
        for value, unknown in ((self.resource_type, ResourceType.UNKNOWN),
                               (self.pattern_type, PatternType.UNKNOWN),
                               (self.operation, AclOperation.UNKNOWN),
                               (self.permission_type, AclPermissionType.UNKNOWN)):
            if value == unknown:
                return f"Filter contains UNKNOWN elements: {type(value).__name__}"
        return None

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        ft = self.pattern_type
        if ft not in (PatternType.ANY, PatternType.MATCH) and ft != p.pattern_type:
            return False
        if self.name is None:
            return True
        if ft in (PatternType.ANY, PatternType.LITERAL, PatternType.PREFIXED) or ft == p.pattern_type:
            return self.name == p.name
        # MATCH: the patterns that would apply to a resource called self.name.
        if p.pattern_type == PatternType.LITERAL:
            return p.name == self.name or p.name == WILDCARD_RESOURCE
        if p.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(p.name)
        return False

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == AclOperation.ANY or self.operation == e.operation)
                and (self.permission_type == AclPermissionType.ANY
                     or self.permission_type == e.permission_type))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
