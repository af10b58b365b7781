"""The authorized-operation bit fields (pylog.security.acl)."""

from __future__ import annotations

import pytest

from pylog.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
    authorized_operations,
    operations_bitfield,
)


def test_not_requested_is_kafkas_omitted_value() -> None:
    assert authorized_operations(False, ResourceType.TOPIC) == AUTHORIZED_OPERATIONS_OMITTED == -2147483648


@pytest.mark.parametrize(("rt", "bits"), [
    # Kafka with no authorizer: bit 1 << op for each supported operation of the type.
    (ResourceType.TOPIC, (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8)
     | (1 << 10) | (1 << 11)),
    (ResourceType.GROUP, (1 << 3) | (1 << 6) | (1 << 8)),
    (ResourceType.CLUSTER, (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11)
     | (1 << 12)),
    (ResourceType.TRANSACTIONAL_ID, (1 << 4) | (1 << 8)),
])
def test_requested_fields_hold_every_supported_operation(rt: ResourceType, bits: int) -> None:
    assert authorized_operations(True, rt) == bits
    assert bits < 2**31  # never the sign bit that means "omitted"


def test_bitfield_and_bad_types() -> None:
    assert operations_bitfield([AclOperation.READ, AclOperation.DESCRIBE]) == 0x108
    with pytest.raises(ValueError, match="not a concrete resource type"):
        authorized_operations(True, ResourceType.ANY)
