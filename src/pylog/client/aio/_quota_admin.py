"""Admin calls about client quotas (KIP-546): DescribeClientQuotas (48) and
AlterClientQuotas (49), sent to any broker (in cluster mode every broker stores them in
ZooKeeper, from where all of them apply them).

An entity is a mapping of entity type (``"user"``, ``"client-id"``) to a name, None for the
default entity: ``{"client-id": "billing"}``, ``{"user": None}`` (``/config/users/<default>``),
``{"user": "alice", "client-id": None}``. Answers name entities as ``QuotaEntity``: sorted
(type, name) pairs, hashable. Event-loop affinity: the admin's loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pylog import errors
from pylog.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest

#: An entity in answers: ((entity type, name or None for the default), ...), sorted by type.
QuotaEntity = tuple[tuple[str, str | None], ...]

ENTITY_TYPES = ("user", "client-id")
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class QuotaFilter(NamedTuple):
    """A describe filter component (Kafka's ``ClientQuotaFilterComponent``): entities whose
    ``entity_type`` is exactly ``match`` (``of_entity``), is the default (``of_default``)
    or is any name (``of_type``)."""

    entity_type: str
    match_type: int = MATCH_SPECIFIED
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> QuotaFilter:
        return cls(entity_type, MATCH_EXACT, name)

    @classmethod
    def of_default(cls, entity_type: str) -> QuotaFilter:
        return cls(entity_type, MATCH_DEFAULT, None)

    @classmethod
    def of_type(cls, entity_type: str) -> QuotaFilter:
        return cls(entity_type, MATCH_SPECIFIED, None)


def entity_key(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def _error(code: int, what: str, message: str | None) -> errors.ApiError:
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(f"{what}: {cls.name}" + (f": {message}" if message else ""))


def describe_entity(entity: Mapping[str, str | None]) -> str:
    """``client-id 'billing'``, ``default user`` ... for messages."""
    return " ".join(f"{t} {n!r}" if n is not None else f"default {t}" for t, n in entity.items())


async def describe_client_quotas(
    conn: Any, filters: Iterable[QuotaFilter], strict: bool
) -> dict[QuotaEntity, dict[str, float]]:
    """The entities matching every filter component (none: every entity; ``strict``: only
    entities with no other entity type), with their quotas."""
    R = DescribeClientQuotasRequest
    req = R(
        components=[
            R.ComponentData(entity_type=f.entity_type, match_type=f.match_type, match=f.match)
            for f in filters
        ],
        strict=strict,
    )
    resp = await conn.send(req)
    if resp.error_code:
        raise _error(resp.error_code, "describe client quotas", resp.error_message)
    return {
        entity_key((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries or []
    }


async def alter_client_quotas(
    conn: Any,
    entity: Mapping[str, str | None],
    changes: Mapping[str, float | None],
    validate_only: bool,
) -> None:
    """Set (a number) or remove (None) quotas of one entity; raises the broker's error."""
    if not entity:
        raise ValueError("an entity names a user, a client-id or both: {'client-id': 'c1'}")
    R = AlterClientQuotasRequest
    req = R(
        entries=[
            R.EntryData(
                entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                ops=[
                    R.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                    for k, v in changes.items()
                ],
            )
        ],
        validate_only=validate_only,
    )
    resp = await conn.send(req)
    for entry in resp.entries:
        if entry.error_code:
            raise _error(
                entry.error_code,
                f"alter client quotas of {describe_entity(entity)}",
                entry.error_message,
            )
