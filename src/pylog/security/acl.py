"""Kafka's ACL vocabulary and the ``authorized_operations`` bit fields.

Metadata (v8+), DescribeCluster and DescribeGroups (v3+) carry, when the client asks
(``include_*_authorized_operations``), a 32-bit field with bit ``1 << op`` set for every
operation the principal may perform on the resource. A response that was not asked for
carries Kafka's "omitted" value, ``-2**31`` (only the sign bit). With no authorizer
configured Kafka answers every operation the resource type supports (``AclEntry
.supportedOperations``); that is what :func:`authorized_operations` returns.

The codes are Kafka's (``org.apache.kafka.common.acl.AclOperation`` and
``org.apache.kafka.common.resource.ResourceType``), as on the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "SUPPORTED_OPERATIONS", "AclOperation", "ResourceType",
           "authorized_operations", "operations_bitfield"]

#: The ``authorized_operations`` value of a response that was not asked for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_Op = AclOperation

#: The operations an ACL may name for each concrete resource type (Kafka's table).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE,
                                   _Op.ALTER, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                                     _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER,
                                     _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """The wire bit field: bit ``1 << op`` for each operation."""
    field = 0
    for op in operations:
        if not 0 <= op < 32:
            raise ValueError(f"operation code {int(op)} does not fit a 32-bit field")
        field |= 1 << op
    return field


_ALL_SUPPORTED = {rt: operations_bitfield(ops) for rt, ops in SUPPORTED_OPERATIONS.items()}


def authorized_operations(requested: bool, resource_type: ResourceType) -> int:
    """The ``authorized_operations`` field of one resource: omitted unless ``requested``;
    with no authorizer (pylog has none yet) every operation the type supports."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    try:
        return _ALL_SUPPORTED[resource_type]
    except KeyError:
        raise ValueError(f"{resource_type!r} is not a concrete resource type") from None
