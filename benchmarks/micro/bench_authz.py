"""Micro benchmarks of the authorizer's checks (pylog.security.authz) with 1,000 unrelated
ACLs plus the principal's own (a PREFIXED pattern, the index's slower path):

- cached: ``AclAuthorizer.authorize`` answering from its decision cache (every check after
  the first for a (principal, host, operation, resource));
- uncached: the index lookup itself (literal name, ``*``, every prefix length present);
- produce check: what a one-topic Produce request pays in ``handlers/_authz.denied`` (the
  client's IP parsed from ``ctx.peer``, one cached decision), to set against a Produce
  request's whole handling time (``benchmarks/RESULTS.md``).

    .venv/bin/python -m pytest benchmarks/micro/bench_authz.py --benchmark-columns=min,median,ops
"""

from __future__ import annotations

from types import SimpleNamespace

from pylog.broker.handlers._authz import denied
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

PRINCIPAL, HOST, TOPIC = "User:CN=producer", "10.1.2.3", "acl-bench-orders"


def _authorizer() -> AclAuthorizer:
    bindings = []
    for i in range(1000):
        rt = (RT.TOPIC, RT.GROUP, RT.TRANSACTIONAL_ID)[i % 3]
        ptype = PatternType.PREFIXED if i % 4 == 0 else PatternType.LITERAL
        bindings.append(AclBinding(ResourcePattern(rt, f"team{i % 97}-{i}", ptype),
                                   AccessControlEntry(f"User:svc{i % 50}", "*", Op.READ,
                                                      AclPermissionType.ALLOW)))
    bindings.append(AclBinding(ResourcePattern(RT.TOPIC, "acl-bench-", PatternType.PREFIXED),
                               AccessControlEntry(PRINCIPAL, "*", Op.WRITE, AclPermissionType.ALLOW)))
    a = AclAuthorizer()
    a.install(AclSnapshot(bindings))
    return a


def test_cached(benchmark) -> None:
    a = _authorizer()
    assert a.authorize(PRINCIPAL, HOST, Op.WRITE, RT.TOPIC, TOPIC)
    assert benchmark(a.authorize, PRINCIPAL, HOST, Op.WRITE, RT.TOPIC, TOPIC)


def test_uncached(benchmark) -> None:
    a = _authorizer()
    assert benchmark(a._decide, PRINCIPAL, HOST, Op.WRITE, RT.TOPIC, TOPIC)


def test_produce_check(benchmark) -> None:
    ctx = SimpleNamespace(broker=SimpleNamespace(authorizer=_authorizer()), principal=PRINCIPAL,
                          peer=f"{HOST}:53122", api_key=0)
    names = [TOPIC]
    assert benchmark(denied, ctx, Op.WRITE, RT.TOPIC, names) == set()
