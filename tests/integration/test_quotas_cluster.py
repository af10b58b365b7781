"""Cluster mode: client quotas through ZooKeeper, with a real ZooKeeper and two ``pylog
broker`` processes (docs/quotas.md).

AlterClientQuotas on broker 0 writes Kafka's znodes (``/config/clients/<id>``,
``/config/users/<user>/clients/<id>``, ``{"version":1,"config":{...}}``) and
``/config/changes/config_change_<seq>`` notices (``{"version":2,"entity_path":...}``);
broker 1 applies them from the notices (DescribeClientQuotas answers them there, and its
connections are throttled by them), a removal too; a broker started later reads them all.
"""

from __future__ import annotations

import json

import pytest
from _harness.waiting import wait_until
from _harness.wire import BrokerConnection
from _harness.zookeeper import zookeeper  # noqa: F401

from pylog.cluster import zk_data as z
from pylog.cluster.zk_store import ZkStore
from pylog.protocol.messages import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    ProduceRequest,
)

pytestmark = pytest.mark.integration

SESSION_MS = 6000


@pytest.fixture
def store(zookeeper):  # noqa: F811
    s = ZkStore(zookeeper.connect_string, session_timeout_ms=SESSION_MS)
    s.start()
    yield s
    for path in (
        "/brokers",
        "/controller",
        "/controller_epoch",
        "/admin",
        "/config",
        "/isr_change_notification",
        "/cluster",
    ):
        s.delete_all(path)
    s.close()


def _broker(zookeeper, new_broker, i: int):  # noqa: F811
    return new_broker(
        {
            "zookeeper.connect": zookeeper.connect_string,
            "broker.id": str(i),
            "zookeeper.session.timeout.ms": str(SESSION_MS),
            "controlled.shutdown.enable": "false",
        }
    ).start()


def _alter(b, entity: list[tuple[str, str | None]], ops: dict[str, float | None]) -> None:
    R = AlterClientQuotasRequest
    req = R(
        entries=[
            R.EntryData(
                entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[R.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
            )
        ],
        validate_only=False,
    )
    with BrokerConnection(b.host, b.port, 10) as conn:
        resp = conn.request(req)
    assert [e.error_code for e in resp.entries] == [0], resp


def _describe(b) -> dict:
    with BrokerConnection(b.host, b.port, 10) as conn:
        resp = conn.request(DescribeClientQuotasRequest(components=[], strict=False))
    assert resp.error_code == 0, resp
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def test_quotas_altered_on_one_broker_apply_on_the_others(zookeeper, store, new_broker):  # noqa: F811
    b0 = _broker(zookeeper, new_broker, 0)
    b1 = _broker(zookeeper, new_broker, 1)
    wait_until(lambda: store.get_broker_ids() == [0, 1], 30, "2 registrations")
    before = {n for _s, n, _e, _c in store.get_config_changes()}

    _alter(b0, [("client-id", "slow one")], {"producer_byte_rate": 1000})
    _alter(b0, [("user", "alice"), ("client-id", None)], {"request_percentage": 12.5})
    # Kafka's znodes: sanitized names, string values, and one notice per change.
    raw, _ = store.client.get("/config/clients/slow%20one")
    assert json.loads(raw) == {"version": 1, "config": {"producer_byte_rate": "1000"}}
    raw, _ = store.client.get("/config/users/alice/clients/<default>")
    assert json.loads(raw) == {"version": 1, "config": {"request_percentage": "12.5"}}
    notices = [n for _s, n, _e, _c in store.get_config_changes() if n not in before]
    payloads = [json.loads(store.client.get(f"{z.CONFIG_CHANGES_PATH}/{n}")[0]) for n in notices]
    assert payloads == [
        {"version": 2, "entity_path": "clients/slow%20one"},
        {"version": 2, "entity_path": "users/alice/clients/<default>"},
    ]

    want = {
        (("client-id", "slow one"),): {"producer_byte_rate": 1000.0},
        (("user", "alice"), ("client-id", None)): {"request_percentage": 12.5},
    }
    wait_until(lambda: _describe(b1) == want, 30, "broker 1 to apply the notices")

    # Broker 1 throttles the client by the quota it learnt: 200 KB at 1000 B/s.
    with BrokerConnection(b1.host, b1.port, 10, client_id="slow one") as conn:
        resp = conn.request(
            ProduceRequest(acks=1, timeout_ms=1000, topic_data=[], transactional_id=None)
        )
        assert resp.throttle_time_ms == 0  # an empty produce: well within
        big = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            transactional_id=None,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="nowhere",
                    partition_data=[
                        ProduceRequest.PartitionProduceData(index=0, records=b"x" * 200_000)
                    ],
                )
            ],
        )
        resp = conn.request(big)
        assert resp.throttle_time_ms > 100_000, resp.throttle_time_ms

    # A removal reaches broker 1 too; a broker started now reads what is there.
    _alter(b0, [("client-id", "slow one")], {"producer_byte_rate": None})
    want.pop((("client-id", "slow one"),))
    wait_until(lambda: _describe(b1) == want, 30, "broker 1 to apply the removal")
    b2 = _broker(zookeeper, new_broker, 2)
    assert _describe(b2) == want
