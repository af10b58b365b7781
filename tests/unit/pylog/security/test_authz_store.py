"""The ACL stores' formats: Kafka's ZooKeeper paths, node data and change notices; the
single node's file round trip."""

from __future__ import annotations

import json
import pathlib

from pylog.security.acl import AclOperation as Op
from pylog.security.acl import ResourceType as RT
from pylog.security.authz.bindings import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from pylog.security.authz.store import (
    FileAclStore,
    _encode,
    decode_change,
    encode_change,
    entry_from_json,
    resource_path,
)

E = AccessControlEntry("User:alice", "*", Op.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)


def test_paths_as_kafka_zk_data() -> None:
    assert resource_path(ResourcePattern(RT.TOPIC, "t1", PatternType.LITERAL)) == "/kafka-acl/Topic/t1"
    assert (resource_path(ResourcePattern(RT.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED))
            == "/kafka-acl-extended/prefixed/TransactionalId/tx")
    assert (resource_path(ResourcePattern(RT.CLUSTER, "kafka-cluster", PatternType.LITERAL))
            == "/kafka-acl/Cluster/kafka-cluster")


def test_node_data_as_kafka_acl_entry() -> None:
    data = json.loads(_encode({E}))
    assert data == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                            "operation": "IdempotentWrite", "host": "*"}]}
    # Kafka's own node, keys in another order.
    kafka = {"host": "host1", "permissionType": "Deny", "operation": "DescribeConfigs",
             "principal": "User:bob"}
    assert entry_from_json(kafka) == AccessControlEntry("User:bob", "host1", Op.DESCRIBE_CONFIGS,
                                                        AclPermissionType.DENY)


def test_change_notices() -> None:
    lit = ResourcePattern(RT.TOPIC, "a:b", PatternType.LITERAL)
    path, data = encode_change(lit)
    assert (path, data) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:a:b")
    assert decode_change(True, data) == lit
    assert decode_change(True, b"Topic:x") == ResourcePattern(RT.TOPIC, "x", PatternType.LITERAL)
    pre = ResourcePattern(RT.GROUP, "g", PatternType.PREFIXED)
    path, data = encode_change(pre)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "GROUP", "name": "g",
                                "patternType": "PREFIXED"}
    assert decode_change(False, data) == pre


def test_file_store_round_trip(tmp_path: pathlib.Path) -> None:
    store = FileAclStore(str(tmp_path))
    assert store.load() == set()
    b = {AclBinding(ResourcePattern(RT.TOPIC, "t", PatternType.PREFIXED), E)}
    assert store.change(set(), b, ()) == b
    assert FileAclStore(str(tmp_path)).load() == b
    assert store.change(b, (), b) == set()
    assert FileAclStore(str(tmp_path)).load() == set()
