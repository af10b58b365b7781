"""The ACL authorizer's index (literal names, the ``*`` wildcard, prefix lengths) and its
decision cache answer as a brute-force scan of every binding with Kafka's rules does: deny
wins, implied operations allow DESCRIBE and DESCRIBE_CONFIGS, ``User:*`` and host ``*``
match everyone, ``allow.everyone.if.no.acl.found`` applies when no ACL at all applies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pylog.security.acl import AclOperation as Op
from pylog.security.acl import ResourceType as RT
from pylog.security.authz.authorizer import AclAuthorizer, AclSnapshot
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"


def acl(rt: RT, name: str, principal: str, op: Op, perm: AclPermissionType = ALLOW,
        pattern: PatternType = LIT, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern), AccessControlEntry(principal, host, op, perm))


def authz(*bindings: AclBinding, everyone: bool = False) -> AclAuthorizer:
    a = AclAuthorizer((), everyone)
    a.install(AclSnapshot(bindings))
    return a


_names = st.sampled_from(["", "a", "ab", "abc", "b", "*", "ba"])
_bindings = st.builds(
    lambda rt, name, pattern, principal, host, op, perm: acl(
        rt, name if not (pattern == PRE and name == "*") else "a", principal, op, perm, pattern, host),
    st.sampled_from([RT.TOPIC, RT.GROUP]), _names, st.sampled_from([LIT, PRE]),
    st.sampled_from([ALICE, BOB, "User:*"]), st.sampled_from(["*", "h1", "h2"]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS]),
    st.sampled_from([ALLOW, DENY]))


def _brute(bindings: list[AclBinding], principal: str, host: str, op: Op, rt: RT, name: str,
           everyone: bool) -> bool:
    def applies(p: ResourcePattern) -> bool:
        if p.resource_type != rt:
            return False
        if p.pattern_type == LIT:
            return p.name == name or p.name == "*"
        return name.startswith(p.name)
    relevant = [b.entry for b in bindings if applies(b.pattern)]
    if not relevant:
        return everyone
    mine = [e for e in relevant if e.principal in (principal, "User:*") and e.host in (host, "*")]
    if any(e.permission_type == DENY and e.operation in (op, Op.ALL) for e in mine):
        return False
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
               Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}.get(op, set())
    return any(e.permission_type == ALLOW and e.operation in {op, Op.ALL} | implied for e in mine)


@settings(max_examples=300, deadline=None)
@given(st.lists(_bindings, max_size=12), st.sampled_from([ALICE, BOB]), st.sampled_from(["h1", "h2"]),
       st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS]),
       st.sampled_from([RT.TOPIC, RT.GROUP]), _names.filter(lambda n: n != ""), st.booleans())
def test_index_agrees_with_a_scan(bindings, principal, host, op, rt, name, everyone) -> None:
    a = authz(*bindings, everyone=everyone)
    expected = _brute(bindings, principal, host, op, rt, name, everyone)
    assert a.authorize(principal, host, op, rt, name) == expected
    assert a.authorize(principal, host, op, rt, name) == expected  # cached
