"""``pylog.controller.configs`` without ZooKeeper: the string forms written to
``/config/topics/<t>``, and the ``/config/changes`` listener against an in-memory store
(each notice applied once and in order, expired notices deleted, bad ones skipped)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pylog import errors
from pylog.broker.quotas import ClientQuotas
from pylog.broker.quotas.manager import DEFAULT, QuotaEntity
from pylog.config import BrokerConfig
from pylog.controller.configs import (
    CHANGE_EXPIRATION_MS,
    ConfigChangeListener,
    parse_stored,
    to_zk_strings,
)
from pylog.group.group_configs import GroupConfigs


def test_zk_strings_are_kafkas_forms() -> None:
    parsed = parse_stored("t", {"cleanup.policy": "compact,delete", "retention.ms": "1000",
                                "unclean.leader.election.enable": "true"})
    assert to_zk_strings(parsed) == {"cleanup.policy": "compact,delete",
                                     "retention.ms": "1000",
                                     "unclean.leader.election.enable": "true"}


def test_a_stored_config_pylog_refuses_names_the_znode() -> None:
    with pytest.raises(errors.InvalidConfigError, match="/config/topics/t holds"):
        parse_stored("t", {"no.such.config": "1"})


class FakeStore:
    def __init__(self) -> None:
        self.notices: list[tuple[int, str, str | None, int]] = []
        self.configs: dict[str, dict[str, str]] = {}
        self.quota_configs: dict[str, dict[str, str]] = {}  # by entity path (clients/app)
        self.group_configs: dict[str, dict[str, str]] = {}  # by sanitized group id
        self.deleted: list[str] = []

    def add(self, seq: int, entity: str | None, ctime: int) -> None:
        self.notices.append((seq, f"config_change_{seq:010d}", entity, ctime))

    def get_config_changes(self) -> list[tuple[int, str, str | None, int]]:
        return sorted(self.notices)

    def delete_config_changes(self, names: list[str]) -> None:
        self.deleted += names
        self.notices = [n for n in self.notices if n[1] not in names]

    def get_topic_assignment(self, topic: str) -> Any:
        return (object(), 0) if topic in self.configs else None

    def get_entity_config(self, kind: str, name: str) -> dict[str, str]:
        if kind == "groups":
            return dict(self.group_configs.get(name, {}))
        return dict(self.configs.get(name, {}))

    def get_group_configs(self) -> dict[str, dict[str, str]]:
        return {g: dict(c) for g, c in self.group_configs.items()}

    def get_topics(self) -> list[str]:
        return sorted(self.configs)

    def get_quota_entity_config(self, path: str) -> dict[str, str]:
        return dict(self.quota_configs.get(path, {}))

    def get_quota_entity_configs(self) -> dict[str, dict[str, str]]:
        return {p: dict(c) for p, c in self.quota_configs.items()}


class FakeLogManager:
    def __init__(self, topics: list[str]) -> None:
        self.topics = {t: SimpleNamespace(overrides={}, config={"min.insync.replicas": 1})
                       for t in topics}
        self.applied: list[tuple[str, dict[str, Any]]] = []

    async def set_topic_configs_async(self, executor: Any, name: str,
                                      overrides: dict[str, Any]) -> None:
        self.applied.append((name, dict(overrides)))
        self.topics[name].overrides = dict(overrides)


def _broker(store: FakeStore, topics: list[str], now_ms: int) -> Any:
    async def zk(fn: Any, *args: Any) -> Any:
        return fn(*args)
    cluster = SimpleNamespace(store=store, zk=zk, controller=None)
    broker = SimpleNamespace(cluster=cluster, log_manager=FakeLogManager(topics), executor=None,
                             replicas=None, config=BrokerConfig(),
                             clock=SimpleNamespace(time_ms=lambda: now_ms,
                                                   monotonic=lambda: now_ms / 1000))
    broker.quotas = ClientQuotas(broker)  # the real quota store, fed by the listener
    broker.group_configs = GroupConfigs(broker.config)  # cluster mode's: fed by the listener
    from pylog.broker.scram_admin import ScramService

    broker.scram = ScramService(broker)  # SCRAM credentials share users/<u> notices
    return broker


def test_listener_applies_new_notices_once_in_order_and_drops_expired_ones() -> None:
    now = 10 * CHANGE_EXPIRATION_MS
    store = FakeStore()
    store.configs = {"orders": {"retention.ms": "1000"}, "remote": {"retention.ms": "5"}}
    store.add(1, "topics/orders", now - CHANGE_EXPIRATION_MS - 1)  # before start, expired
    store.quota_configs = {"users/<default>": {"request_percentage": "50.0",
                                                "SCRAM-SHA-256": "salt=..."}}
    broker = _broker(store, ["orders"], now)
    listener = ConfigChangeListener(broker)

    async def run() -> None:
        await listener._sync_all()  # start: ZooKeeper's config for every local topic
        listener.last_seq = 1
        store.configs["orders"] = {"retention.ms": "2000", "cleanup.policy": "compact"}
        store.add(2, "topics/orders", now)
        store.add(3, None, now)  # unreadable: skipped
        store.add(4, "brokers/<default>", now)  # broker configs are static: ignored
        store.add(5, "topics/remote", now)  # not held here: nothing to apply locally
        store.add(6, "topics/gone", now)  # deleted meanwhile
        store.quota_configs["users/a%20b/clients/app"] = {"producer_byte_rate": "1024"}
        store.add(7, "users/a%20b/clients/app", now)  # a client quota: to broker.quotas
        await listener.process()
        await listener.process()  # nothing new: nothing applied twice
    asyncio.run(run())
    assert broker.log_manager.applied == [
        ("orders", {"retention.ms": 1000}),
        ("orders", {"retention.ms": 2000, "cleanup.policy": ["compact"]}),
    ]
    assert listener.last_seq == 7 and listener.applied == 6
    assert broker.quotas.entities == {
        QuotaEntity(DEFAULT, None): {"request_percentage": 50.0},  # read at start
        QuotaEntity("a b", "app"): {"producer_byte_rate": 1024.0}}  # from the notice
    assert broker.quotas.produce.quota("a b", "app") == 1024.0
    assert store.deleted == ["config_change_0000000001"]


def test_group_configs_are_read_at_start_and_follow_their_notices() -> None:
    now = 10 * CHANGE_EXPIRATION_MS
    store = FakeStore()
    store.group_configs = {"a%2Fb": {"share.auto.offset.reset": "earliest"},  # group "a/b"
                           "bad": {"share.delivery.count.limit": "99", "consumer.session.timeout.ms": "50000"}}
    broker = _broker(store, [], now)
    listener = ConfigChangeListener(broker)
    gc = broker.group_configs

    async def run() -> None:
        await listener._sync_all()
        assert gc.overrides("a/b") == {"share.auto.offset.reset": "earliest"}
        # a value this broker refuses is left out, the rest applies
        assert gc.overrides("bad") == {"consumer.session.timeout.ms": 50000}
        store.group_configs["w"] = {"share.record.lock.duration.ms": "20000"}
        store.add(1, "groups/w", now)
        del store.group_configs["a%2Fb"]  # the group was deleted
        store.add(2, "groups/a%2Fb", now)
        await listener.process()
    asyncio.run(run())
    assert gc.overrides("w") == {"share.record.lock.duration.ms": 20000}
    assert gc.overrides("a/b") == {}
    assert gc.get("w", "share.record.lock.duration.ms") == 20000 and listener.applied == 2
