"""A 3-broker cluster whose brokers talk to each other over TLS: each broker has a PLAINTEXT
listener for clients and an INTERNAL listener (SSL, client certificates required) named by
``inter.broker.listener.name``. Brokers register both endpoints in ZooKeeper with their
protocols; follower fetches, the controller's requests and the transaction markers go
over INTERNAL (its TLS handshakes are logged with the brokers' certificate principal); a
topic with replication factor 3 takes acks=all records that every replica holds.
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
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.cluster import zk_data as z

pytestmark = pytest.mark.integration

SESSION_MS = 6000
RECORDS = 500
BROKER_PRINCIPAL = "User:CN=broker,O=pylog,C=US"


def test_replication_over_an_ssl_inter_broker_listener(zookeeper, new_broker, tmp_path):  # noqa: F811
    pki = make_pki(tmp_path / "pki")

    def tls_broker(overrides):
        b = new_broker(overrides)
        b.extra_args = ["--logger", "pylog.security.authentication=DEBUG"]
        return b

    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"],
        "listener.name.internal.ssl.client.auth": "required",
        "replica.lag.time.max.ms": "10000",
    }
    with zk_cluster(zookeeper, tls_broker, SESSION_MS, overrides) as (brokers, store):
        # Kafka's registration: every endpoint, and the protocol of each listener.
        raw, _ = store.client.get(z.broker_id_path(1))
        reg = json.loads(raw)
        assert [e.split("://")[0] for e in reg["endpoints"]] == ["PLAINTEXT", "INTERNAL"]
        assert reg["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT",
            "INTERNAL": "SSL",
        }
        assert reg["port"] == brokers[1].port  # the PLAINTEXT endpoint, for old clients

        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("sec", 2, 3, config={"min.insync.replicas": "3"})])[
            "sec"
        ].result(30)
        wait_until(
            lambda: all(
                (s := store.get_partition_state("sec", p)) and len(s[0].isr) == 3 for p in range(2)
            ),
            30,
            "both partitions with a full ISR",
        )
        # Clients are given the PLAINTEXT addresses (the listener they came in on).
        md = admin.list_topics(timeout=10)
        assert sorted((bm.host, bm.port) for bm in md.brokers.values()) == sorted(
            ("127.0.0.1", b.port) for b in brokers
        )

        acked = []
        p = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(RECORDS):
            p.produce(
                "sec",
                f"r{i}".encode(),
                partition=i % 2,
                on_delivery=lambda err, m: acked.append(m.value()) if err is None else None,
            )
        assert p.flush(60) == 0
        assert len(acked) == RECORDS  # acks=all with min.insync.replicas=3: all replicas had them

        # Every replica fetched over INTERNAL with TLS, presenting the broker certificate.
        for b in brokers:
            wait_until(
                lambda b=b: re.search(
                    r"\(listener INTERNAL\): TLS handshake done \(TLSv1\.\d\), principal "
                    + re.escape(BROKER_PRINCIPAL),
                    b.read_log(),
                ),
                10,
                f"TLS inter-broker connections to broker {b.overrides['broker.id']}",
            )
            assert "TLS handshake failed" not in b.read_log()
        c = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "sec", "enable.auto.commit": False}
        )
        c.assign(
            [
                confluent_kafka.TopicPartition("sec", q, confluent_kafka.OFFSET_BEGINNING)
                for q in range(2)
            ]
        )
        got = []
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert sorted(got) == sorted(acked)
