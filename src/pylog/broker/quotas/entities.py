"""Quota entities as Kafka names them on the wire, in ZooKeeper and in the data directory,
and Kafka's rules for altering and describing them (sans-IO, pure functions).

- **On the wire** (DescribeClientQuotas 48, AlterClientQuotas 49) an entity is a list of
  (entity type, name) pairs, types ``user`` and ``client-id``, a null name for the default
  entity.
- **In ZooKeeper** (Kafka's ZK mode, ``AdminZkClient`` / ``ConfigEntityName``) an entity is
  a path under ``/config``: ``clients/<client-id>``, ``users/<user>`` or
  ``users/<user>/clients/<client-id>``, each name URL-encoded as Kafka's ``Sanitizer`` does
  and the default entity named ``<default>``; the znode holds
  ``{"version":1,"config":{"producer_byte_rate":"1048576"}}`` (strings, as every config).
  On a single node the same paths key ``client-quotas.json`` in the data directory.
- **Validation** follows Kafka's controller (``ClientQuotaControlManager``): INVALID_REQUEST
  for an empty entity, a repeated or unknown entity type, an empty name, an unknown quota
  key, a duplicate key, a value not above 0 or a fractional value for a whole-number key.
- **Describe filters** (``ClientQuotasImage.describe``): per entity type an exact name
  (match type 0), the default (1) or any name (2); ``strict`` excludes entities with other
  types.
"""

from __future__ import annotations

import logging
import math
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from pylog import errors
from pylog.broker.quotas.manager import DEFAULT, Name, QuotaEntity
from pylog.config.quota_defs import CLIENT_QUOTA_KEYS, UNSUPPORTED_QUOTA_KEYS

log = logging.getLogger("pylog.broker.quotas")

USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: The ZooKeeper name of a default entity (``ZooKeeperInternals.DEFAULT_STRING``).
DEFAULT_ZK_NAME = "<default>"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
#: The principal of every connection until authentication exists (``KafkaPrincipal.ANONYMOUS``):
#: user quotas apply to it through ``/config/users/<default>`` or ``/config/users/ANONYMOUS``.
ANONYMOUS = "ANONYMOUS"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encode (UTF-8) for a znode name; ``*`` and
    space percent-encoded, ``~`` too (Java's encoder keeps only ``A-Za-z0-9.-_``)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's ``URLDecoder``: ``+`` is a space)."""
    return urllib.parse.unquote_plus(name)


def _zk_name(name: Name) -> str:
    return DEFAULT_ZK_NAME if name is DEFAULT else sanitize(str(name))


def _from_zk_name(name: str) -> Name:
    return DEFAULT if name == DEFAULT_ZK_NAME else desanitize(name)


def entity_path(entity: QuotaEntity) -> str:
    """``clients/<c>``, ``users/<u>`` or ``users/<u>/clients/<c>`` (sanitized names)."""
    if entity.user is not None:
        path = f"users/{_zk_name(entity.user)}"
        if entity.client_id is not None:
            path += f"/clients/{_zk_name(entity.client_id)}"
        return path
    if entity.client_id is not None:
        return f"clients/{_zk_name(entity.client_id)}"
    raise ValueError("an empty quota entity has no path")


def parse_entity_path(path: str) -> QuotaEntity | None:
    """The entity of a config entity path (as ``entity_path`` writes it, or a change
    notice's ``entity_path``); None when the path is not a quota entity's (topics/...)."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return QuotaEntity(None, _from_zk_name(parts[1]))
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return QuotaEntity(_from_zk_name(parts[1]), None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return QuotaEntity(_from_zk_name(parts[1]), _from_zk_name(parts[3]))
    return None


def parse_quota_values(path: str, raw: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a stored entity config, as numbers. Other keys (a user's SCRAM
    credentials) are not quotas and are left out; a value that is not a positive number
    (written by hand) is left out with a warning naming the entity, as if unset."""
    out = {}
    for key, value in raw.items():
        if key in CLIENT_QUOTA_KEYS:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if not number > 0 or not math.isfinite(number):
                log.warning(
                    "config %s: %s=%r is not a quota (a number above 0); ignored: "
                    "set it again with `pylog configs alter`",
                    path,
                    key,
                    value,
                )
                continue
            out[key] = number
    return out


def format_quota_value(key: str, value: float) -> str:
    """A quota value as Kafka stores it: a whole number for a LONG key, else a double."""
    if CLIENT_QUOTA_KEYS[key][0] == "long":
        return str(int(value + 1e-6))
    return repr(float(value))


# -- the wire ------------------------------------------------------------------------------


def entity_from_wire(components: Iterable[Any]) -> QuotaEntity:
    """An AlterClientQuotas entity (``EntityData`` list) as a ``QuotaEntity``; Kafka's
    INVALID_REQUEST texts for what it refuses."""
    seen: dict[str, Name] = {}
    for c in components:
        etype, name = c.entity_type, c.entity_name
        if etype in seen:
            raise errors.InvalidRequestError(
                f"Invalid client quota entity, duplicate entity entry {etype}"
            )
        if etype not in (USER, CLIENT_ID, IP):
            raise errors.InvalidRequestError(f"Unhandled client quota entity type: {etype}")
        if name is not None and name == "":
            raise errors.InvalidRequestError(f"Empty {etype} not supported")
        seen[etype] = DEFAULT if name is None else name
    if not seen:
        raise errors.InvalidRequestError("Invalid empty client quota entity")
    if IP in seen:
        if len(seen) > 1:
            raise errors.InvalidRequestError(
                "Invalid quota entity combination, IP entity should not be combined with "
                "User or ClientId"
            )
        raise errors.InvalidRequestError(
            "IP quotas (connection_creation_rate, KIP-612) are not supported by pylog; "
            "use user or client-id entities"
        )
    return QuotaEntity(seen.get(USER), seen.get(CLIENT_ID))


def entity_to_wire(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) pairs, user first."""
    out = []
    if entity.user is not None:
        out.append((USER, None if entity.user is DEFAULT else str(entity.user)))
    if entity.client_id is not None:
        out.append((CLIENT_ID, None if entity.client_id is DEFAULT else str(entity.client_id)))
    return out


def apply_ops(current: Mapping[str, float], ops: Iterable[Any]) -> dict[str, float]:
    """The quotas of an entity after AlterClientQuotas ``ops`` (``key``, ``value``,
    ``remove``); INVALID_REQUEST for what Kafka's controller refuses."""
    out = dict(current)
    seen: set[str] = set()
    for op in ops:
        key = op.key
        if key in seen:
            raise errors.InvalidRequestError(
                f"Duplicate quota key {key} not updating quota for this entity"
            )
        seen.add(key)
        if op.remove:
            out.pop(key, None)
            continue
        if key in UNSUPPORTED_QUOTA_KEYS:
            raise errors.InvalidRequestError(f"{key}: {UNSUPPORTED_QUOTA_KEYS[key]}")
        kind = CLIENT_QUOTA_KEYS.get(key)
        if kind is None:
            raise errors.InvalidRequestError(
                f"Invalid configuration key {key}; the quota keys are "
                f"{', '.join(CLIENT_QUOTA_KEYS)}"
            )
        value = float(op.value)
        if not math.isfinite(value) or value <= 0.0:
            raise errors.InvalidRequestError(f"Quota {key} must be greater than 0")
        if kind[0] == "long":
            if value > 2**63 - 1:
                raise errors.InvalidRequestError(
                    f"Proposed value for {key} is too large for a LONG."
                )
            if abs(value % 1.0) > 1e-6:
                raise errors.InvalidRequestError(f"{key} cannot be a fractional value.")
        out[key] = value
    return out


class DescribeFilter:
    """A DescribeClientQuotas filter (``components`` and ``strict``), checked as Kafka
    checks it; ``matches(entity)``."""

    def __init__(self, components: Iterable[Any], strict: bool) -> None:
        self.exact: dict[str, Name] = {}
        self.any: set[str] = set()
        self.strict = strict
        self.ip = False
        for c in components:
            etype = c.entity_type
            if not etype:
                raise errors.InvalidRequestError("Invalid empty entity type.")
            if etype in self.exact or etype in self.any:
                raise errors.InvalidRequestError(
                    f"Entity type {etype} cannot appear more than once in the filter."
                )
            if etype not in (USER, CLIENT_ID, IP):
                raise errors.UnsupportedVersionError(f"Unsupported entity type {etype}")
            if c.match_type == MATCH_EXACT:
                if c.match is None:
                    raise errors.InvalidRequestError(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null."
                    )
                self.exact[etype] = c.match
            elif c.match_type == MATCH_DEFAULT:
                if c.match is not None:
                    raise errors.InvalidRequestError(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                self.exact[etype] = DEFAULT
            elif c.match_type == MATCH_SPECIFIED:
                if c.match is not None:
                    raise errors.InvalidRequestError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                self.any.add(etype)
            else:
                raise errors.InvalidRequestError(f"Unknown match type {c.match_type}")
        types = set(self.exact) | self.any
        if IP in types:
            if types & {USER, CLIENT_ID}:
                raise errors.InvalidRequestError(
                    "Invalid entity filter component combination. IP filter component should "
                    "not be used with user or clientId filter component."
                )
            self.ip = True  # pylog stores no IP quotas: nothing matches

    def matches(self, entity: QuotaEntity) -> bool:
        if self.ip:
            return False
        parts = {USER: entity.user, CLIENT_ID: entity.client_id}
        present = {k: v for k, v in parts.items() if v is not None}
        if self.strict and len(present) != len(self.exact) + len(self.any):
            return False
        for etype, name in self.exact.items():
            if etype not in present or present[etype] != name:
                return False
        return all(etype in present for etype in self.any)
