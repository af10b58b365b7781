"""The ACL authorizer: Kafka's ``AclAuthorizer`` / ``StandardAuthorizer`` semantics over an
immutable ACL snapshot, with a decision cache.

Decision for (principal, host, operation, resource), in Kafka's order:

1. a super user (``super.users``) may do everything;
2. the ACLs that apply are those on the resource's literal name, on the literal ``*`` of
   its type, and on every PREFIXED pattern its name starts with; an entry applies to the
   request when its principal is the request's or ``User:*`` and its host is the client's
   IP address or ``*``;
3. a DENY entry for the operation (or ALL) wins;
4. else an ALLOW entry for the operation, ALL, or an operation that implies it (READ,
   WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
5. else, when no ACL at all applies to the resource, ``allow.everyone.if.no.acl.found``
   decides (false by default); otherwise denied.

Speed: the snapshot indexes entries by (resource type, literal name) and by (resource
type, prefix) with the set of prefix lengths present per type, so a check costs a few
dict lookups whatever the number of ACLs. Decisions are cached per (principal, host,
operation, resource type, name) in a dict that is replaced, never mutated across
snapshots: a change installs a new (snapshot, cache) pair in one attribute assignment.

Thread-safety: decisions and installs run on the broker's event loop; the ZooKeeper store
builds new snapshots on its thread and hands them to the loop (``call_soon_threadsafe``),
so nothing mutable is shared between threads. The cache dict is only touched on the loop.

Denials are logged on the ``kafka.authorizer.logger`` logger at INFO (allowed decisions at
DEBUG), in Kafka's sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from pylog.security.acl import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bitfield,
)
from pylog.security.authz.bindings import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclPermissionType,
    PatternType,
)

__all__ = ["AUTHORIZER_CLASSES", "AclAuthorizer", "AclSnapshot"]

#: ``authorizer.class.name`` values that switch ACLs on (Kafka's two and pylog's own).
AUTHORIZER_CLASSES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "pylog.security.AclAuthorizer",
})

authz_log = logging.getLogger("kafka.authorizer.logger")

_Op = AclOperation
_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
#: The operations whose ALLOW implies the key's (Kafka's AclAuthorizer.authorize).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER, _Op.ALL}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.ALL}),
}
#: Decisions cached before the cache is dropped and refilled (a bound on memory).
CACHE_LIMIT = 100_000

# An entry as the snapshot keeps it: (principal, host, operation, permission).
_Entry = tuple[str, str, AclOperation, AclPermissionType]


class AclSnapshot:
    """Every ACL at one moment, indexed for decisions. Immutable once built.

    Attributes:
        bindings: every binding, as a frozenset.
    """

    __slots__ = ("bindings", "_literal", "_prefixed", "_prefix_lengths")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings = frozenset(bindings)
        literal: dict[tuple[int, str], list[_Entry]] = {}
        prefixed: dict[tuple[int, str], list[_Entry]] = {}
        lengths: dict[int, set[int]] = {}
        for pattern, entry in self.bindings:
            key = (int(pattern.resource_type), pattern.name)
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(key, []).append(tuple(entry))  # type: ignore[arg-type]
                lengths.setdefault(key[0], set()).add(len(pattern.name))
            else:
                literal.setdefault(key, []).append(tuple(entry))  # type: ignore[arg-type]
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._prefix_lengths = {t: tuple(sorted(ls)) for t, ls in lengths.items()}

    def entries_for(self, resource_type: int, name: str) -> list[_Entry]:
        """The entries of every pattern that applies to the resource (any principal)."""
        out: list[_Entry] = []
        lit = self._literal
        found = lit.get((resource_type, name))
        if found:
            out.extend(found)
        if name != WILDCARD_RESOURCE:
            found = lit.get((resource_type, WILDCARD_RESOURCE))
            if found:
                out.extend(found)
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            pre = self._prefixed
            for n in lengths:
                if n > len(name):
                    break
                found = pre.get((resource_type, name[:n]))
                if found:
                    out.extend(found)
        return out

    def has_type(self, resource_type: int) -> bool:
        return (resource_type in self._prefix_lengths
                or any(k[0] == resource_type for k in self._literal))


class AclAuthorizer:
    """The broker's authorizer (``broker.authorizer``; None when none is configured).

    Args:
        super_users: principals allowed everything (``super.users``).
        allow_everyone_if_no_acl_found: Kafka's ``allow.everyone.if.no.acl.found``.

    Event-loop affinity: every method runs on the broker's loop (see the module docstring).
    """

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self.snapshot = AclSnapshot()
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        #: The store that persists changes (``store.FileAclStore`` / ``ZkAclStore``).
        self.store: Any = None

    # -- snapshot --------------------------------------------------------------------------

    def install(self, snapshot: AclSnapshot) -> None:
        """Make ``snapshot`` current and forget cached decisions (on the loop)."""
        self.snapshot = snapshot
        self._cache = {}

    # -- decisions ---------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the
        resource (cached; see the module docstring for the rules)."""
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        decision = cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            cache[key] = decision
        return decision

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = self.snapshot.entries_for(resource_type, name)
        if not entries:
            return self.allow_everyone
        allowed_ops = _IMPLIED_BY.get(operation) or (operation, _Op.ALL)
        allowed = False
        for e_principal, e_host, e_op, e_perm in entries:
            if e_principal != principal and e_principal != WILDCARD_PRINCIPAL:
                continue
            if e_host != host and e_host != WILDCARD_HOST:
                continue
            if e_perm == _DENY:
                if e_op == operation or e_op == _Op.ALL:
                    return False
            elif e_op in allowed_ops:
                allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type
        (Kafka's ``authorizeByResourceType``: an ALLOW on some pattern that no DENY for
        the same principal covers; idempotent producers with WRITE on a topic)."""
        if principal in self.super_users:
            return True
        ops = (operation, _Op.ALL)
        allows: list[tuple[str, PatternType]] = []
        denies: list[tuple[str, PatternType]] = []
        for pattern, (e_principal, e_host, e_op, e_perm) in self.snapshot.bindings:
            if pattern.resource_type != resource_type or e_op not in ops:
                continue
            if e_principal != principal and e_principal != WILDCARD_PRINCIPAL:
                continue
            if e_host != host and e_host != WILDCARD_HOST:
                continue
            (denies if e_perm == _DENY else allows).append((pattern.name, pattern.pattern_type))
        if (WILDCARD_RESOURCE, PatternType.LITERAL) in denies:
            return False
        deny_prefixes = [n for n, t in denies if t == PatternType.PREFIXED]
        for name, ptype in allows:
            if (name, ptype) in denies or any(name.startswith(p) for p in deny_prefixes):
                continue
            return True
        return self.allow_everyone and not self.snapshot.has_type(resource_type)

    def authorized_operations(self, principal: str, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bit field: every operation of the type the principal may do."""
        return operations_bitfield(
            op for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, op, resource_type, name))
