"""Broker and topic configuration: Kafka's names, types, defaults and validators.

Sources: ``ServerLogConfigs``, ``LogConfig``, ``ServerConfigs``, ``SocketServerConfigs`` in
apache/kafka (names and defaults as Kafka 3.9 has them; reference: docs/configuration.md).
A broker is configured from a ``server.properties`` file plus ``--override key=value`` flags; an unknown key or a bad value
fails at start with a message naming the key (``ConfigError``).

Topic-level configs (``retention.ms``, ``max.message.bytes``, ...) each have broker-level
synonyms (``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``) in
priority order; a topic's effective value is its own override if any, else the first broker
synonym set explicitly, else the first synonym's default. DescribeConfigs reports the same
chain (``synonyms``), with Kafka's source codes.

Immutable values; safe to share between threads.

The package: ``values`` (Kafka's value types, parsing, validators), ``definitions`` (the
broker and topic config tables), ``broker`` (``BrokerConfig``, server.properties, listeners).
"""

from __future__ import annotations

from pylog.config.broker import (
    DEPRECATED_TOPIC_CONFIGS,
    NETWORK_THREADS_DEFAULT,
    BrokerConfig,
    ConfigEntry,
    Listener,
    check_topic_configs,
    parse_listeners,
    parse_properties,
    parse_protocol_map,
    parse_topic_configs,
)
from pylog.config.definitions import (
    BROKER_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    ConfigDef,
    TopicConfigDef,
)
from pylog.config.values import (
    CONFIG_TYPE_CODES,
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    MESSAGE_FORMAT_VERSION_DEFAULT,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_UNKNOWN,
    ConfigError,
    at_least,
    between,
    cleanup_policy,
    format_value,
    load_factor,
    metadata_version,
    metrics_listener,
    one_of,
    parse_metrics_listener,
    parse_value,
    positive,
)

__all__ = [
    "BROKER_CONFIG_DEFS",
    "BrokerConfig",
    "CONFIG_TYPE_CODES",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "DEPRECATED_TOPIC_CONFIGS",
    "DOUBLE_MAX",
    "INT_MAX",
    "LONG_MAX",
    "Listener",
    "MESSAGE_FORMAT_VERSION_DEFAULT",
    "NETWORK_THREADS_DEFAULT",
    "SOURCE_DEFAULT_CONFIG",
    "SOURCE_DYNAMIC_BROKER_CONFIG",
    "SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG",
    "SOURCE_DYNAMIC_TOPIC_CONFIG",
    "SOURCE_STATIC_BROKER_CONFIG",
    "SOURCE_UNKNOWN",
    "TOPIC_CONFIG_DEFS",
    "TopicConfigDef",
    "at_least",
    "between",
    "check_topic_configs",
    "cleanup_policy",
    "format_value",
    "load_factor",
    "metadata_version",
    "metrics_listener",
    "one_of",
    "parse_listeners",
    "parse_metrics_listener",
    "parse_properties",
    "parse_protocol_map",
    "parse_topic_configs",
    "parse_value",
    "positive",
]
