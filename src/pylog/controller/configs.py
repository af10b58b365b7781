"""Topic configs through ZooKeeper in cluster mode (Kafka's ZK-mode dynamic topic configs).

- **Where they live**: ``/config/topics/<t>`` (``{"version":1,"config":{...}}``, string
  values), written by CreateTopics on any broker and by AlterConfigs /
  IncrementalAlterConfigs (``write_topic_config``), each change followed by a sequential
  ``/config/changes/config_change_<seq>`` notice ``{"version":2,"entity_path":"topics/<t>"}``
  (Kafka's ``AdminZkClient.changeTopicConfig``).
- **Who reads them**: DescribeConfigs on any broker answers from ZooKeeper's config and the
  broker's defaults (``topic_overrides``), not from a local log, which the broker may not hold.
- **How they reach the logs** (``ConfigChangeListener``, Kafka's
  ``ZkConfigManager`` + ``ZkNodeChangeNotificationListener`` + ``TopicConfigHandler``):
  every broker watches ``/config/changes``; a notice newer than the last one it processed
  makes it read the entity's config and apply it to its local log through
  ``LogManager.set_topic_configs_async`` (the single-node AlterConfigs path), and set the new
  ``min.insync.replicas`` on the partitions it leads (waiting acks=all produces are checked
  again). At start the broker first applies ZooKeeper's config to every local topic (changes
  made while it was down), as Kafka's ``LogManager`` takes its topic configs from ZooKeeper.
  Notices older than 15 minutes are deleted (Kafka's ``changeExpirationMs``).
- The controller, when it runs on this broker, takes the new config too
  (``unclean.leader.election.enable`` per topic).

Client quotas (``/config/clients/<c>``, ``/config/users/<u>[/clients/<c>]``) go through the
same notices: a ``clients/...`` or ``users/...`` notice hands the entity's config to the
broker's quota managers (``broker.quotas.apply_stored``, pylog.broker.quotas), and at start
every quota entity is read.

Group configs (resource type GROUP: ``/config/groups/<group>``, the group id sanitized as a
client id is) go through the same notices: ``write_group_config`` writes the znode and a
``groups/<group>`` notice, every broker hands the znode's config to its
``broker.group_configs.apply_stored`` (pylog.group.group_configs), and at start every
group's config is read. Deleting a group removes its znode (``delete_group_config``).

Broker-level dynamic configs (``/config/brokers/<id>``) are not supported: broker configs
are static (server.properties / ``--override``), and AlterConfigs on a broker resource is
refused as on a single node.

Event-loop affinity: the broker's loop; ZooKeeper calls go through ``cluster.zk``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pylog import errors
from pylog.config import TOPIC_CONFIG_DEFS, ConfigError, format_value, parse_topic_configs
from pylog.group.group_configs import to_strings as group_strings
from pylog.security.sasl.credentials import desanitize, sanitize

log = logging.getLogger("pylog.controller.configs")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkConfigManager changeExpirationMs


def to_zk_strings(overrides: Mapping[str, Any]) -> dict[str, str]:
    """Parsed overrides in Kafka's string form, as ``/config/topics/<t>`` stores them."""
    out = {}
    for key, value in overrides.items():
        text = format_value(TOPIC_CONFIG_DEFS[key].type, value)
        if text is not None:
            out[key] = text
    return out


def parse_stored(topic: str, raw: Mapping[str, str]) -> dict[str, Any]:
    """``/config/topics/<t>``'s strings parsed; a value pylog refuses raises INVALID_CONFIG
    naming the znode (someone wrote it by hand or with a newer Kafka)."""
    try:
        return parse_topic_configs(raw)
    except ConfigError as exc:
        raise errors.InvalidConfigError(
            f"/config/topics/{topic} holds a config this broker refuses ({exc}); fix it with "
            "AlterConfigs") from None


async def topic_overrides(broker: Any, topic: str) -> dict[str, Any]:
    """The topic's overrides from ZooKeeper (parsed). UNKNOWN_TOPIC_OR_PARTITION when
    ``/brokers/topics/<t>`` does not exist."""
    cluster = broker.cluster
    store = cluster.store

    def read() -> dict[str, str] | None:
        if store.get_topic_assignment(topic) is None:
            return None
        return store.get_entity_config("topics", topic)
    raw = await cluster.zk(read)
    if raw is None:
        raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    return parse_stored(topic, raw)


async def write_topic_config(broker: Any, topic: str, overrides: Mapping[str, Any],
                             validate_only: bool) -> None:
    """Validate the (parsed) overrides as a whole, then write ``/config/topics/<t>`` and a
    change notice; this broker applies it at once, the others when their watch fires."""
    broker.log_manager.check_topic_overrides(overrides)
    if validate_only:
        return
    cluster = broker.cluster
    store = cluster.store
    strings = to_zk_strings(overrides)

    def write() -> bool:
        if store.get_topic_assignment(topic) is None:
            return False
        store.set_entity_config("topics", topic, strings)
        return True
    if not await cluster.zk(write):
        raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    log.info("topic %s: config written to ZooKeeper: %s", topic, strings)
    await apply_topic_config(broker, topic, dict(overrides))


async def apply_topic_config(broker: Any, topic: str, overrides: dict[str, Any]) -> None:
    """Apply a topic's overrides from ZooKeeper to this broker: the local log (if held), the
    min ISR of the partitions it leads, the controller's copy."""
    manager = broker.log_manager
    local = manager.topics.get(topic)
    if local is not None and local.overrides != overrides:
        await manager.set_topic_configs_async(broker.executor, topic, overrides)
        log.info("topic %s: config applied to the local log: %s", topic,
                 to_zk_strings(overrides))
    replicas = getattr(broker, "replicas", None)
    if replicas is not None and local is not None:
        min_isr = local.config.get("min.insync.replicas")
        for key, state in list(replicas.partitions.items()):
            if key[0] == topic and state.leader is not None and min_isr is not None \
                    and state.leader.min_insync_replicas != min_isr:
                state.leader.min_insync_replicas = min_isr
                replicas._check_waiting(key)
    controller = broker.cluster.controller
    if controller is not None:
        controller.topic_configs[topic] = to_zk_strings(overrides)


async def write_group_config(broker: Any, group_id: str,
                             change: Callable[[dict[str, str]], dict[str, Any]],
                             validate_only: bool) -> None:
    """Change a group's config in ``/config/groups/<group>``: ``change`` takes the stored
    strings and returns the new whole config parsed and validated (raising the request's
    error). The write is a compare-and-set (``update_entity_config``: two brokers altering
    one group at once each see the other's change), followed by a change notice; this
    broker applies the result at once, the others when their watch fires."""
    cluster = broker.cluster
    store = cluster.store
    name = sanitize(group_id)
    if validate_only:
        change(await cluster.zk(store.get_entity_config, "groups", name))
        return

    def update(config: dict[str, str]) -> None:
        new = group_strings(change(dict(config)))
        config.clear()
        config.update(new)
    written = await cluster.zk(store.update_entity_config, "groups", name, update)
    log.info("group %s: config written to ZooKeeper: %s", group_id, written)
    broker.group_configs.apply_stored(group_id, written)


async def delete_group_config(broker: Any, group_id: str) -> None:
    """A deleted group's config goes with it (and from every broker, by the notice)."""
    store = broker.cluster.store
    if await broker.cluster.zk(store.delete_entity_config, "groups", sanitize(group_id)):
        log.info("group %s: config removed from ZooKeeper with the group", group_id)
    broker.group_configs.apply_stored(group_id, {})


class ConfigChangeListener:
    """Watches ``/config/changes`` and applies each new notice once, in order."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.cluster = broker.cluster
        self.last_seq = -1
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.applied = 0  # notices processed (tests and logs)

    async def start(self) -> None:
        store = self.cluster.store
        existing = await self.cluster.zk(store.get_config_changes)
        if existing:
            self.last_seq = max(seq for seq, _name, _entity, _ctime in existing)
        await self._sync_all()
        loop = asyncio.get_running_loop()

        def on_children(_children: list[str]) -> Any:
            if self._stopped:
                return False
            loop.call_soon_threadsafe(self._wake.set)
            return None
        await self.cluster.zk(store.watch_config_changes, on_children)
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _sync_all(self) -> None:
        """At start: ZooKeeper's config for every local topic it knows and every client
        quota and group config entity (changes made while this broker was down)."""
        await self.broker.quotas.load_from_zookeeper()
        await self.broker.scram.load_from_zookeeper()
        store = self.cluster.store
        group_configs = self.broker.group_configs
        for name, raw in (await self.cluster.zk(store.get_group_configs)).items():
            group_configs.apply_stored(desanitize(name), raw)
        names = sorted(self.broker.log_manager.topics)

        def read() -> dict[str, dict[str, str]]:
            known = set(store.get_topics())
            return {t: store.get_entity_config("topics", t) for t in names if t in known}
        for topic, raw in (await self.cluster.zk(read)).items():
            try:
                await apply_topic_config(self.broker, topic, parse_stored(topic, raw))
            except errors.ApiError as exc:
                log.error("topic %s: cannot apply ZooKeeper's config: %s", topic, exc)

    async def _run(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.process()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next notice must still be processed
                log.exception("processing /config/changes failed")

    async def process(self) -> None:
        store = self.cluster.store
        notices = await self.cluster.zk(store.get_config_changes)
        now = self.broker.clock.time_ms()
        expired = []
        for seq, name, entity, ctime in notices:
            if seq > self.last_seq:
                self.last_seq = seq
                if entity is not None:
                    await self._apply(entity)
                self.applied += 1
            if ctime < now - CHANGE_EXPIRATION_MS:
                expired.append(name)
        if expired:
            await self.cluster.zk(store.delete_config_changes, expired)

    async def _apply(self, entity: str) -> None:
        kind, name = entity.split("/", 1)
        store = self.cluster.store
        if kind in ("clients", "users"):
            # Client quotas (Kafka's ClientIdConfigHandler / UserConfigHandler): the broker's
            # quota managers take the entity's config as it is now.
            raw = await self.cluster.zk(store.get_quota_entity_config, entity)
            self.broker.quotas.apply_stored(entity, raw)
            if kind == "users":  # SCRAM credentials share the znode (pylog.broker.scram_admin)
                await self.broker.scram.reload_user(name)
            return
        if kind == "groups":
            raw = await self.cluster.zk(store.get_entity_config, "groups", name)
            self.broker.group_configs.apply_stored(desanitize(name), raw)
            return
        if kind != "topics":
            log.info("config change for %s ignored: only topic configs and client quotas "
                     "are dynamic", entity)
            return

        def read() -> dict[str, str] | None:
            if store.get_topic_assignment(name) is None:
                return None
            return store.get_entity_config("topics", name)
        raw = await self.cluster.zk(read)
        if raw is None:
            return  # deleted meanwhile
        try:
            await apply_topic_config(self.broker, name, parse_stored(name, raw))
        except errors.ApiError as exc:
            log.error("topic %s: cannot apply the config change: %s", name, exc)
