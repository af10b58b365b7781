"""The authorizer's decisions (Kafka's AclAuthorizer semantics); the index against a
brute-force scan is in tests/property/test_authz_props.py."""

from __future__ import annotations

import pytest

from pylog.security.acl import AclOperation as Op
from pylog.security.acl import ResourceType as RT
from pylog.security.authz.authorizer import AclAuthorizer, AclSnapshot
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    validate_binding,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"


def acl(rt: RT, name: str, principal: str, op: Op, perm: AclPermissionType = ALLOW,
        pattern: PatternType = LIT, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern), AccessControlEntry(principal, host, op, perm))


def authz(*bindings: AclBinding, supers: tuple[str, ...] = (), everyone: bool = False) -> AclAuthorizer:
    a = AclAuthorizer(supers, everyone)
    a.install(AclSnapshot(bindings))
    return a


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not authz().authorize(ALICE, "1.2.3.4", Op.READ, RT.TOPIC, "t")
    assert authz(everyone=True).authorize(ALICE, "1.2.3.4", Op.READ, RT.TOPIC, "t")
    # An ACL for someone else on the resource: "no ACL found" no longer holds.
    a = authz(acl(RT.TOPIC, "t", BOB, Op.READ), everyone=True)
    assert not a.authorize(ALICE, "1.2.3.4", Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, "1.2.3.4", Op.READ, RT.TOPIC, "other")


def test_super_users_may_do_anything() -> None:
    a = authz(acl(RT.TOPIC, "*", ALICE, Op.ALL, DENY), supers=(ALICE,))
    assert a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "t")
    assert a.authorize(ALICE, "h", Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")


def test_literal_wildcard_and_prefixed_patterns() -> None:
    a = authz(acl(RT.TOPIC, "orders", ALICE, Op.READ),
              acl(RT.TOPIC, "*", BOB, Op.READ),
              acl(RT.TOPIC, "pay", ALICE, Op.WRITE, pattern=PRE))
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders2")
    assert a.authorize(BOB, "h", Op.READ, RT.TOPIC, "anything")
    assert not a.authorize(BOB, "h", Op.READ, RT.GROUP, "anything")  # per resource type
    assert a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "payments")
    assert a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "pay")
    assert not a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "pa")


def test_deny_wins_and_implied_operations() -> None:
    a = authz(acl(RT.TOPIC, "t", ALICE, Op.ALL), acl(RT.TOPIC, "t", ALICE, Op.WRITE, DENY))
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "t")
    # READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert authz(acl(RT.TOPIC, "t", ALICE, op)).authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t")
    b = authz(acl(RT.TOPIC, "t", ALICE, Op.ALTER_CONFIGS))
    assert b.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not b.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    # A DENY of READ does not deny DESCRIBE (implication applies to ALLOW only).
    c = authz(acl(RT.TOPIC, "t", ALICE, Op.READ, DENY), acl(RT.TOPIC, "t", ALICE, Op.DESCRIBE))
    assert c.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t")
    # A prefixed DENY beats a literal ALLOW.
    d = authz(acl(RT.TOPIC, "t", ALICE, Op.READ), acl(RT.TOPIC, "", ALICE, Op.READ, DENY, PRE))
    assert not d.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")


def test_principal_wildcard_and_hosts() -> None:
    a = authz(acl(RT.GROUP, "g", "User:*", Op.READ, host="10.0.0.1"))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.GROUP, "g")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, RT.GROUP, "g")


def test_install_forgets_cached_decisions() -> None:
    a = authz()
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    a.install(AclSnapshot([acl(RT.TOPIC, "t", ALICE, Op.READ)]))
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")


def test_authorize_by_resource_type() -> None:
    a = authz(acl(RT.TOPIC, "x", ALICE, Op.WRITE))
    assert a.authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not a.authorize_by_resource_type(BOB, "h", Op.WRITE, RT.TOPIC)
    b = authz(acl(RT.TOPIC, "x", ALICE, Op.WRITE), acl(RT.TOPIC, "*", ALICE, Op.WRITE, DENY))
    assert not b.authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)
    c = authz(acl(RT.TOPIC, "xy", ALICE, Op.WRITE), acl(RT.TOPIC, "x", ALICE, Op.WRITE, DENY, PRE))
    assert not c.authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)


def test_authorized_operations_bitfield() -> None:
    a = authz(acl(RT.TOPIC, "t", ALICE, Op.READ))
    field = a.authorized_operations(ALICE, "h", RT.TOPIC, "t")
    assert field == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_filters_match_as_kafka() -> None:
    lit = acl(RT.TOPIC, "orders", ALICE, Op.READ)
    star = acl(RT.TOPIC, "*", ALICE, Op.READ)
    pre = acl(RT.TOPIC, "ord", ALICE, Op.READ, pattern=PRE)
    match = AclBindingFilter(RT.TOPIC, "orders", PatternType.MATCH)
    assert all(match.matches(b) for b in (lit, star, pre))
    assert not match.matches(acl(RT.TOPIC, "orx", ALICE, Op.READ, pattern=PRE))
    any_ = AclBindingFilter(RT.TOPIC, "orders", PatternType.ANY)
    assert any_.matches(lit) and not any_.matches(star) and not any_.matches(pre)
    only_pre = AclBindingFilter(RT.ANY, None, PRE)
    assert only_pre.matches(pre) and not only_pre.matches(lit)
    assert AclBindingFilter(principal=BOB).matches(lit) is False
    assert AclBindingFilter(RT.UNKNOWN).invalid() is not None


@pytest.mark.parametrize("binding, why", [
    (acl(RT.CLUSTER, "other", ALICE, Op.ALTER), "kafka-cluster"),
    (acl(RT.TOPIC, "*", ALICE, Op.READ, pattern=PRE), "wildcard"),
    (acl(RT.GROUP, "g", ALICE, Op.WRITE), "not valid for resource type GROUP"),
    (acl(RT.TOPIC, "t", "alice", Op.READ), "principal"),
    (acl(RT.ANY, "t", ALICE, Op.READ), "resourceType"),
])
def test_invalid_bindings(binding: AclBinding, why: str) -> None:
    assert why in (validate_binding(binding) or "")
