"""SCRAM credentials: where they live and how brokers learn of changes.

Only salted credentials are kept (``scram.ScramCredential``: salt, stored key, server key,
iterations); a password never reaches the disk or ZooKeeper.

- **cluster mode**: ZooKeeper's ``/config/users/<sanitized user>``, Kafka's format (its
  ``ScramCredentialUtils``)::

      {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

  The znode is shared with the user's client quotas (``producer_byte_rate`` ...): a write
  reads it, changes its own keys only and writes it back conditionally on the version it
  read (retrying when someone else wrote in between), then creates a
  ``/config/changes/config_change_<seq>`` notice ``{"version":2,"entity_path":"users/<u>"}``
  so that every broker reloads the user (``pylog.controller.configs``).
- **single node**: ``<log.dir>/scram-credentials.json``
  (``{"version":1,"users":{"alice":{"SCRAM-SHA-256":"salt=...,..."}}}``), written to a
  temporary file, fsynced and renamed.

``ScramCredentials`` is the broker's in-memory view. Lookups (from connections, on the
broker's loop) read an immutable dict that writers replace whole, so a lookup never sees a
half-applied change and needs no lock.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from pylog.security.sasl.scram import HASHES, ScramCredential

log = logging.getLogger("pylog.security.sasl.credentials")

FILE_NAME = "scram-credentials.json"


def sanitize(name: str) -> str:
    """A user name as a znode name (Kafka's ``Sanitizer.sanitize``: URL encoding, ``*``
    and ``~`` escaped too)."""
    return urllib.parse.quote(name, safe="").replace("*", "%2A").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def scram_entries(raw: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials among an entity config's keys (others, quotas, are ignored);
    malformed ones are skipped with a warning."""
    out: dict[str, ScramCredential] = {}
    for mechanism in HASHES:
        text = raw.get(mechanism)
        if text is None:
            continue
        try:
            out[mechanism] = ScramCredential.from_text(text)
        except ValueError as exc:
            log.warning("ignoring a malformed %s credential: %s", mechanism, exc)
    return out


class ScramCredentials:
    """{user: {mechanism: ScramCredential}}, replaced whole on every change."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        entry = self._users.get(user)
        return None if entry is None else entry.get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return self._users

    def set_user(self, user: str, creds: Mapping[str, ScramCredential]) -> None:
        users = dict(self._users)
        if creds:
            users[user] = dict(creds)
        else:
            users.pop(user, None)
        old = self._users.get(user, {})
        self._users = users
        if set(old) != set(creds) or any(old[m] != creds[m] for m in creds if m in old):
            log.info("SCRAM credentials of user %r: %s", user, ", ".join(sorted(creds)) or "none")

    def replace_all(self, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        self._users = {u: dict(c) for u, c in users.items() if c}

    # --- single node --------------------------------------------------------------------

    @staticmethod
    def read_file(path: str) -> dict[str, dict[str, ScramCredential]]:
        """The credentials of ``path`` ({} when absent).

        Raises:
            ValueError: the file is unreadable or not a version 1 credential file.
        """
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read the SCRAM credentials ({exc})") from None
        users = data.get("users") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(users, dict):
            raise ValueError(f"{path}: not a version 1 SCRAM credential file")
        return {u: scram_entries(raw) for u, raw in users.items() if isinstance(raw, dict)}

    @staticmethod
    def write_file(path: str, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        body = {"version": 1, "users": {u: {m: c.to_text() for m, c in sorted(creds.items())}
                                        for u, creds in sorted(users.items()) if creds}}
        data = json.dumps(body, indent=1).encode("utf-8")
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


# --- ZooKeeper (run on the ZooKeeper thread) ----------------------------------------------------


def zk_read_users(store: Any) -> dict[str, dict[str, ScramCredential]]:
    """Every user under ``/config/users`` that has SCRAM credentials."""
    out = {}
    for path, raw in store.get_quota_entity_configs().items():
        kind, _, name = path.partition("/")
        if kind != "users" or "/" in name:
            continue
        creds = scram_entries(raw)
        if creds:
            out[desanitize(name)] = creds
    return out


def zk_read_user(store: Any, user: str) -> dict[str, ScramCredential]:
    return scram_entries(store.get_entity_config("users", sanitize(user)))


def zk_alter_user(store: Any, user: str, upsert: Mapping[str, ScramCredential],
                  delete: Iterable[str]) -> dict[str, ScramCredential]:
    """Change the SCRAM keys of ``/config/users/<user>`` (quota keys stay; conditional on
    the version read, ``ZkStore.update_entity_config``), then write a change notice.
    Returns the user's credentials as written."""
    delete = list(delete)

    def change(config: dict[str, str]) -> None:
        for mechanism in delete:
            config.pop(mechanism, None)
        for mechanism, cred in upsert.items():
            config[mechanism] = cred.to_text()
    return scram_entries(store.update_entity_config("users", sanitize(user), change))
