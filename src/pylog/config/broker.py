"""The broker's configuration: server.properties, --override flags, listeners, checks."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pylog.config.definitions import (
    BROKER_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    TopicConfigDef,
)
from pylog.config.security_defs import (
    LISTENER_OVERRIDABLE_PREFIXES,
    MECHANISM_PREFIXES,
    SECURITY_PROTOCOLS,
    SERVED_PROTOCOLS,
)
from pylog.config.values import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    ConfigError,
    format_value,
)

# --- Kafka settings pylog knows but cannot honour -----------------------------------------------
#
# A setting that is accepted must work. Those pylog cannot honour are refused, naming the key
# and what to do instead: ConfigError here, INVALID_CONFIG (40) from CreateTopics /
# AlterConfigs / IncrementalAlterConfigs, a one-line start-up error from server.properties or
# --override. Deprecated settings that Kafka 3.x still accepts and ignores are accepted with
# a warning.

# Kafka's default, found in every server.properties Kafka ships: accepted (with a warning) so
# that such a file starts; any other count would promise network threads pylog does not have.
NETWORK_THREADS_DEFAULT = 3

# Deprecated topic configs (and their log.* broker synonyms) -> why ignoring them is right.
DEPRECATED_TOPIC_CONFIGS = {
    "message.format.version": (
        "records are always written in message format v2, as Kafka 3.x does from "
        "inter.broker.protocol.version 3.0 on (Kafka 4.0 removed it)"
    ),
    "message.downconversion.enable": (
        "pylog serves Fetch v4 and later only, which never needs down-conversion "
        "(Kafka 4.0 removed it)"
    ),
}


def _deprecation_warning(key: str, topic_key: str) -> str:
    return f"{key} is deprecated and ignored: {DEPRECATED_TOPIC_CONFIGS[topic_key]}"


def check_topic_configs(overrides: Mapping[str, Any]) -> list[str]:
    """Warnings for the deprecated topic configs among ``overrides`` (parsed), which pylog
    accepts and ignores."""
    return [_deprecation_warning(k, k) for k in sorted(overrides) if k in DEPRECATED_TOPIC_CONFIGS]


def _check_broker_configs(explicit: Mapping[str, Any]) -> list[str]:
    """Broker-level counterpart of ``check_topic_configs`` on the parsed explicit settings.
    Returns warnings; raises ConfigError."""
    _check_cleaner_configs(explicit)
    _check_consumer_group_configs(explicit)
    warnings = []
    threads = explicit.get("num.network.threads")
    if threads is not None:
        if threads != NETWORK_THREADS_DEFAULT:
            raise ConfigError(
                "num.network.threads",
                f"pylog's network layer is one event loop, it cannot use {threads} threads: remove "
                f"this setting (or set Kafka's default {NETWORK_THREADS_DEFAULT}); disk work runs "
                "on num.io.threads",
            )
        warnings.append(
            f"num.network.threads={threads} is ignored: pylog's network layer is one event loop"
        )
    for topic_key in DEPRECATED_TOPIC_CONFIGS:
        if "log." + topic_key in explicit:
            warnings.append(_deprecation_warning("log." + topic_key, topic_key))
    return warnings


def _check_cleaner_configs(explicit: Mapping[str, Any]) -> None:
    """Kafka's ``KafkaConfig.validateValues`` for the cleaner: each thread's offset map gets
    more than 1 MiB. Kafka divides by ``log.cleaner.threads`` there, so 0 threads fails its
    start too; here the message says what to do."""
    defaults = {
        k: BROKER_CONFIG_DEFS[k].default
        for k in ("log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size")
    }
    values = {k: explicit.get(k, v) for k, v in defaults.items()}
    threads = values["log.cleaner.threads"]
    if threads == 0:
        if values["log.cleaner.enable"]:
            raise ConfigError(
                "log.cleaner.threads",
                "0 threads clean nothing: set log.cleaner.enable=false to run no log "
                "cleaner, or give at least 1 thread",
            )
        return
    if values["log.cleaner.dedupe.buffer.size"] // threads <= 1024 * 1024:
        raise ConfigError(
            "log.cleaner.dedupe.buffer.size",
            f"must be at least 1MB per cleaner thread ({threads} threads): raise it "
            "or lower log.cleaner.threads",
        )


def _check_consumer_group_configs(explicit: Mapping[str, Any]) -> None:
    """Kafka's ``GroupCoordinatorConfig`` checks of the KIP-848 settings: the heartbeat
    interval and the session timeout each within their min and max, the interval below the
    timeout, ``classic`` always among the rebalance protocols."""
    def value(key: str) -> Any:
        return explicit.get(key, BROKER_CONFIG_DEFS[key].default)

    for name in ("heartbeat.interval.ms", "session.timeout.ms"):
        key = "group.consumer." + name
        lo, hi = value("group.consumer.min." + name), value("group.consumer.max." + name)
        if not lo <= value(key) <= hi:
            raise ConfigError(key, f"{value(key)} must be within group.consumer.min.{name} ({lo}) "
                                   f"and group.consumer.max.{name} ({hi})")
    if value("group.consumer.heartbeat.interval.ms") >= value("group.consumer.session.timeout.ms"):
        raise ConfigError("group.consumer.heartbeat.interval.ms",
                          "must be below group.consumer.session.timeout.ms")
    if "classic" not in [p.lower() for p in value("group.coordinator.rebalance.protocols")]:
        raise ConfigError("group.coordinator.rebalance.protocols", "must include classic")


@dataclasses.dataclass(frozen=True)
class Listener:
    """One entry of ``listeners`` / ``advertised.listeners``: ``NAME://host:port`` and the
    security protocol ``listener.security.protocol.map`` gives the name."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


_LISTENER_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)")


def parse_protocol_map(key: str, value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}."""
    out: dict[str, str] = {}
    for item in (p.strip() for p in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ConfigError(key, f"invalid entry {item!r}; expected LISTENER_NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"{item!r}: {protocol!r} is not a security protocol; use "
                              f"one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in out:
            raise ConfigError(key, f"listener name {name} is mapped twice")
        out[name] = protocol
    return out


def parse_listeners(key: str, items: Iterable[str],
                    protocol_map: Mapping[str, str] | None = None) -> list[Listener]:
    """Parse ``listeners`` or ``advertised.listeners`` as Kafka does: each name once, each
    (non-zero) port once, each name mapped to a security protocol."""
    protocol_map = parse_protocol_map(key, _DEFAULT_PROTOCOL_MAP) if protocol_map is None \
        else protocol_map
    listeners: list[Listener] = []
    for item in items:
        m = _LISTENER_RE.fullmatch(item.strip())
        if not m:
            raise ConfigError(key, f"invalid listener {item!r}; expected NAME://host:port "
                              "(e.g. PLAINTEXT://127.0.0.1:9092)")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if port > 65535:
            raise ConfigError(key, f"listener {item!r}: port out of range")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(key, f"listener {item!r}: no security protocol defined for "
                              f"listener {name}: add {name}:SSL (or :PLAINTEXT) to "
                              "listener.security.protocol.map")
        if protocol not in SERVED_PROTOCOLS:  # pragma: no cover - every protocol is served
            raise ConfigError(key, f"listener {item!r}: {protocol} is not served")
        if any(ll.name == name for ll in listeners):
            raise ConfigError(key, f"each listener must have a different name: {name} is "
                              "listed twice")
        if port and any(ll.port == port for ll in listeners):
            raise ConfigError(key, f"each listener must have a different port: {port} is "
                              "listed twice")
        listeners.append(Listener(name, host, port, protocol))
    if not listeners:
        raise ConfigError(key, "at least one listener is required")
    return listeners


_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
LISTENER_PREFIX = "listener.name."


def _listener_key(key: str) -> tuple[str, str] | None:
    """``listener.name.<name>.<key>`` -> (NAME, key) for a key that may be set per listener."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    name, sep, sub = key[len(LISTENER_PREFIX):].partition(".")
    if sep and sub.startswith(MECHANISM_PREFIXES):  # listener.name.<l>.<mechanism>.sasl.*
        _mech, _, rest = sub.partition(".")
        if rest.startswith("sasl."):
            return name.upper(), rest
    if not sep or not name or not sub.startswith(LISTENER_OVERRIDABLE_PREFIXES):
        return None
    return name.upper(), sub


# --- the broker's configuration ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConfigEntry:
    """One line of DescribeConfigs."""

    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    type: str
    doc: str
    synonyms: tuple[tuple[str, str | None, int], ...]


def _did_you_mean(key: str) -> str:
    """ "; did you mean 'log.retention.hours'?" for a misspelt broker key, else ""."""
    close = difflib.get_close_matches(key.lower(), list(BROKER_CONFIG_DEFS), n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""


class BrokerConfig:
    """Parsed, validated broker configuration (static: read once at start)."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        explicit: dict[str, Any] = {}
        values = values or {}
        per_listener: dict[str, tuple[str, str]] = {}
        for key, raw in values.items():
            d = BROKER_CONFIG_DEFS.get(key)
            if d is None:
                scoped = _listener_key(key)
                d = BROKER_CONFIG_DEFS.get(scoped[1]) if scoped is not None else None
                if d is None or scoped is None:
                    raise ConfigError(key, "unknown configuration" + _did_you_mean(key))
                per_listener[key] = scoped
                explicit[key] = dataclasses.replace(d, name=key).parse(raw)
                continue
            explicit[key] = d.parse(raw)
        self._explicit = explicit
        # Settings accepted but ignored, for the broker to log at start.
        self.warnings: list[str] = _check_broker_configs(explicit)
        self._init_listeners(per_listener)
        dirs = self._explicit.get("log.dirs")
        if dirs is None and self["log.dir"] is not None:
            dirs = [self["log.dir"]]
        if dirs is None:
            dirs = self["log.dirs"]
        if len(dirs) != 1 or not dirs[0]:
            raise ConfigError("log.dirs", f"exactly one directory is supported, got {dirs!r}")
        self.log_dir: str = dirs[0]
        node_id = self["node.id"]
        if "node.id" not in explicit and self["broker.id"] >= 0:
            node_id = self["broker.id"]
        self.node_id: int = node_id
        self.cluster_mode: bool = bool(self["zookeeper.connect"])
        if not self.cluster_mode and self["default.replication.factor"] != 1:
            raise ConfigError(
                "default.replication.factor",
                "a single-node broker needs 1 (set zookeeper.connect to run a cluster)",
            )
        # The topic-level defaults, computed once (validates the broker synonyms too).
        self._topic_defaults = {
            name: self._topic_default(d) for name, d in TOPIC_CONFIG_DEFS.items()
        }
        for name, (value, _s, key) in self._topic_defaults.items():
            tdef = TOPIC_CONFIG_DEFS[name]
            if tdef.validator is not None and value is not None:
                tdef.validator(key, value)

    def _init_listeners(self, per_listener: Mapping[str, tuple[str, str]]) -> None:
        """``listeners``, ``advertised.listeners`` and the inter-broker listener, checked
        against each other as Kafka's ``KafkaConfig.validateValues`` does."""
        self.protocol_map = parse_protocol_map("listener.security.protocol.map",
                                               self["listener.security.protocol.map"])
        self.listeners = parse_listeners("listeners", self["listeners"], self.protocol_map)
        names = [ll.name for ll in self.listeners]
        adv = self["advertised.listeners"]
        if adv:
            self.advertised_listeners = parse_listeners("advertised.listeners", adv,
                                                        self.protocol_map)
            for ll in self.advertised_listeners:
                if ll.name not in names:
                    raise ConfigError("advertised.listeners", f"listener {ll.name} is not one "
                                      f"of listeners ({', '.join(names)}): advertised "
                                      "listener names must be a subset of listeners")
                if ll.host == "0.0.0.0":
                    raise ConfigError("advertised.listeners", f"listener {ll.name}: cannot "
                                      "advertise the non-routable address 0.0.0.0; give a "
                                      "host name clients can reach")
        else:
            self.advertised_listeners = list(self.listeners)
        for key, (name, _sub) in per_listener.items():
            if name not in names:
                raise ConfigError(key, f"there is no listener {name} (listeners: "
                                  f"{', '.join(names)})")
        if self.is_explicit("inter.broker.listener.name") and \
                self.is_explicit("security.inter.broker.protocol"):
            raise ConfigError("inter.broker.listener.name", "only one of "
                              "inter.broker.listener.name and security.inter.broker.protocol "
                              "may be set")
        if self["inter.broker.listener.name"]:
            inter = self["inter.broker.listener.name"].strip().upper()
        else:
            inter = self["security.inter.broker.protocol"]
        self.inter_broker_listener: str = inter
        advertised = [ll.name for ll in self.advertised_listeners]
        if self.cluster_mode_configured and inter not in advertised:
            key = ("inter.broker.listener.name" if self["inter.broker.listener.name"]
                   else "security.inter.broker.protocol")
            raise ConfigError(key, f"the inter-broker listener {inter} must be one of "
                              f"advertised.listeners ({', '.join(advertised)}): set "
                              "inter.broker.listener.name to one of them")

    @property
    def cluster_mode_configured(self) -> bool:
        return bool(self["zookeeper.connect"])

    def listener(self, name: str) -> Listener | None:
        """The entry of ``listeners`` named ``name`` (None when there is none)."""
        return next((ll for ll in self.listeners if ll.name == name), None)

    def listener_value(self, listener: str, key: str) -> Any:
        """``key`` for ``listener``: ``listener.name.<listener>.<key>`` when set, else
        ``key`` (Kafka's per-listener overrides)."""
        scoped = f"{LISTENER_PREFIX}{listener.lower()}.{key}"
        if scoped in self._explicit:
            return self._explicit[scoped]
        return self[key]

    def mechanism_value(self, listener: str, mechanism: str, key: str) -> Any:
        """``key`` for ``mechanism`` on ``listener``: ``listener.name.<l>.<mechanism>.<key>``,
        then ``listener.name.<l>.<key>``, then ``key`` (Kafka's lookup for SASL settings)."""
        scoped = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.{key}"
        if scoped in self._explicit:
            return self._explicit[scoped]
        return self.listener_value(listener, key)

    def mechanism_key(self, listener: str, mechanism: str, key: str) -> str:
        """The key ``mechanism_value`` took its value from (for error messages)."""
        for scoped in (f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.{key}",
                       f"{LISTENER_PREFIX}{listener.lower()}.{key}"):
            if scoped in self._explicit:
                return scoped
        return key

    def listener_settings(self, listener: str, prefix: str = "ssl.") -> dict[str, Any]:
        """Every ``prefix`` key's value for ``listener`` (see ``listener_value``)."""
        return {k: self.listener_value(listener, k) for k in BROKER_CONFIG_DEFS
                if k.startswith(prefix)}

    def is_explicit_for(self, listener: str, key: str) -> bool:
        return (f"{LISTENER_PREFIX}{listener.lower()}.{key}" in self._explicit
                or key in self._explicit)

    @classmethod
    def from_sources(cls, path: str | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read ``server.properties`` (if given) and apply ``key=value`` overrides on top."""
        values: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    values.update(parse_properties(f.read()))
            except OSError as exc:
                raise ConfigError("--config", f"cannot read {path}: {exc.strerror}") from None
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(item, "an override must look like key=value")
            values[key.strip()] = value.strip()
        return cls(values)

    def __getitem__(self, key: str) -> Any:
        if key in self._explicit:
            return self._explicit[key]
        return BROKER_CONFIG_DEFS[key].default

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    def _topic_default(self, d: TopicConfigDef) -> tuple[Any, int, str]:
        """(value in topic units, source, broker key) for a topic config with no override."""
        for key in d.synonyms:
            if key in self._explicit and self._explicit[key] is not None:
                return (
                    self._to_topic_unit(key, self._explicit[key]),
                    SOURCE_STATIC_BROKER_CONFIG,
                    key,
                )
        for key in d.synonyms:
            default = BROKER_CONFIG_DEFS[key].default
            if default is not None:
                return self._to_topic_unit(key, default), SOURCE_DEFAULT_CONFIG, key
        raise AssertionError(f"{d.name} has no default")  # pragma: no cover - table bug

    @staticmethod
    def _to_topic_unit(key: str, value: Any) -> Any:
        unit = BROKER_CONFIG_DEFS[key].unit_ms
        if unit != 1 and value is not None and value >= 0:
            return value * unit
        return value

    def topic_default(self, name: str) -> Any:
        return self._topic_defaults[name][0]

    def topic_defaults(self) -> dict[str, Any]:
        return {name: v for name, (v, _s, _k) in self._topic_defaults.items()}

    # --- DescribeConfigs ---

    def describe_broker(self) -> list[ConfigEntry]:
        entries = []
        for name, d in sorted(BROKER_CONFIG_DEFS.items()):
            value = self[name]
            source = (
                SOURCE_STATIC_BROKER_CONFIG if name in self._explicit else SOURCE_DEFAULT_CONFIG
            )
            synonyms: list[tuple[str, str | None, int]] = []
            if name in self._explicit:
                synonyms.append((name, format_value(d.type, value), SOURCE_STATIC_BROKER_CONFIG))
            if d.default is not None:
                synonyms.append((name, format_value(d.type, d.default), SOURCE_DEFAULT_CONFIG))
            if d.sensitive:  # passwords and keys: never on the wire (Kafka answers null)
                synonyms = [(n, None, src) for n, _v, src in synonyms]
            entries.append(
                ConfigEntry(
                    name,
                    None if d.sensitive else format_value(d.type, value),
                    source,
                    True,
                    d.sensitive,
                    d.type,
                    d.doc,
                    tuple(synonyms),
                )
            )
        return entries

    def describe_topic(self, overrides: Mapping[str, Any]) -> list[ConfigEntry]:
        entries = []
        for name, d in sorted(TOPIC_CONFIG_DEFS.items()):
            synonyms: list[tuple[str, str | None, int]] = []
            if name in overrides:
                synonyms.append(
                    (name, format_value(d.type, overrides[name]), SOURCE_DYNAMIC_TOPIC_CONFIG)
                )
            for key in d.synonyms:
                bd = BROKER_CONFIG_DEFS[key]
                if key in self._explicit and self._explicit[key] is not None:
                    synonyms.append(
                        (
                            key,
                            format_value(bd.type, self._explicit[key]),
                            SOURCE_STATIC_BROKER_CONFIG,
                        )
                    )
            for key in d.synonyms:
                bd = BROKER_CONFIG_DEFS[key]
                if bd.default is not None:
                    synonyms.append((key, format_value(bd.type, bd.default), SOURCE_DEFAULT_CONFIG))
            if name in overrides:
                value, source = overrides[name], SOURCE_DYNAMIC_TOPIC_CONFIG
            else:
                value, source, _k = self._topic_defaults[name]
            # The first synonym is the primary one (segment.ms -> log.roll.ms, not
            # log.roll.hours): its text describes the topic key's unit.
            doc = d.doc or BROKER_CONFIG_DEFS[d.synonyms[0]].doc
            entries.append(
                ConfigEntry(
                    name,
                    format_value(d.type, value),
                    source,
                    False,
                    False,
                    d.type,
                    doc,
                    tuple(synonyms),
                )
            )
        return entries


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java ``.properties`` text: ``key=value`` / ``key: value`` / ``key value`` lines,
    ``#`` and ``!`` comments, backslash line continuations and escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        assert m is not None
        key, value = _unescape(m.group(1)), _unescape(m.group(2))
        out[key] = value.rstrip()
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", repl, s)


def parse_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Validate topic-level overrides (CreateTopics, AlterConfigs). Raises ConfigError."""
    out = {}
    for key, raw in configs.items():
        d = TOPIC_CONFIG_DEFS.get(key)
        if d is None:
            raise ConfigError(key, "unknown topic configuration")
        out[key] = d.parse(raw)
    return out
