"""Admin calls about SCRAM credentials (KIP-554): DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51), sent to any broker.

The password never leaves the client: an upsertion sends a random 32-byte salt and the
salted password (PBKDF2 with the mechanism's hash and the iterations), from which the broker
derives the stored and server keys, as Kafka's admin client does. Event-loop affinity: the
admin's loop.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from pylog import errors
from pylog.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from pylog.security.sasl.scram import (
    DEFAULT_ITERATIONS,
    MECHANISM_IDS,
    MECHANISM_NAMES,
    salted_password,
)


def _error(code: int, user: str, message: str | None) -> errors.ApiError:
    cls = errors.error_for_code(code) or errors.UnknownServerError
    return cls(f"user {user!r}: {cls.name}" + (f": {message}" if message else ""))


async def describe_user_scram_credentials(conn: Any, users: Iterable[str] | None
                                          ) -> dict[str, dict[str, int]]:
    """{user: {mechanism: iterations}} (all users with credentials when ``users`` is None).

    Raises:
        ResourceNotFoundError: a named user has no credential (and the other errors).
    """
    R = DescribeUserScramCredentialsRequest
    req = R(users=None if users is None else [R.UserName(name=u) for u in users])
    resp = await conn.send(req)
    if resp.error_code:
        raise _error(resp.error_code, "*", resp.error_message)
    out: dict[str, dict[str, int]] = {}
    for r in resp.results:
        if r.error_code:
            raise _error(r.error_code, r.user, r.error_message)
        out[r.user] = {MECHANISM_NAMES.get(c.mechanism, f"UNKNOWN({c.mechanism})"): c.iterations
                       for c in r.credential_infos}
    return out


async def alter_user_scram_credentials(conn: Any, upsertions: Mapping[str, Mapping[str, Any]],
                                       deletions: Mapping[str, Iterable[str]]) -> None:
    """Set or delete credentials: ``upsertions`` {user: {mechanism: (password, iterations)
    or password}}, ``deletions`` {user: [mechanism, ...]}.

    Raises:
        UnacceptableCredentialError, UnsupportedSaslMechanismError, ResourceNotFoundError,
        DuplicateResourceError: as the broker answers (the first failing user).
    """
    R = AlterUserScramCredentialsRequest
    ups, dels = [], []
    for user, mechs in upsertions.items():
        for mechanism, spec in mechs.items():
            password, iterations = (spec, DEFAULT_ITERATIONS) if isinstance(spec, str) else spec
            mech_id = MECHANISM_IDS.get(mechanism)
            if mech_id is None:
                raise errors.UnsupportedSaslMechanismError(f"{mechanism} is not a SCRAM mechanism")
            salt = secrets.token_bytes(32)
            ups.append(R.ScramCredentialUpsertion(
                name=user, mechanism=mech_id, iterations=int(iterations), salt=salt,
                salted_password=salted_password(mechanism, password, salt, int(iterations))))
    for user, names in deletions.items():
        for mechanism in names:
            mech_id = MECHANISM_IDS.get(mechanism)
            if mech_id is None:
                raise errors.UnsupportedSaslMechanismError(f"{mechanism} is not a SCRAM mechanism")
            dels.append(R.ScramCredentialDeletion(name=user, mechanism=mech_id))
    resp = await conn.send(R(deletions=dels, upsertions=ups))
    for r in resp.results:
        if r.error_code:
            raise _error(r.error_code, r.user, r.error_message)
