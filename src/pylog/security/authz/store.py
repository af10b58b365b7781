"""Where ACLs live: a file in the data directory (single node) or ZooKeeper (cluster).

**Single node**: ``<log.dir>/acls.json``, ``{"version":1,"acls":[{"resourceType":"Topic",
"name":"orders","patternType":"LITERAL","principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``, written to a temporary file, fsynced and renamed;
read at start.

**Cluster** (Kafka's ``AclAuthorizer`` layout, ``kafka.zk.ZkData``): one znode per resource
pattern holding ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``, at ``/kafka-acl/<ResourceType>/<name>`` for LITERAL
patterns and ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for PREFIXED ones
(``Topic``, ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``, ``User``).
Each change writes the znode conditionally on the version read (a ``BadVersion`` re-reads
and re-applies: two brokers adding ACLs to one resource at once lose nothing), deletes it
when its last ACL goes, then creates a sequential change notice:
``/kafka-acl-changes/acl_changes_<seq>`` holding ``TOPIC:orders`` (Kafka's
``LiteralAclChangeStore``) or ``/kafka-acl-extended-changes/acl_changes_<seq>`` holding
``{"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"}``
(``ExtendedAclChangeStore``). Every broker watches both notice paths and re-reads the
named resources' znodes, then installs a new snapshot on its loop.

Thread-safety: file and ZooKeeper calls run on the executor or the ZooKeeper thread and
return plain values; snapshots are installed on the loop only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from pylog import errors
from pylog.security.acl import ResourceType
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
    operation_name,
    parse_operation,
    parse_pattern_type,
    parse_permission,
    parse_resource_type,
    pascal,
)

log = logging.getLogger("pylog.security.authz")

STORE_NAME = "acls.json"
LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = EXTENDED_ROOT + "/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: Notices older than this are deleted by the broker that processes them (Kafka: 15 min).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_CONCRETE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                   ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)


def entry_to_json(e: AccessControlEntry) -> dict[str, str]:
    """Kafka's ``AclEntry.toJsonCompatibleMap`` entry."""
    return {"principal": e.principal, "permissionType": pascal(e.permission_type.name),
            "operation": operation_name(e.operation), "host": e.host}


def entry_from_json(d: dict[str, Any]) -> AccessControlEntry:
    return AccessControlEntry(str(d["principal"]), str(d["host"]), parse_operation(d["operation"]),
                              parse_permission(d["permissionType"]))


def resource_path(p: ResourcePattern) -> str:
    root = LITERAL_ROOT if p.pattern_type == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{pascal(p.resource_type.name)}/{p.name}"


def encode_change(p: ResourcePattern) -> tuple[str, bytes]:
    """(notice path prefix, data) of a change to ``p``."""
    if p.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{p.resource_type.name}:{p.name}".encode()
    body = {"version": 1, "resourceType": p.resource_type.name, "name": p.name,
            "patternType": p.pattern_type.name}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(body).encode()


def decode_change(literal: bool, data: bytes) -> ResourcePattern:
    text = data.decode("utf-8")
    if literal:
        rtype, name = text.split(":", 1)
        return ResourcePattern(parse_resource_type(rtype), name, PatternType.LITERAL)
    d = json.loads(text)
    return ResourcePattern(parse_resource_type(d["resourceType"]), d["name"],
                           parse_pattern_type(d["patternType"]))


class FileAclStore:
    """ACLs in ``<log.dir>/acls.json`` (single node). Calls block: run them in the executor."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, STORE_NAME)

    def load(self) -> set[AclBinding]:
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as exc:
            raise errors.KafkaError(f"{self.path}: cannot read the ACLs ({exc}); fix or remove "
                                    "the file and start again") from None
        if not isinstance(data, dict) or data.get("version") != 1:
            raise errors.KafkaError(f"{self.path}: not a version 1 ACL file; fix or remove it")
        out = set()
        for d in data.get("acls", []):
            pattern = ResourcePattern(parse_resource_type(d["resourceType"]), str(d["name"]),
                                      parse_pattern_type(d["patternType"]))
            out.add(AclBinding(pattern, entry_from_json(d)))
        return out

    def save(self, bindings: Iterable[AclBinding]) -> None:
        from pylog.log.topics import write_atomically

        rows = [{"resourceType": pascal(p.resource_type.name), "name": p.name,
                 "patternType": p.pattern_type.name, **entry_to_json(e)}
                for p, e in sorted(bindings, key=lambda b: (b.pattern, b.entry))]
        write_atomically(self.path, json.dumps({"version": 1, "acls": rows}, indent=1).encode())

    def change(self, current: set[AclBinding], add: Iterable[AclBinding],
               remove: Iterable[AclBinding]) -> set[AclBinding]:
        new = (set(current) | set(add)) - set(remove)
        self.save(new)
        return new


class ZkAclStore:
    """ACLs in ZooKeeper, Kafka's layout (see the module docstring), through the broker's
    ``pylog.cluster.zk_store.ZkStore``. Calls block: run them on the ZooKeeper thread
    (``cluster.zk``)."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk  # a started ZkStore

    def ensure_paths(self) -> None:
        for path in (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES):
            self.zk.client.ensure_path(path)

    def read_resource(self, p: ResourcePattern) -> tuple[set[AccessControlEntry], int]:
        """The entries of one pattern and the znode's version (-1: no znode)."""
        got = self.zk.get_versioned(resource_path(p))
        if got is None:
            return set(), -1
        data, version, _ctime = got
        if not data:
            return set(), version
        d = json.loads(data.decode("utf-8"))
        return {entry_from_json(a) for a in d.get("acls", [])}, version

    def load(self) -> set[AclBinding]:
        """Every ACL under both roots."""
        out: set[AclBinding] = set()
        for root, ptype in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            for rtype in _CONCRETE_TYPES:
                for name in self.zk.children(f"{root}/{pascal(rtype.name)}"):
                    p = ResourcePattern(rtype, name, ptype)
                    out.update(AclBinding(p, e) for e in self.read_resource(p)[0])
        return out

    def update(self, p: ResourcePattern,
               fn: Callable[[set[AccessControlEntry]], set[AccessControlEntry]]) -> set[AccessControlEntry]:
        """Apply ``fn`` to the pattern's entries with a conditional write, retried on a
        concurrent change; then a change notice. Returns the entries written."""
        path = resource_path(p)
        while True:
            current, version = self.read_resource(p)
            new = fn(set(current))
            if new == current:
                return new
            if self.zk.write_versioned(path, _encode(new) if new else None, version):
                break
            # another broker changed it meanwhile: re-read and re-apply
        prefix, data = encode_change(p)
        self.zk.create_sequential(prefix, data)
        return new

    def changes(self, last_seq: dict[str, int], now_ms: int) -> set[ResourcePattern]:
        """The resources named by notices newer than ``last_seq`` (updated in place, per
        notice path); deletes notices older than Kafka's 15 minutes."""
        out: set[ResourcePattern] = set()
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            for child in self.zk.children(root):
                if not child.startswith(CHANGE_PREFIX):
                    continue
                seq = int(child[len(CHANGE_PREFIX):])
                path = f"{root}/{child}"
                got = self.zk.get_versioned(path)
                if got is None:
                    continue
                if seq > last_seq.get(root, -1):
                    last_seq[root] = seq
                    try:
                        out.add(decode_change(root == LITERAL_CHANGES, got[0]))
                    except (ValueError, KeyError) as exc:
                        log.warning("ignoring ACL change notice %s: %s", path, exc)
                if got[2] < now_ms - CHANGE_EXPIRATION_MS:
                    self.zk.delete_if_exists(path)
        return out

    def latest_seqs(self) -> dict[str, int]:
        return {root: max((int(c[len(CHANGE_PREFIX):]) for c in self.zk.children(root)
                           if c.startswith(CHANGE_PREFIX)), default=-1)
                for root in (LITERAL_CHANGES, EXTENDED_CHANGES)}


def _encode(entries: set[AccessControlEntry]) -> bytes:
    acls = [entry_to_json(e) for e in sorted(entries)]
    return json.dumps({"version": 1, "acls": acls}).encode("utf-8")


async def run_blocking(executor: Any, fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(executor, lambda: fn(*args))
