"""Config values: Kafka's types, their parsing and formatting, and the validators."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE

# DescribeConfigs ConfigSource codes (DescribeConfigsResponse.json).
SOURCE_UNKNOWN = 0
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

# DescribeConfigs ConfigType codes (v3+).
CONFIG_TYPE_CODES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


class ConfigError(ValueError):
    """A configuration key is unknown or its value invalid. ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


# --- value parsing -------------------------------------------------------------------------

_RANGES = {"int": (-(2**31), INT_MAX), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}


def parse_value(key: str, type_: str, raw: Any) -> Any:
    """Parse ``raw`` (a string from a file or the wire, or an already typed value)."""
    if raw is None:
        return None
    if type_ in _RANGES:
        if isinstance(raw, bool):
            raise ConfigError(key, f"expected an integer, got {raw!r}")
        if isinstance(raw, int):
            value = raw
        else:
            text = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", text):
                raise ConfigError(key, f"expected an integer, got {raw!r}")
            value = int(text)
        lo, hi = _RANGES[type_]
        if not lo <= value <= hi:
            raise ConfigError(key, f"value {value} is out of range for a {type_}")
        return value
    if type_ == "boolean":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(key, f"expected true or false, got {raw!r}")
        return text == "true"
    if type_ == "double":
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(key, f"expected a number, got {raw!r}") from None
    if type_ == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(raw).strip()
        return [p.strip() for p in text.split(",")] if text else []
    return str(raw).strip()


def format_value(type_: str, value: Any) -> str | None:
    """Kafka's string form of a value (DescribeConfigs, the stored topic configs)."""
    if value is None:
        return None
    if type_ == "boolean":
        return "true" if value else "false"
    if type_ == "list":
        return ",".join(value)
    return str(value)


def at_least(n: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and value < n:
            raise ConfigError(key, f"value {value} must be at least {n}")

    return check


def between(lo: float, hi: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and not lo <= value <= hi:
            raise ConfigError(key, f"value {value} must be between {lo} and {hi}")

    return check


def one_of(*choices: str, case_insensitive: bool = False) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        for item in items:
            probe = item.lower() if case_insensitive else item
            allowed = [c.lower() for c in choices] if case_insensitive else list(choices)
            if probe not in allowed:
                raise ConfigError(
                    key, f"invalid value {item!r}; expected one of {', '.join(choices)}"
                )

    return check


def cleanup_policy(key: str, value: Any) -> None:
    """Kafka's ``ValidList.in("compact", "delete")``, and not empty (a topic must have a policy)."""
    if not value:
        raise ConfigError(
            key, "an empty policy is not valid; use delete, compact or compact,delete"
        )
    one_of("delete", "compact")(key, value)


def load_factor(key: str, value: Any) -> None:
    if not 0 < value <= 1:
        raise ConfigError(key, f"value {value} must be more than 0 and at most 1")


def positive(key: str, value: Any) -> None:
    if not value > 0:
        raise ConfigError(key, f"value {value} must be more than 0")


def _metadata_version_names() -> frozenset[str]:
    """Kafka 3.9's ``MetadataVersion`` names: each release, and each release-IVn."""
    releases = {
        "0.8.0": 0,
        "0.8.1": 0,
        "0.8.2": 0,
        "0.9.0": 0,
        "0.10.0": 2,
        "0.10.1": 3,
        "0.10.2": 1,
        "0.11.0": 3,
        "1.0": 1,
        "1.1": 1,
        "2.0": 2,
        "2.1": 3,
        "2.2": 2,
        "2.3": 2,
        "2.4": 2,
        "2.5": 1,
        "2.6": 1,
        "2.7": 3,
        "2.8": 2,
        "3.0": 2,
        "3.1": 1,
        "3.2": 1,
        "3.3": 4,
        "3.4": 1,
        "3.5": 3,
        "3.6": 3,
        "3.7": 5,
        "3.8": 1,
        "3.9": 1,
        "4.0": 2,
    }  # release: number of IV sub-versions (0: named by the release alone)
    names = set(releases)
    for release, ivs in releases.items():
        names.update(f"{release}-IV{i}" for i in range(ivs))
    return frozenset(names)


_METADATA_VERSIONS = _metadata_version_names()
MESSAGE_FORMAT_VERSION_DEFAULT = "3.0-IV1"


def parse_metrics_listener(key: str, value: str) -> tuple[str, int]:
    """``http://host:port`` (``metrics.listener``; ``[::1]`` for IPv6) as (host, port).
    Raises ConfigError when it is not of that form or the port is out of range."""
    m = re.fullmatch(r"http://(\[[^\]]+\]|[^:/\[\]]+):(\d{1,5})/?", value.strip())
    if not m:
        raise ConfigError(
            key,
            f"invalid value {value!r}; expected http://host:port, e.g. "
            "http://127.0.0.1:9404 (port 0: any free port), or leave it unset to "
            "serve no metrics",
        )
    port = int(m.group(2))
    if port > 65535:
        raise ConfigError(key, f"port {port} out of range in {value!r}; use 0 to 65535")
    return m.group(1).strip("[]"), port


def metrics_listener(key: str, value: Any) -> None:
    parse_metrics_listener(key, value)


def metadata_version(key: str, value: Any) -> None:
    """Kafka's ``MetadataVersionValidator``: ``0.10.0.0`` means ``0.10.0``, ``2.8.1`` means
    ``2.8`` (three parts count before 1.0, two after)."""
    parts = value.split(".")
    n = 3 if value.startswith("0.") else 2
    probe = value if n >= len(parts) else ".".join(parts[:n])
    if probe not in _METADATA_VERSIONS:
        raise ConfigError(key, f"{value!r} is not a valid version (examples: 0.10.0, 2.8, 3.0-IV1)")
