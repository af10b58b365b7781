"""Client quota configs (KIP-13, KIP-124, KIP-219): the broker configs of the quota windows
and the quota keys a ``user`` / ``client-id`` entity may carry.

Sources: Kafka's ``QuotaConfig`` (server-common) and ``ClientQuotaManagerConfig``: names,
types and defaults as Kafka 3.9 has them. ``quota_config_defs()`` is concatenated into
``BROKER_CONFIG_DEFS`` by ``definitions.py`` (and so listed in docs/configuration.md).

Immutable values; safe to share between threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pylog.config.values import at_least

if TYPE_CHECKING:
    from pylog.config.definitions import ConfigDef

#: The quota keys of a user / client-id entity, with Kafka's value type: a LONG must be a
#: whole number, a DOUBLE may be fractional (``QuotaConfig.userAndClientQuotaConfigs``).
#: ``controller_mutation_rate`` (KIP-599) is Kafka's fourth key; pylog does not enforce it
#: and refuses it rather than store a limit that would do nothing.
CLIENT_QUOTA_KEYS: dict[str, tuple[str, str]] = {
    "producer_byte_rate": (
        "long",
        "A rate representing the upper bound (bytes/sec) for producer traffic.",
    ),
    "consumer_byte_rate": (
        "long",
        "A rate representing the upper bound (bytes/sec) for consumer traffic.",
    ),
    "request_percentage": (
        "double",
        "A percentage representing the upper bound of time spent for processing "
        "requests (100 is one request-handler thread's whole time).",
    ),
}
#: Kafka's quota keys pylog knows but does not implement (refused with a reason).
UNSUPPORTED_QUOTA_KEYS: dict[str, str] = {
    "controller_mutation_rate": "controller mutation quotas (KIP-599) are not implemented by pylog",
    "connection_creation_rate": "IP connection-rate quotas (KIP-612) are not implemented by pylog",
}


def quota_config_defs() -> list[ConfigDef]:
    """The broker configs of client quotas (Kafka's ``QuotaConfig.CONFIG_DEF``, the part
    that applies to client quotas)."""
    from pylog.config.definitions import ConfigDef  # definitions imports this module

    return [
        ConfigDef(
            "quota.window.num",
            "int",
            11,
            "The number of samples to retain in memory for client quotas: a client's rate is "
            "measured over this many windows (10 whole windows and the current one).",
            at_least(1),
        ),
        ConfigDef(
            "quota.window.size.seconds",
            "int",
            1,
            "The time span of each sample for client quotas.",
            at_least(1),
        ),
    ]
