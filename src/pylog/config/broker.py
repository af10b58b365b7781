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
    name: str
    host: str
    port: int


def parse_listeners(key: str, items: Iterable[str]) -> list[Listener]:
    listeners = []
    for item in items:
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/]*):(\d+)", item)
        if not m:
            raise ConfigError(key, f"invalid listener {item!r}; expected NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if name != "PLAINTEXT":
            raise ConfigError(key, f"listener {item!r}: only PLAINTEXT is supported")
        if port > 65535:
            raise ConfigError(key, f"listener {item!r}: port out of range")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ConfigError(key, "at least one listener is required")
    return listeners


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
        for key, raw in values.items():
            d = BROKER_CONFIG_DEFS.get(key)
            if d is None:
                raise ConfigError(key, "unknown configuration" + _did_you_mean(key))
            explicit[key] = d.parse(raw)
        self._explicit = explicit
        # Settings accepted but ignored, for the broker to log at start.
        self.warnings: list[str] = _check_broker_configs(explicit)
        self.listeners = parse_listeners("listeners", self["listeners"])
        adv = self["advertised.listeners"]
        self.advertised_listeners = (
            parse_listeners("advertised.listeners", adv) if adv else list(self.listeners)
        )
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
            entries.append(
                ConfigEntry(
                    name,
                    format_value(d.type, value),
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
