"""``pylog acls``: what kafka-acls.sh's flags turn into (resource patterns and entries)."""

from __future__ import annotations

import pytest

from pylog.cli import acls
from pylog.cli._common import CliError
from pylog.cli.main import build_parser
from pylog.security.acl import AclOperation as Op
from pylog.security.acl import ResourceType as RT
from pylog.security.authz.bindings import AclPermissionType, PatternType, ResourcePattern


def _parse(*argv: str):
    return build_parser().parse_args(["acls", *argv])


def test_explicit_operations_hosts_and_principals() -> None:
    args = _parse("add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
                  "--deny-principal", "User:*", "--operation", "Read", "--operation", "describe",
                  "--topic", "t", "--resource-pattern-type", "PREFIXED")
    got = acls._resource_acls(args)
    pattern = ResourcePattern(RT.TOPIC, "t", PatternType.PREFIXED)
    assert list(got) == [pattern]
    assert {(e.principal, e.host, e.operation, e.permission_type) for e in got[pattern]} == {
        ("User:alice", "10.0.0.1", Op.READ, AclPermissionType.ALLOW),
        ("User:alice", "10.0.0.1", Op.DESCRIBE, AclPermissionType.ALLOW),
        ("User:*", "*", Op.READ, AclPermissionType.DENY),
        ("User:*", "*", Op.DESCRIBE, AclPermissionType.DENY)}


def test_producer_and_consumer_conveniences() -> None:
    args = _parse("add", "--allow-principal", "User:bob", "--producer", "--idempotent",
                  "--consumer", "--topic", "t", "--group", "g", "--transactional-id", "tx")
    got = {p: {e.operation for e in es} for p, es in acls._resource_acls(args).items()}
    lit = PatternType.LITERAL
    assert got == {
        ResourcePattern(RT.TOPIC, "t", lit): {Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ},
        ResourcePattern(RT.GROUP, "g", lit): {Op.READ},
        ResourcePattern(RT.TRANSACTIONAL_ID, "tx", lit): {Op.WRITE, Op.DESCRIBE},
        ResourcePattern(RT.CLUSTER, "kafka-cluster", lit): {Op.IDEMPOTENT_WRITE},
    }


def test_refusals() -> None:
    with pytest.raises(CliError, match="at least one resource"):
        acls._resource_acls(_parse("add", "--allow-principal", "User:a"))
    with pytest.raises(CliError, match="principalType:principalName"):
        acls._resource_acls(_parse("add", "--allow-principal", "alice", "--topic", "t"))
    with pytest.raises(CliError, match="not an ACL operation"):
        acls._resource_acls(_parse("add", "--allow-principal", "User:a", "--operation", "Fly",
                                   "--topic", "t"))
    with pytest.raises(CliError, match="only available if --producer"):
        acls._resource_acls(_parse("add", "--allow-principal", "User:a", "--idempotent",
                                   "--topic", "t"))
    with pytest.raises(CliError, match="not valid when adding"):
        acls.add(_parse("add", "--allow-principal", "User:a", "--topic", "t",
                        "--resource-pattern-type", "match"))
