"""``ClientQuotas`` (``broker.quotas``): the quota entities a broker knows, where they are
stored, and the three quota managers they feed (Kafka's ``QuotaManagers``: Produce and Fetch
in bytes per second, Request in percent of a request-handler thread).

Where the entities live:

- **single node**: ``<log.dir>/client-quotas.json``, ``{"version":1,"entities":{"clients/c1":
  {"producer_byte_rate":"1048576"}, "users/<default>":{...}}}``: Kafka's ZooKeeper entity
  paths and string values (``entities.py``), written through a temporary file, fsynced and
  renamed; read at start.
- **cluster mode**: ZooKeeper, as Kafka's ZK mode keeps them: ``/config/clients/<c>``,
  ``/config/users/<u>``, ``/config/users/<u>/clients/<c>`` (``{"version":1,"config":{...}}``),
  each write followed by a ``/config/changes/config_change_<seq>`` notice
  ``{"version":2,"entity_path":"clients/<c>"}``. Every broker applies a notice through its
  config-change listener (``pylog.controller.configs``, the one that applies topic
  configs), which hands the entity's config to ``apply_stored``; at start the broker reads
  every entity (``load_from_zookeeper``). Keys that are not quotas (a user's SCRAM
  credentials) are kept as they are when a quota is altered.

Users: every connection is ``User:ANONYMOUS`` until authentication exists
(``RequestContext.user``), so user quotas apply through ``/config/users/<default>`` or
``/config/users/ANONYMOUS``; a SASL or TLS principal only has to set ``RequestContext.user``.

Event-loop affinity: the broker's loop; file and ZooKeeper work goes to the executor or the
ZooKeeper thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from pylog import errors
from pylog.broker.quotas.entities import (
    apply_ops,
    entity_from_wire,
    entity_path,
    format_quota_value,
    parse_entity_path,
    parse_quota_values,
)
from pylog.broker.quotas.manager import ClientQuotaManager, QuotaEntity

log = logging.getLogger("pylog.broker.quotas")

STORE_NAME = "client-quotas.json"
#: Which manager each quota key feeds (Kafka's ``QuotaType``).
KEY_TYPES = {
    "producer_byte_rate": "Produce",
    "consumer_byte_rate": "Fetch",
    "request_percentage": "Request",
}


class ClientQuotas:
    """The broker's quota entities and managers (see the module docstring).

    Attributes:
        produce, fetch, request: the ``ClientQuotaManager`` of each quota type.
        entities: {QuotaEntity: {quota key: value}}, every entity with a quota.
    """

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        config = broker.config
        num, window_s = config["quota.window.num"], config["quota.window.size.seconds"]
        self.produce = ClientQuotaManager("Produce", num, window_s)
        self.fetch = ClientQuotaManager("Fetch", num, window_s)
        # A request quota's throttle is capped at one window (ClientRequestQuotaManager).
        self.request = ClientQuotaManager("Request", num, window_s, max_throttle_ms=window_s * 1000)
        self.managers = {"Produce": self.produce, "Fetch": self.fetch, "Request": self.request}
        self.entities: dict[QuotaEntity, dict[str, float]] = {}
        self._lock = asyncio.Lock()  # one alteration at a time (read, change, write)

    def now_ms(self) -> float:
        return self.broker.clock.monotonic() * 1000.0

    # -- applying --------------------------------------------------------------------------

    def apply(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        """Make ``values`` the quotas of ``entity`` (an empty mapping removes them)."""
        old = self.entities.get(entity, {})
        new = dict(values)
        if new:
            self.entities[entity] = new
        else:
            self.entities.pop(entity, None)
        for key, kind in KEY_TYPES.items():
            if old.get(key) != new.get(key):
                self.managers[kind].update_quota(entity, new.get(key))
                if key in new:
                    log.info("%s: %s = %s", entity, key, format_quota_value(key, new[key]))
                else:
                    log.info("%s: %s removed", entity, key)

    def apply_stored(self, path: str, raw: Mapping[str, str]) -> bool:
        """Apply an entity's stored config (``path`` like ``clients/c1``); False when the
        path is not a quota entity's."""
        entity = parse_entity_path(path)
        if entity is None:
            return False
        self.apply(entity, parse_quota_values(path, raw))
        return True

    # -- single node: the data directory ---------------------------------------------------

    def _file(self) -> str:
        return os.path.join(self.broker.log_manager.log_dir, STORE_NAME)

    def load_from_file(self) -> None:
        """At start on a single node: the entities of ``client-quotas.json``."""
        path = self._file()
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise errors.KafkaError(
                f"{path}: cannot read the client quotas ({exc}); fix or remove the file "
                "(its quotas are then lost) and start again"
            ) from None
        entities = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(entities, dict):
            raise errors.KafkaError(f"{path}: not a version 1 client quota file; fix or remove it")
        for epath, raw in entities.items():
            if not isinstance(raw, dict) or not self.apply_stored(epath, raw):
                log.warning("%s: ignoring entry %r: not a quota entity", path, epath)

    def _save_file(self) -> None:
        from pylog.log.topics import write_atomically

        entities = {
            entity_path(e): {k: format_quota_value(k, v) for k, v in sorted(vals.items())}
            for e, vals in self.entities.items()
        }
        body = json.dumps({"version": 1, "entities": dict(sorted(entities.items()))}, indent=1)
        write_atomically(self._file(), body.encode("utf-8"))

    # -- cluster mode: ZooKeeper -------------------------------------------------------------

    async def load_from_zookeeper(self) -> None:
        """At start in cluster mode: every quota entity under ``/config/clients`` and
        ``/config/users`` (changes made while this broker was down)."""
        cluster = self.broker.cluster
        stored = await cluster.zk(cluster.store.get_quota_entity_configs)
        for path, raw in stored.items():
            self.apply_stored(path, raw)
        gone = [e for e in self.entities if entity_path(e) not in stored]
        for entity in gone:
            self.apply(entity, {})

    # -- the admin APIs ---------------------------------------------------------------------

    async def alter(
        self, entries: Iterable[Any], validate_only: bool
    ) -> list[tuple[Any, int, str | None]]:
        """AlterClientQuotas: per entry (its wire entity, error code, message). Each entry
        is validated and stored on its own; one entry's error does not stop the others."""
        out: list[tuple[Any, int, str | None]] = []
        async with self._lock:
            changed = False
            for entry in entries:
                try:
                    entity = entity_from_wire(entry.entity)
                    new = apply_ops(self.entities.get(entity, {}), entry.ops)
                    if not validate_only:
                        if self.broker.cluster is not None:
                            # ZooKeeper's copy, which other brokers may have changed since
                            # this one applied it, with these ops applied.
                            new = await self._write_zookeeper(entity, entry.ops)
                        self.apply(entity, new)
                        changed = True
                except errors.ApiError as exc:
                    out.append((entry.entity, exc.code, str(exc)))
                    continue
                out.append((entry.entity, 0, None))
            if changed and self.broker.cluster is None:
                await asyncio.get_running_loop().run_in_executor(
                    self.broker.executor, self._save_file
                )
        return out

    async def _write_zookeeper(self, entity: QuotaEntity, ops: Iterable[Any]) -> dict[str, float]:
        """Read the entity's znode, change the altered keys (others, such as SCRAM
        credentials, stay), write it and a change notice (Kafka's ``changeConfigs``);
        returns the entity's quotas as written."""
        cluster = self.broker.cluster
        store = cluster.store
        path = entity_path(entity)
        ops = list(ops)

        def write() -> dict[str, str]:
            raw = store.get_quota_entity_config(path)
            for op in ops:
                if op.remove:
                    raw.pop(op.key, None)
                else:
                    raw[op.key] = format_quota_value(op.key, float(op.value))
            store.set_quota_entity_config(path, raw)
            return raw

        raw = await cluster.zk(write)
        log.info("%s: quotas written to ZooKeeper (/config/%s)", entity, path)
        return parse_quota_values(path, raw)

    def describe(self, match: Any) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """DescribeClientQuotas: the entities ``match`` (an ``entities.DescribeFilter``)
        accepts, with their quotas."""
        return [
            (e, dict(v))
            for e, v in sorted(self.entities.items(), key=lambda kv: str(kv[0]))
            if match.matches(e)
        ]

    def expire(self) -> None:
        """Drop sensors idle for an hour (the broker's periodic pass)."""
        now = self.now_ms()
        for manager in self.managers.values():
            manager.expire(now)
