"""Group configs (Kafka's ``GroupConfig``; resource type GROUP = 32 of DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs): per-group overrides of the broker's group
settings, for KIP-848 consumer groups and KIP-932 share groups::

    consumer.session.timeout.ms    group.consumer.session.timeout.ms, within
                                   group.consumer.min/max.session.timeout.ms
    consumer.heartbeat.interval.ms group.consumer.heartbeat.interval.ms, within
                                   group.consumer.min/max.heartbeat.interval.ms
    share.session.timeout.ms       group.share.session.timeout.ms, within
                                   group.share.min/max.session.timeout.ms
    share.heartbeat.interval.ms    group.share.heartbeat.interval.ms, within
                                   group.share.min/max.heartbeat.interval.ms
    share.record.lock.duration.ms  group.share.record.lock.duration.ms, at least 1000 and
                                   within group.share.min/max.record.lock.duration.ms
    share.delivery.count.limit     group.share.delivery.count.limit, within
                                   group.share.min/max.delivery.count.limit (2 and 10)
    share.partition.max.record.locks  group.share.partition.max.record.locks (100-10000)
    share.auto.offset.reset        latest | earliest | by_duration:<ISO-8601 duration>
                                   (no broker setting: latest)
    share.isolation.level          read_uncommitted | read_committed (no broker
                                   setting: read_uncommitted)
    share.renew.acknowledge.enable true | false (no broker setting: true)

A value outside its bounds is INVALID_CONFIG naming the key and the bound (Kafka's
``GroupConfig.validateValues`` words); the session timeout must stay above the heartbeat
interval, each taken from the group when it sets it, else from the broker.

Where they are kept (``GroupConfigs`` holds the parsed overrides every reader uses):

- **single node**: ``group-configs.json`` in the log directory (written to a temporary
  file, fsynced, renamed; read at start: ``pylog.broker.group_config_file``), saved by
  ``alter`` and ``delete`` through the ``save`` function the broker gives.
- **cluster mode**: ZooKeeper's ``/config/groups/<group>`` (``{"version":1,"config":{...}}``,
  string values, as ``/config/topics``), each write followed by a ``/config/changes`` notice
  ``{"version":2,"entity_path":"groups/<group>"}``; every broker's config-change listener
  (``pylog.controller.configs``) hands the znode's config to ``apply_stored``, and at start
  every group's config is read (``load_all``). The local file is not used.

Not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pylog._durations import parse_duration_ms
from pylog.errors import InvalidConfigError, InvalidRequestError

__all__ = ["GroupConfigs", "GROUP_CONFIG_DEFS", "GROUP_CONFIG_NAMES", "GroupConfigDef",
           "reset_duration_ms"]

log = logging.getLogger("pylog.group.configs")


@dataclasses.dataclass(frozen=True)
class GroupConfigDef:
    """One group config: its broker setting (the default; None: ``fixed``), its type
    (``int`` or ``string``), the broker settings bounding it (or fixed bounds), the values
    a string may take."""

    broker_name: str | None
    type: str = "int"
    min_name: str | None = None
    max_name: str | None = None
    fixed_min: int = 1
    fixed_max: int = 2**31 - 1
    choices: tuple[str, ...] = ()
    fixed: str | None = None
    doc: str = ""


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(
        "group.consumer.session.timeout.ms", min_name="group.consumer.min.session.timeout.ms",
        max_name="group.consumer.max.session.timeout.ms",
        doc="A consumer-group member that does not heartbeat this long is removed."),
    "consumer.heartbeat.interval.ms": GroupConfigDef(
        "group.consumer.heartbeat.interval.ms", min_name="group.consumer.min.heartbeat.interval.ms",
        max_name="group.consumer.max.heartbeat.interval.ms",
        doc="Heartbeat interval given to consumer-group members."),
    "share.session.timeout.ms": GroupConfigDef(
        "group.share.session.timeout.ms", min_name="group.share.min.session.timeout.ms",
        max_name="group.share.max.session.timeout.ms",
        doc="A share-group member that does not heartbeat this long is removed."),
    "share.heartbeat.interval.ms": GroupConfigDef(
        "group.share.heartbeat.interval.ms", min_name="group.share.min.heartbeat.interval.ms",
        max_name="group.share.max.heartbeat.interval.ms",
        doc="Heartbeat interval given to share-group members."),
    "share.record.lock.duration.ms": GroupConfigDef(
        "group.share.record.lock.duration.ms", min_name="group.share.min.record.lock.duration.ms",
        max_name="group.share.max.record.lock.duration.ms", fixed_min=1000,
        doc="How long a share consumer holds a record it acquired."),
    "share.delivery.count.limit": GroupConfigDef(
        "group.share.delivery.count.limit", min_name="group.share.min.delivery.count.limit",
        max_name="group.share.max.delivery.count.limit", fixed_min=2,
        doc="Deliveries of a record to share consumers before it is archived."),
    "share.partition.max.record.locks": GroupConfigDef(
        "group.share.partition.max.record.locks", fixed_min=100, fixed_max=10000,
        doc="Most in-flight records of one share partition of the group."),
    "share.auto.offset.reset": GroupConfigDef(
        None, type="string", choices=("latest", "earliest", "by_duration:<PnDTnHnMn.nS>"), fixed="latest",
        doc="Where a share group starts reading a partition it has no state for: earliest, "
            "latest, or by_duration:<PnDTnHnMn.nS> (the first record at most that old)."),
    "share.isolation.level": GroupConfigDef(
        None, type="string", choices=("read_uncommitted", "read_committed"),
        fixed="read_uncommitted",
        doc="read_committed delivers only committed transactional records (and nothing past "
            "an open transaction); read_uncommitted delivers aborted ones too."),
    "share.renew.acknowledge.enable": GroupConfigDef(
        None, type="boolean", fixed="true",
        doc="Whether the group's share consumers may renew their acquisition locks "
            "(AcknowledgeType RENEW)."),
}

_RESET = "share.auto.offset.reset"
_BY_DURATION = "by_duration:"

#: group config -> its broker setting (None: a fixed default).
GROUP_CONFIG_NAMES: dict[str, str | None] = {n: d.broker_name for n, d in GROUP_CONFIG_DEFS.items()}

# (session timeout, heartbeat interval): the first must stay above the second.
_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
          ("share.session.timeout.ms", "share.heartbeat.interval.ms"))

SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 4, 5, 8  # Kafka's ConfigSource


class GroupConfigs:
    """The parsed overrides of every group with one (see the module docstring)."""

    def __init__(self, broker_config: Any, overrides: Mapping[str, Mapping[str, Any]] | None = None,
                 save: Callable[[dict[str, dict[str, Any]]], None] | None = None) -> None:
        """``overrides``: what the local store held at start; ``save``: writes every
        group's overrides durably (single node), None in cluster mode (ZooKeeper is the
        store, ``apply_stored`` keeps this copy)."""
        self._config = broker_config
        self._overrides: dict[str, dict[str, Any]] = {g: dict(v) for g, v in (overrides or {}).items() if v}
        self._save_fn = save

    # ------------------------------------------------------------------ reading

    def default(self, name: str) -> Any:
        d = GROUP_CONFIG_DEFS[name]
        if d.broker_name is None:
            return d.fixed == "true" if d.type == "boolean" else d.fixed
        return self._config[d.broker_name]

    def get(self, group_id: str, name: str) -> Any:
        value = self._overrides.get(group_id, {}).get(name)
        return self.default(name) if value is None else value

    def setting(self, group_id: str, name: str, default: Any) -> Any:
        """The group's override of ``name``, else ``default`` (the coordinators' own copy of
        the broker setting)."""
        value = self._overrides.get(group_id, {}).get(name)
        return default if value is None else value

    def overrides(self, group_id: str) -> dict[str, Any]:
        return dict(self._overrides.get(group_id, {}))

    def groups(self) -> list[str]:
        return sorted(self._overrides)

    def describe(self, group_id: str, own: Mapping[str, Any] | None = None,
                 ) -> list[tuple[str, str, int, str | None]]:
        """DescribeConfigs of a GROUP resource: (name, value, source, broker synonym) per
        group config; source 8 (GROUP_CONFIG) for an override, else 4 (STATIC_BROKER_CONFIG)
        when the broker setting was given explicitly, else 5 (DEFAULT_CONFIG). ``own``: the
        group's overrides (strings or parsed) when the caller read them (ZooKeeper), else
        this copy's."""
        out = []
        if own is None:
            own = self._overrides.get(group_id, {})
        for name, d in GROUP_CONFIG_DEFS.items():
            if name in own:
                source = SOURCE_GROUP
            elif d.broker_name is not None and self._config.is_explicit(d.broker_name):
                source = SOURCE_STATIC_BROKER
            else:
                source = SOURCE_DEFAULT
            value = own[name] if name in own else self.default(name)
            out.append((name, _string(value), source, d.broker_name))
        return out

    # ------------------------------------------------------------------ validation

    def parse(self, name: str, value: str | None) -> Any:
        """A group config's value from its string form, within its bounds.

        Raises:
            InvalidConfigError: unknown name, a value of the wrong type or out of bounds.
            InvalidRequestError: a null value.
        """
        d = GROUP_CONFIG_DEFS.get(name)
        if d is None:
            raise InvalidConfigError(f"Unknown group config name: {name}")
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if name == _RESET:
            return _parse_reset(value)
        if d.type == "boolean":
            # Kafka's ConfigDef BOOLEAN: true or false, in any case.
            v = value.strip().lower()
            if v not in ("true", "false"):
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                         "Expected value to be either true or false")
            return v == "true"
        if d.type == "string":
            v = value.strip().lower()
            if v not in d.choices:
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                         f"String must be one of: {', '.join(d.choices)}")
            return v
        try:
            n = int(value.strip())
        except ValueError:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                     "Not a number of type INT") from None
        if not d.fixed_min <= n <= d.fixed_max:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: "
                                     f"Value must be between {d.fixed_min} and {d.fixed_max}")
        if d.min_name is not None and n < self._config[d.min_name]:
            raise InvalidConfigError(f"{name} must be greater than or equal to {d.min_name} "
                                     f"({self._config[d.min_name]})")
        if d.max_name is not None and n > self._config[d.max_name]:
            raise InvalidConfigError(f"{name} must be less than or equal to {d.max_name} "
                                     f"({self._config[d.max_name]})")
        return n

    def parse_all(self, raw: Mapping[str, str | None]) -> dict[str, Any]:
        """Every value of a group's whole config parsed, then checked together: each
        session timeout above its heartbeat interval (the broker's value for one the group
        does not set)."""
        parsed = {name: self.parse(name, value) for name, value in raw.items()}
        for session, interval in _PAIRS:
            s = parsed.get(session, self.default(session))
            i = parsed.get(interval, self.default(interval))
            if (session in parsed or interval in parsed) and s <= i:
                raise InvalidConfigError(f"{session} must be greater than {interval} ({s} <= {i})")
        return parsed

    # ------------------------------------------------------------------ changes

    def alter(self, group_id: str, overrides: Mapping[str, Any], validate_only: bool) -> None:
        """Single node: replace the group's (parsed) overrides, durably. Cluster mode writes
        ZooKeeper instead (``pylog.controller.configs.write_group_config``) and every broker
        takes the result through ``apply_stored``."""
        if validate_only:
            return
        self._set(group_id, dict(overrides))
        self._save()

    def apply_stored(self, group_id: str, raw: Mapping[str, str]) -> None:
        """Cluster mode: ``/config/groups/<group>``'s strings, as they are now ({} when the
        znode is gone). A value this broker refuses (written by hand, or under other
        bounds) is left out with an error in the log; the rest applies."""
        parsed: dict[str, Any] = {}
        for name, value in raw.items():
            try:
                parsed[name] = self.parse(name, value)
            except (InvalidConfigError, InvalidRequestError) as exc:
                log.error("group %s: config %s=%r from ZooKeeper ignored: %s", group_id, name, value, exc)
        self._set(group_id, parsed)

    def delete(self, group_id: str) -> bool:
        """Drop the group's overrides (its group was deleted); single node: durably.
        True when it had some."""
        if group_id not in self._overrides:
            return False
        self._set(group_id, {})
        self._save()
        return True

    def _set(self, group_id: str, overrides: dict[str, Any]) -> None:
        if overrides:
            self._overrides[group_id] = overrides
        else:
            self._overrides.pop(group_id, None)

    def _save(self) -> None:
        if self._save_fn is not None:
            self._save_fn({g: dict(v) for g, v in self._overrides.items()})


def _parse_reset(value: str) -> str:
    """``share.auto.offset.reset`` as Kafka's ``ShareGroupAutoOffsetResetStrategy`` reads it:
    earliest, latest or ``by_duration:<ISO-8601 duration>`` with a duration that is not
    negative (``Duration.parse``'s grammar). The keyword is taken in any case (Kafka wants
    lowercase); the value kept is lowercase with the duration as given.

    Raises:
        InvalidConfigError: anything else, with Kafka's words.
    """
    v = value.strip()
    low = v.lower()
    if low in ("earliest", "latest"):
        return low
    if low.startswith(_BY_DURATION):
        text = v[len(_BY_DURATION):]
        try:
            ms = parse_duration_ms(text)
        except ValueError:
            ms = -1
        if ms >= 0 and not text.strip().startswith("-"):
            return _BY_DURATION + text.strip()
    raise InvalidConfigError(
        f"Invalid value {value} for configuration {_RESET}: Invalid value `{value}` for "
        f"configuration {_RESET}. The value must be either 'earliest', 'latest' or of the "
        "format 'by_duration:<PnDTnHnMn.nS>'.")


def reset_duration_ms(reset: str) -> int | None:
    """The duration in ms of a parsed ``by_duration:`` strategy, None for earliest/latest."""
    if not reset.startswith(_BY_DURATION):
        return None
    return parse_duration_ms(reset[len(_BY_DURATION):])


def to_strings(overrides: Mapping[str, Any]) -> dict[str, str]:
    """Parsed overrides in Kafka's string form, as ``/config/groups/<group>`` stores them."""
    return {name: _string(value) for name, value in overrides.items()}


def _string(value: Any) -> str:
    """A parsed value in Kafka's string form (booleans lowercase, as Java prints them)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
