"""The broker's SCRAM credentials: loading, change notices, and the KIP-554 admin APIs.

``ScramService`` owns the broker's ``ScramCredentials`` (what SCRAM listeners check) and
keeps it current: on a single node from ``<log.dir>/scram-credentials.json``; in cluster
mode from ZooKeeper at start (``load_from_zookeeper``) and on every ``users/<u>``
config-change notice (``reload_user``, called by ``pylog.controller.configs``). Storage and
formats: ``pylog.security.sasl.credentials``.

AlterUserScramCredentials follows Kafka's rules (``ZkAdminManager``): per user, every
alteration is checked first, and one bad alteration fails all of that user's (others are
unaffected): an empty name or empty salt/salted password is UNACCEPTABLE_CREDENTIAL,
iterations outside 4096-16384 too, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, the same
user and mechanism twice DUPLICATE_RESOURCE, deleting a credential that does not exist
RESOURCE_NOT_FOUND.

Event-loop affinity: the broker's loop; files and ZooKeeper on the executor / ZK thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from typing import Any

from pylog import errors
from pylog.security.sasl import credentials as store
from pylog.security.sasl.credentials import ScramCredentials
from pylog.security.sasl.scram import (
    MECHANISM_IDS,
    MECHANISM_NAMES,
    ScramCredential,
    check_iterations,
    credential_from_salted,
)

log = logging.getLogger("pylog.security.sasl.credentials")

# (error class, message) as Kafka's ZkAdminManager words them.
_EMPTY_USER = (errors.UnacceptableCredentialError, "Username must not be empty")
_UNKNOWN_MECH = (errors.UnsupportedSaslMechanismError, "Unknown SCRAM mechanism")
_DUPLICATE = (errors.DuplicateResourceError,
              "A user credential cannot be altered twice in the same request")
_NOT_FOUND = (errors.ResourceNotFoundError,
              "Attempt to delete a user credential that does not exist")


class ScramService:
    """See the module docstring."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.credentials = ScramCredentials()
        self._lock = asyncio.Lock()

    def _file(self) -> str:
        return os.path.join(self.broker.log_manager.log_dir, store.FILE_NAME)

    # --- loading ----------------------------------------------------------------------------

    def load_from_file(self) -> None:
        """At start on a single node.

        Raises:
            KafkaError: the file is unreadable (fix or remove it).
        """
        try:
            self.credentials.replace_all(store.ScramCredentials.read_file(self._file()))
        except ValueError as exc:
            raise errors.KafkaError(f"{exc}; fix or remove the file and start again") from None
        if self.credentials.users():
            log.info("SCRAM credentials of %d users loaded", len(self.credentials.users()))

    async def load_from_zookeeper(self) -> None:
        cluster = self.broker.cluster
        users = await cluster.zk(store.zk_read_users, cluster.store)
        self.credentials.replace_all(users)
        if users:
            log.info("SCRAM credentials of %d users loaded from ZooKeeper", len(users))

    async def reload_user(self, sanitized: str) -> None:
        """A ``users/<u>`` change notice: read the user's znode again."""
        if "/" in sanitized:
            return  # users/<u>/clients/<c>: a quota entity only
        user = store.desanitize(sanitized)
        cluster = self.broker.cluster
        creds = await cluster.zk(store.zk_read_user, cluster.store, user)
        self.credentials.set_user(user, creds)

    # --- DescribeUserScramCredentials --------------------------------------------------------

    def describe(self, users: Iterable[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
        """[(user, error code, message, [(mechanism id, iterations)])]."""
        known = self.credentials.users()
        names = sorted(known) if users is None else list(users)
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        out: list[tuple[str, int, str | None, list[tuple[int, int]]]] = []
        for name in dict.fromkeys(names):
            if counts[name] > 1:
                out.append((name, errors.DuplicateResourceError.code,
                            "Cannot describe SCRAM credentials for the same user twice in a "
                            "single request", []))
                continue
            creds = known.get(name)
            if not creds:
                out.append((name, errors.ResourceNotFoundError.code,
                            f"Attempt to describe a user credential that does not exist: {name}", []))
                continue
            out.append((name, 0, None, [(MECHANISM_IDS[m], c.iterations)
                                        for m, c in sorted(creds.items())]))
        return out

    # --- AlterUserScramCredentials -----------------------------------------------------------

    async def alter(self, deletions: list[Any], upsertions: list[Any]) -> list[tuple[str, int, str | None]]:
        """[(user, error code, message)] in the order users first appear."""
        users: dict[str, tuple[type[errors.ApiError], str] | None] = {}
        seen: dict[tuple[str, int], int] = {}
        for alt in list(deletions) + list(upsertions):
            users.setdefault(alt.name, None)
            seen[(alt.name, alt.mechanism)] = seen.get((alt.name, alt.mechanism), 0) + 1

        def fail(user: str, err: tuple[type[errors.ApiError], str]) -> None:
            if users.get(user) is None:
                users[user] = err

        current = self.credentials.users()
        for alt in deletions:
            if not alt.name:
                fail(alt.name, _EMPTY_USER)
            elif alt.mechanism not in MECHANISM_NAMES:
                fail(alt.name, _UNKNOWN_MECH)
            elif seen[(alt.name, alt.mechanism)] > 1:
                fail(alt.name, _DUPLICATE)
            elif MECHANISM_NAMES[alt.mechanism] not in current.get(alt.name, {}):
                fail(alt.name, _NOT_FOUND)
        for alt in upsertions:
            if not alt.name:
                fail(alt.name, _EMPTY_USER)
            elif alt.mechanism not in MECHANISM_NAMES:
                fail(alt.name, _UNKNOWN_MECH)
            elif seen[(alt.name, alt.mechanism)] > 1:
                fail(alt.name, _DUPLICATE)
            elif (why := check_iterations(alt.iterations)) is not None:
                fail(alt.name, (errors.UnacceptableCredentialError, why))
            elif not alt.salt or not alt.salted_password:
                fail(alt.name, (errors.UnacceptableCredentialError,
                                "Salt and salted password must not be empty"))
        out: list[tuple[str, int, str | None]] = []
        async with self._lock:
            for user, err in users.items():
                if err is not None:
                    out.append((user, err[0].code, err[1]))
                    continue
                dels = [MECHANISM_NAMES[a.mechanism] for a in deletions if a.name == user]
                ups = {MECHANISM_NAMES[a.mechanism]: credential_from_salted(
                    MECHANISM_NAMES[a.mechanism], bytes(a.salted_password), bytes(a.salt),
                    a.iterations) for a in upsertions if a.name == user}
                await self._write(user, ups, dels)
                out.append((user, 0, None))
        return out

    async def _write(self, user: str, upsert: dict[str, ScramCredential], delete: list[str]) -> None:
        cluster = self.broker.cluster
        if cluster is not None:
            creds = await cluster.zk(store.zk_alter_user, cluster.store, user, upsert, delete)
            self.credentials.set_user(user, creds)
            return
        creds = dict(self.credentials.users().get(user, {}))
        for m in delete:
            creds.pop(m, None)
        creds.update(upsert)
        users = dict(self.credentials.users())
        users[user] = creds
        await asyncio.get_running_loop().run_in_executor(
            self.broker.executor, store.ScramCredentials.write_file, self._file(), users)
        self.credentials.set_user(user, creds)
