"""ACLs in a 3-broker ZooKeeper cluster, as Kafka's AclAuthorizer keeps them: every broker
has an mTLS listener for clients and one for the brokers (INTERNAL), the brokers' principal
``User:CN=broker`` is the super user that replication, the controller's requests and the
transaction markers need, ``User:CN=admin`` the clients' super user.

An ACL created through one broker is written to ``/kafka-acl/Topic/<name>`` in Kafka's JSON
with a ``/kafka-acl-changes`` notice, and every broker reloads it; two writers adding
ACLs to one resource at once lose nothing (versioned writes); a client's LeaderAndIsr and
StopReplica are refused with CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import json
import threading

import confluent_kafka
import pytest
from _harness.tls import make_pki
from _harness.waiting import wait_until
from _harness.wire import BrokerConnection, tls_connection
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from pylog.cluster.zk_store import ZkStore
from pylog.errors import ClusterAuthorizationFailedError
from pylog.protocol.messages import DescribeAclsRequest, LeaderAndIsrRequest, StopReplicaRequest
from pylog.security.acl import AclOperation as Op
from pylog.security.acl import ResourceType as RT
from pylog.security.authz.bindings import AccessControlEntry, PatternType, ResourcePattern
from pylog.security.authz.bindings import AclPermissionType as Perm
from pylog.security.authz.store import ZkAclStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000
ADMIN, ALICE = "User:CN=admin", "User:CN=alice"


def _overrides(pki: dict[str, str]) -> dict[str, str]:
    return {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"],
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^(CN=[^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:CN=broker;" + ADMIN,
        "replica.lag.time.max.ms": "10000",
    }


def _conf(bootstrap: str, pki: dict[str, str], who: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": pki["ca"], "ssl.certificate.location": pki[who + "_cert"],
            "ssl.key.location": pki[who + "_key"]}


def _tls_connection(port: int, pki: dict[str, str], who: str) -> BrokerConnection:
    return tls_connection(port, pki["ca"], pki[who + "_cert"], pki[who + "_key"], client_id="rogue")


def test_acls_in_zookeeper_seen_by_every_broker(zookeeper, new_broker, tmp_path):  # noqa: F811
    pki = make_pki(tmp_path / "pki", extra_clients=("admin", "alice"))
    with zk_cluster(zookeeper, new_broker, SESSION_MS, _overrides(pki)) as (brokers, store):
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient(_conf(bootstrap, pki, "admin"))
        admin.create_topics([NewTopic("secured", 3, 3)])["secured"].result(30)
        # Replication between brokers works: their principal is a super user.
        wait_until(lambda: all((s := store.get_partition_state("secured", p)) and len(s[0].isr) == 3
                               for p in range(3)), 60, "every partition with a full ISR")
        producer = confluent_kafka.Producer({**_conf(bootstrap, pki, "alice"), "acks": "all",
                                             "message.timeout.ms": 10000})
        errs: list[str] = []
        try:  # librdkafka raises at once when its metadata already has the topic's error
            producer.produce("secured", b"early",
                             on_delivery=lambda e, m: errs.append(e and e.name()))
        except confluent_kafka.KafkaException as exc:
            errs.append(exc.args[0].name())
        producer.flush(20)
        assert errs == ["TOPIC_AUTHORIZATION_FAILED"]

        binding = AclBinding(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL, ALICE,
                             "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([binding], request_timeout=30).values():
            f.result(30)
        raw, _ = store.client.get("/kafka-acl/Topic/secured")
        assert json.loads(raw) == {"version": 1, "acls": [
            {"principal": ALICE, "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        notices = store.client.get_children("/kafka-acl-changes")
        assert any(store.client.get(f"/kafka-acl-changes/{n}")[0] == b"TOPIC:secured"
                   for n in notices)
        # Every broker reloaded it (the one that wrote it installs it at once).
        wait_until(lambda: sum("reloaded from ZooKeeper" in b.read_log() for b in brokers) >= 2,
                   30, "two other brokers reloading the ACL")
        errs.clear()
        # A new producer: the first one's metadata remembers the topic's authorization error.
        producer = confluent_kafka.Producer({**_conf(bootstrap, pki, "alice"), "acks": "all",
                                             "message.timeout.ms": 10000})
        for p in range(3):  # one record to each partition: each leader checks
            producer.produce("secured", b"ok", partition=p,
                             on_delivery=lambda e, m: errs.append(e and e.name()))
        producer.flush(30)
        assert errs == [None, None, None]

        # A client is not a broker: LeaderAndIsr and StopReplica are refused.
        with _tls_connection(brokers[1].port, pki, "alice") as conn:
            resp = conn.request(LeaderAndIsrRequest(controller_id=0, controller_epoch=99,
                                                    broker_epoch=-1))
            assert resp.error_code == ClusterAuthorizationFailedError.code
            resp = conn.request(StopReplicaRequest(controller_id=0, controller_epoch=99,
                                                   broker_epoch=-1))
            assert resp.error_code == ClusterAuthorizationFailedError.code
        assert "is Denied operation = CLUSTER_ACTION" in brokers[1].read_log()

        # ACLs stored by Kafka itself are read (a prefixed one, written straight to ZooKeeper).
        store.client.create("/kafka-acl-extended/prefixed/Group/team-", json.dumps(
            {"version": 1, "acls": [{"host": "*", "permissionType": "Allow", "operation": "Read",
                                     "principal": ALICE}]}).encode(), makepath=True)
        store.client.create("/kafka-acl-extended-changes/acl_changes_", json.dumps(
            {"version": 1, "resourceType": "GROUP", "name": "team-", "patternType": "PREFIXED"}
        ).encode(), sequence=True, makepath=True)
        # Each broker answers from its own copy: ask each one on its own connection.
        def described(port: int) -> set[tuple[str, int]]:
            with _tls_connection(port, pki, "admin") as conn:
                resp = conn.request(DescribeAclsRequest(
                    resource_type_filter=int(RT.ANY), resource_name_filter=None,
                    pattern_type_filter=int(PatternType.ANY), principal_filter=ALICE,
                    host_filter=None, operation=int(Op.ANY), permission_type=int(Perm.ANY)))
            assert resp.error_code == 0
            return {(r.resource_name, r.pattern_type) for r in resp.resources}
        want = {("secured", int(PatternType.LITERAL)), ("team-", int(PatternType.PREFIXED))}
        for b in brokers:
            wait_until(lambda b=b: described(b.port) == want, 30,
                       f"broker {b.overrides['broker.id']} to hold both ACLs")


def test_concurrent_writers_lose_no_acl(zookeeper):  # noqa: F811
    stores = [ZkStore(zookeeper.connect_string) for _ in range(2)]
    for s in stores:
        s.start()
    try:
        acls = [ZkAclStore(s) for s in stores]
        acls[0].ensure_paths()
        pattern = ResourcePattern(RT.TOPIC, "contended", PatternType.LITERAL)

        def add(i: int) -> None:
            for n in range(25):
                entry = AccessControlEntry(f"User:w{i}-{n}", "*", Op.READ, Perm.ALLOW)
                acls[i].update(pattern, lambda cur, e=entry: cur | {e})
        threads = [threading.Thread(target=add, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        entries, _version = acls[0].read_resource(pattern)
        assert len(entries) == 50
        last: dict[str, int] = {}
        assert acls[1].changes(last, 0) == {pattern}
    finally:
        for s in stores:
            s.delete_all("/kafka-acl")
            s.delete_all("/kafka-acl-changes")
            s.delete_all("/kafka-acl-extended")
            s.delete_all("/kafka-acl-extended-changes")
            s.close()
