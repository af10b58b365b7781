"""Group configs of share groups (Kafka's ``GroupConfig``, resource type GROUP = 32 of
IncrementalAlterConfigs and DescribeConfigs).

Each group config overrides a broker default for one group::

    share.auto.offset.reset        latest | earliest        (no broker default: latest)
    share.record.lock.duration.ms  group.share.record.lock.duration.ms, within
                                   group.share.min/max.record.lock.duration.ms
    share.delivery.count.limit     group.share.delivery.count.limit (2-10)
    share.heartbeat.interval.ms    group.share.heartbeat.interval.ms
    share.session.timeout.ms       group.share.session.timeout.ms

The overrides are kept in ``group-configs.json`` in the log directory (written to a
temporary file, fsynced, renamed), so they survive a restart. Kafka keeps them in the
cluster metadata; pylog's cluster mode does not share them between brokers (each broker
keeps what it was told).

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from pylog.errors import InvalidConfigError, InvalidRequestError

__all__ = ["GroupConfigs", "GROUP_CONFIG_NAMES"]

log = logging.getLogger("pylog.share")

FILE_NAME = "group-configs.json"

# group config -> broker default's name (None: fixed default).
GROUP_CONFIG_NAMES: dict[str, str | None] = {
    "share.auto.offset.reset": None,
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
}


class GroupConfigs:
    def __init__(self, broker_config: Any) -> None:
        self._config = broker_config
        self._overrides: dict[str, dict[str, Any]] = {}
        self._path = os.path.join(broker_config.log_dir, FILE_NAME)
        try:
            with open(self._path, encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict):
                self._overrides = {g: dict(v) for g, v in data.items() if isinstance(v, dict)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.error("cannot read %s (%s): share-group configs start from the defaults",
                      self._path, exc)

    def default(self, name: str) -> Any:
        broker_name = GROUP_CONFIG_NAMES[name]
        return "latest" if broker_name is None else self._config[broker_name]

    def get(self, group_id: str, name: str) -> Any:
        value = self._overrides.get(group_id, {}).get(name)
        return self.default(name) if value is None else value

    def overrides(self, group_id: str) -> dict[str, Any]:
        return dict(self._overrides.get(group_id, {}))

    def describe(self, group_id: str) -> list[tuple[str, str, int, str | None]]:
        """DescribeConfigs of a GROUP resource: (name, value, source, broker synonym) per
        group config; source 8 (GROUP_CONFIG) for an override, else 5 (DEFAULT_CONFIG) or 4
        (STATIC_BROKER_CONFIG) when the broker default was set explicitly."""
        out = []
        own = self._overrides.get(group_id, {})
        for name, broker_name in GROUP_CONFIG_NAMES.items():
            if name in own:
                source = 8
            elif broker_name is not None and self._config.is_explicit(broker_name):
                source = 4
            else:
                source = 5
            out.append((name, str(self.get(group_id, name)), source, broker_name))
        return out

    def parse(self, name: str, value: str | None) -> Any:
        """A group config's value from its string form.

        Raises:
            InvalidConfigError: unknown name, or a value out of range.
            InvalidRequestError: a null value.
        """
        if name not in GROUP_CONFIG_NAMES:
            raise InvalidConfigError(f"Unknown group config name: {name}")
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if name == "share.auto.offset.reset":
            v = value.strip().lower()
            if v not in ("latest", "earliest"):
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                         "String must be one of: latest, earliest")
            return v
        try:
            n = int(value)
        except ValueError:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                     "Not a number of type INT") from None
        cfg = self._config
        bounds = {
            "share.record.lock.duration.ms": (cfg["group.share.min.record.lock.duration.ms"],
                                              cfg["group.share.max.record.lock.duration.ms"]),
            "share.delivery.count.limit": (2, 10),
            "share.heartbeat.interval.ms": (1, 2**31 - 1),
            "share.session.timeout.ms": (1, 2**31 - 1),
        }[name]
        if not bounds[0] <= n <= bounds[1]:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                     f"Value must be between {bounds[0]} and {bounds[1]}")
        return n

    def alter(self, group_id: str, changes: dict[str, Any | None], validate_only: bool) -> None:
        """Set (value) or delete (None) overrides of ``group_id``, durably."""
        new = dict(self._overrides.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                new.pop(name, None)
            else:
                new[name] = value
        if validate_only:
            return
        if new:
            self._overrides[group_id] = new
        else:
            self._overrides.pop(group_id, None)
        tmp = self._path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self._overrides, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
