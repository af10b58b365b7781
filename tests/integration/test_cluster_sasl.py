"""A 3-broker cluster whose brokers authenticate to each other with SCRAM-SHA-512 over
SASL_SSL (the INTERNAL listener, ``sasl.mechanism.inter.broker.protocol``) while clients use
PLAINTEXT and an EXTERNAL SASL_PLAINTEXT listener (SCRAM-SHA-256).

The brokers' own credential is written to ZooKeeper before they start (as Kafka's
``kafka-configs.sh --zookeeper`` does); replication with RF=3 and acks=all works over
INTERNAL. A SCRAM credential created through one broker (confluent-kafka's AdminClient)
lands in ZooKeeper in Kafka's format, merged with the user's quota, salted only, and every
other broker accepts it (change notices).
"""

from __future__ import annotations

import json
import re
import time

import confluent_kafka
import pytest
from _harness.tls import make_pki
from _harness.waiting import wait_until
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from pylog.cluster.zk_store import ZkStore
from pylog.security.sasl.credentials import zk_alter_user
from pylog.security.sasl.scram import make_credential

pytestmark = pytest.mark.integration

SESSION_MS = 6000
RECORDS = 300


def _ports(b) -> dict[str, int]:
    return {n: int(p) for n, p in re.findall(r"listening on (\w+)://127\.0\.0\.1:(\d+)", b.read_log())}


def test_scram_between_brokers_and_credentials_through_zookeeper(zookeeper, new_broker, tmp_path):  # noqa: F811
    pki = make_pki(tmp_path / "pki")
    # The brokers' own user, before any broker starts.
    pre = ZkStore(zookeeper.connect_string)
    pre.start()
    try:
        zk_alter_user(pre, "broker", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "broker-secret")}, [])
    finally:
        pre.close()

    def sasl_broker(overrides):
        b = new_broker(overrides)
        b.extra_args = ["--logger", "pylog.security.authentication=DEBUG"]
        return b

    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,EXTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="broker" password="broker-secret";',
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"],
        "replica.lag.time.max.ms": "10000",
    }
    with zk_cluster(zookeeper, sasl_broker, SESSION_MS, overrides) as (brokers, store):
        reg = json.loads(store.client.get("/brokers/ids/1")[0])
        assert reg["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_SSL", "EXTERNAL": "SASL_PLAINTEXT"}
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("sec", 2, 3, config={"min.insync.replicas": "3"})])["sec"].result(30)
        wait_until(lambda: all((s := store.get_partition_state("sec", p)) and len(s[0].isr) == 3
                               for p in range(2)), 30, "both partitions with a full ISR")
        acked = []
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                      "enable.idempotence": True})
        for i in range(RECORDS):
            p.produce("sec", f"r{i}".encode(), partition=i % 2,
                      on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)
        assert p.flush(60) == 0
        assert len(acked) == RECORDS
        for b in brokers:
            wait_until(lambda b=b: re.search(r"\(listener INTERNAL\): authenticated as User:broker "
                                             r"\(SCRAM-SHA-512\)", b.read_log()),
                       15, f"SCRAM inter-broker connections to broker {b.overrides['broker.id']}")
            assert "authentication failed" not in b.read_log()

        # A user's quota first, then SCRAM credentials through broker 0: one znode, both.
        first = f"127.0.0.1:{_ports(brokers[0])['PLAINTEXT']}"
        a0 = AdminClient({"bootstrap.servers": first})
        from pylog.client import Admin

        with Admin({"bootstrap.servers": first}) as quota_admin:
            quota_admin.alter_client_quotas({"user": "carol"}, {"producer_byte_rate": 1048576})
        for f in a0.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret")]).values():
            assert f.result(30) is None
        raw = store.client.get("/config/users/carol")[0]
        assert b"carol-secret" not in raw
        data = json.loads(raw)
        assert data["version"] == 1
        assert re.fullmatch(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,server_key=[A-Za-z0-9+/=]+,"
                            r"iterations=4096", data["config"]["SCRAM-SHA-256"])
        assert data["config"]["producer_byte_rate"] in ("1048576", "1048576.0")
        changes = [json.loads(store.client.get(f"/config/changes/{c}")[0])
                   for c in store.client.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/carol"} in changes

        # Every broker learned of it: produce through each broker's EXTERNAL listener.
        for b in brokers:
            ext = f"127.0.0.1:{_ports(b)['EXTERNAL']}"

            def produce_ok(ext=ext) -> bool:
                errs: list[str] = []
                pr = confluent_kafka.Producer({
                    "bootstrap.servers": ext, "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol",
                    "sasl.password": "carol-secret", "error_cb": lambda e: errs.append(e.str())})
                pr.produce("sec", b"carol", partition=0)
                left = pr.flush(15)
                return left == 0 and not errs
            wait_until(produce_ok, 45, f"carol's SCRAM login on broker {b.overrides['broker.id']}")
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "sec",
                                      "enable.auto.commit": False})
        c.assign([confluent_kafka.TopicPartition("sec", q, confluent_kafka.OFFSET_BEGINNING)
                  for q in range(2)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < RECORDS + 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert sorted(v for v in got if v != b"carol") == sorted(acked)
        assert got.count(b"carol") >= 3
